package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

var (
	window1 = record.WindowSummary{
		StartNs: at("2026-01-01T00:00:00Z"), EndNs: at("2026-01-01T01:00:00Z"),
		Packets: 1000, Malformed: 3, Skipped: 5, Keys: 992, Distinct: 120, Dropped: 0,
		MalformedBy: map[string]uint64{"truncated": 2, "bad_header": 1},
		SkippedBy:   map[string]uint64{"not_ip": 5},
	}
	window2 = record.WindowSummary{
		StartNs: at("2026-01-01T01:00:00Z"), EndNs: at("2026-01-01T01:30:00.25Z"),
		Packets: 500, Keys: 493, Distinct: 30, Dropped: 7,
		MalformedBy: map[string]uint64{},
		DroppedBy:   map[string]uint64{"ring_full": 7},
		Final:       true,
	}
	// Written by hand from docs/architecture.md#records-and-summaries and
	// the SummaryWriter comment.
	summary1 = `{"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T01:00:00Z","packets":1000,"malformed":3,"skipped":5,"keys":992,"prefiltered":0,"distinct":120,"dropped":0,"malformed_by":{"bad_header":1,"truncated":2},"skipped_by":{"not_ip":5},"dropped_by":{},"final":false,"late":0,"late_by":{},"distinct_estimate":0,"export_dropped":{}}` + "\n"
	summary2 = `{"window_start":"2026-01-01T01:00:00Z","window_end":"2026-01-01T01:30:00.25Z","packets":500,"malformed":0,"skipped":0,"keys":493,"prefiltered":0,"distinct":30,"dropped":7,"malformed_by":{},"skipped_by":{},"dropped_by":{"ring_full":7},"final":true,"late":0,"late_by":{},"distinct_estimate":0,"export_dropped":{}}` + "\n"
	// The run totals line of windows 1 and 2 (of kind pair, without
	// exports): their sums, by hand.
	runTotals12 = `{"run_totals":{"windows":2,"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T01:30:00.25Z","packets":1500,"malformed":3,"skipped":5,"keys":1485,"prefiltered":0,"distinct":150,"dropped":7,"malformed_by":{"bad_header":1,"truncated":2},"skipped_by":{"not_ip":5},"dropped_by":{"ring_full":7},"late":0,"late_by":{},"key":"pair","exports":{}}}` + "\n"
	totals12    = "totals: packets 1500, malformed 3 (bad_header 1, truncated 2), skipped 5 (not_ip 5), keys 1485, distinct 150, dropped 7 (ring_full 7), windows 2\n"
)

func TestSummaryLines(t *testing.T) {
	var out bytes.Buffer
	sw := NewSummaryWriter(&out)
	if err := sw.Window(&record.Summary{WindowSummary: window1}); err != nil {
		t.Fatal(err)
	}
	// Nothing is buffered: the line is out as soon as the window closes.
	if got := out.String(); got != summary1 {
		t.Errorf("after window 1:\n got %s\nwant %s", got, summary1)
	}
	if err := sw.Window(&record.Summary{WindowSummary: window2}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != summary1+summary2 {
		t.Errorf("after window 2:\n got %s\nwant %s", got, summary1+summary2)
	}
	for line := range strings.Lines(out.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("invalid JSON %s: %v", line, err)
		}
		for _, field := range []string{"window_start", "window_end", "packets", "malformed", "skipped", "keys", "distinct", "dropped"} {
			if _, ok := m[field]; !ok {
				t.Errorf("no %s in %s", field, line)
			}
		}
	}
}

func TestReporter(t *testing.T) {
	var out, summary, totals bytes.Buffer
	r, err := New(Config{Out: &out, Format: "text", Kind: flow.KeyPair, Summary: &summary, Totals: &totals})
	if err != nil {
		t.Fatal(err)
	}
	rec := recordCases[3] // pair/v4/window
	if err := r.Record(&rec.rec); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("record written before its window closed: want it buffered")
	}
	if err := r.Window(&window1); err != nil {
		t.Fatal(err)
	}
	// The Reporter's summaries are the SummaryWriter's lines with the
	// Config's kind in them.
	pair1 := strings.Replace(summary1, `"final":false,`, `"final":false,"key":"pair",`, 1)
	pair2 := strings.Replace(summary2, `"final":true,`, `"final":true,"key":"pair",`, 1)
	if out.String() != rec.text+"\n" || summary.String() != pair1 {
		t.Errorf("after window 1: records %q, summary %q; want the window's records flushed and its summary written", out.String(), summary.String())
	}
	if err := r.Record(&rec.rec); err != nil {
		t.Fatal(err)
	}
	if err := r.Window(&window2); err != nil {
		t.Fatal(err)
	}
	if totals.Len() != 0 {
		t.Errorf("totals written before Close")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if want := rec.text + "\n" + rec.text + "\n"; out.String() != want {
		t.Errorf("records:\n got %q\nwant %q", out.String(), want)
	}
	// Without exports the summary output is the windows' lines alone.
	if summary.String() != pair1+pair2 {
		t.Errorf("summary:\n got %s\nwant %s", summary.String(), pair1+pair2)
	}
	if got := AppendRunTotals(nil, r.Totals()); string(got) != runTotals12 {
		t.Errorf("run totals:\n got %s\nwant %s", got, runTotals12)
	}
	if totals.String() != totals12 {
		t.Errorf("totals:\n got %q\nwant %q", totals.String(), totals12)
	}
	if err := r.Record(&rec.rec); err == nil {
		t.Errorf("Record after Close succeeded")
	}
	if err := r.Close(); err == nil {
		t.Errorf("second Close succeeded")
	}
}

func TestReporterOptionalOutputs(t *testing.T) {
	var totals bytes.Buffer
	r, err := New(Config{Kind: flow.KeySrc, Totals: &totals})
	if err != nil {
		t.Fatal(err)
	}
	rec := recordCases[0].rec
	if err := r.Record(&rec); err != nil {
		t.Fatal(err)
	}
	if err := r.Window(&record.WindowSummary{Final: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if want := "totals: packets 0, malformed 0, skipped 0, keys 0, distinct 0, dropped 0, windows 1\n"; totals.String() != want {
		t.Errorf("totals:\n got %q\nwant %q", totals.String(), want)
	}

	if _, err := New(Config{Format: "yaml", Kind: flow.KeySrc}); !errors.Is(err, ErrFormat) {
		t.Errorf("format yaml without Out: %v, want ErrFormat", err)
	}
	if _, err := New(Config{Format: "csv"}); !errors.Is(err, flow.ErrBadKind) {
		t.Errorf("no kind: %v, want flow.ErrBadKind", err)
	}
	// An observer name a spool file can hold, and one it cannot.
	if _, err := New(Config{Kind: flow.KeySrc, Observer: strings.Repeat("r", record.MaxObserverLen)}); err != nil {
		t.Errorf("observer of %d bytes: %v", record.MaxObserverLen, err)
	}
	if _, err := New(Config{Kind: flow.KeySrc, Observer: strings.Repeat("r", record.MaxObserverLen+1)}); !errors.Is(err, record.ErrObserver) {
		t.Errorf("observer of %d bytes: %v, want ErrObserver", record.MaxObserverLen+1, err)
	}
}

// TestReporterSummaryFailure: a failed summary write stops the Reporter;
// its error comes back from every later call, Close included, and the
// totals are still printed.
func TestReporterSummaryFailure(t *testing.T) {
	var out, totals bytes.Buffer
	src1 := strings.Replace(summary1, `"final":false,`, `"final":false,"key":"src",`, 1)
	summary := &fullWriter{limit: len(src1) + 10}
	r, err := New(Config{Out: &out, Format: "jsonl", Kind: flow.KeySrc, Summary: summary, Totals: &totals})
	if err != nil {
		t.Fatal(err)
	}
	rec := recordCases[0].rec
	if err := r.Window(&window1); err != nil {
		t.Fatal(err)
	}
	r.Record(&rec)
	first := r.Window(&window2)
	if !errors.Is(first, syscall.ENOSPC) {
		t.Fatalf("second summary: %v, want ENOSPC", first)
	}
	if summary.buf.String() != src1 {
		t.Errorf("summary file %q, want only the first line", summary.buf.String())
	}
	if out.String() != recordCases[0].jsonl+"\n" {
		t.Errorf("records %q: want the window's record flushed before its summary", out.String())
	}
	if err := r.Record(&rec); err != first {
		t.Errorf("Record after the failure: %v, want the first error", err)
	}
	if err := r.Close(); err != first {
		t.Errorf("Close: %v, want the first error", err)
	}
	if totals.String() != totals12 {
		t.Errorf("totals after the failure:\n got %q\nwant %q", totals.String(), totals12)
	}
}

package export

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/report"
)

// TestReporterExports: the Reporter gives an export Queue the records and
// summaries the files get, never waits for it, and puts in each summary
// what the Queue dropped since the one before, with the Observer, Filter
// and key kind; the totals end with a line per export.
func TestReporterExports(t *testing.T) {
	sink := &fakeSink{gate: make(chan struct{})} // hangs until the end
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 10, MaxQueued: 20, BatchAge: time.Hour})
	var out, summary, totals bytes.Buffer
	r, err := report.New(report.Config{Out: &out, Format: "jsonl", Kind: flow.Key5Tuple, Summary: &summary, Totals: &totals,
		Observer: "r1", Filter: "exact", Exports: []record.Export{q}})
	if err != nil {
		t.Fatal(err)
	}
	recs := genRecords(0, 400)
	for i := range recs[:300] {
		if err := r.Record(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	w1 := record.WindowSummary{StartNs: at("2026-01-01T00:00:00Z"), EndNs: at("2026-01-01T01:00:00Z"), Distinct: 300}
	if err := r.Window(&w1); err != nil {
		t.Fatal(err)
	}
	for i := range recs[300:] {
		r.Record(&recs[300+i])
	}
	w2 := record.WindowSummary{StartNs: w1.EndNs, EndNs: w1.EndNs + int64(time.Hour), Distinct: 100, Final: true}
	if err := r.Window(&w2); err != nil {
		t.Fatal(err)
	}
	close(sink.gate)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// The Queue held 20 records (two batches of 10); the other 280 of the
	// first window and the 100 of the second were dropped.
	sums, err := report.ReadSummaries(strings.NewReader(summary.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 2 {
		t.Fatalf("%d summaries", len(sums))
	}
	for i, want := range []uint64{280, 100} {
		s := sums[i]
		if s.Observer != "r1" || s.Filter != "exact" || s.Key != flow.Key5Tuple || s.ExportDropped["fake://dest"]["queue_full"] != want || len(s.ExportDropped) != 1 {
			t.Errorf("summary %d: observer %q filter %q key %v export_dropped %v; want r1, exact, 5tuple, queue_full %d", i, s.Observer, s.Filter, s.Key, s.ExportDropped, want)
		}
	}
	if got := strings.Count(out.String(), "\n"); got != 400 {
		t.Errorf("%d records in the file, want 400: a stuck export must not cost the file any", got)
	}
	if got := sink.records(); !slices.Equal(got, recs[:20]) {
		t.Errorf("export got %d records, want the first 20", len(got))
	}
	_, windows, _ := sink.snapshot()
	if len(windows) != 2 || windows[0].ExportDropped["fake://dest"]["queue_full"] != 280 || windows[1].Observer != "r1" || windows[1].Key != flow.Key5Tuple {
		t.Errorf("export got summaries %+v", windows)
	}
	wantTotals := "totals: packets 0, malformed 0, skipped 0, keys 0, distinct 400, dropped 0, windows 2\n" +
		"export fake://dest: sent 20 records and 2 window summaries, dropped 380 (queue_full 380)\n"
	if totals.String() != wantTotals {
		t.Errorf("totals:\n got %q\nwant %q", totals.String(), wantTotals)
	}
	// The summary output ends with the run totals: the windows' losses,
	// summed, as on stderr.
	if rt := runTotalsOf(t, summary.String()); rt.Exports["fake://dest"].Dropped != 380 || rt.Exports["fake://dest"].DroppedBy["queue_full"] != 380 {
		t.Errorf("run totals %+v, want 380 dropped (queue_full 380)", rt)
	}
}

// runTotalsOf returns the run totals line of a summary output, its last.
func runTotalsOf(t *testing.T, summaries string) (rt struct {
	Windows uint64
	Exports map[string]struct {
		Sent, Dropped uint64
		DroppedBy     map[string]uint64 `json:"dropped_by"`
	}
}) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(summaries, "\n"), "\n")
	var line struct {
		RunTotals *json.RawMessage `json:"run_totals"`
	}
	last := lines[len(lines)-1]
	if err := json.Unmarshal([]byte(last), &line); err != nil || line.RunTotals == nil {
		t.Fatalf("the last summary line %q is not the run totals: %v", last, err)
	}
	if err := json.Unmarshal(*line.RunTotals, &rt); err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestReporterRunTotalsCountShutdown: what a destination that is down for
// the whole run still holds when the drain time runs out is lost after
// the last window's summary was written, which therefore cannot count it;
// the run totals after it do, and Reporter.Totals gives them to the
// caller (replay's exit status).
func TestReporterRunTotalsCountShutdown(t *testing.T) {
	down := &fakeSink{fail: func(string, *record.Batch) error { return errDown }}
	q := newTestQueue(t, down, QueueConfig{BatchSize: 10, BatchAge: time.Hour, DrainTimeout: 50 * time.Millisecond,
		RetryMin: time.Millisecond, RetryMax: time.Millisecond})
	var summary bytes.Buffer
	r, err := report.New(report.Config{Kind: flow.KeySrc, Summary: &summary, Exports: []record.Export{q}})
	if err != nil {
		t.Fatal(err)
	}
	recs := genRecords(0, 95)
	for i := range recs {
		r.Record(&recs[i])
	}
	w := record.WindowSummary{StartNs: at("2026-01-01T00:00:00Z"), EndNs: at("2026-01-01T01:00:00Z"), Distinct: 95, Final: true}
	if err := r.Window(&w); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	sums, err := report.ReadSummaries(strings.NewReader(summary.String()))
	if err != nil || len(sums) != 1 || len(sums[0].ExportDropped) != 0 {
		t.Fatalf("summaries %+v, %v: want one, which knew of no loss", sums, err)
	}
	// 95 records and the window's summary.
	rt := runTotalsOf(t, summary.String())
	if e := rt.Exports["fake://dest"]; rt.Windows != 1 || e.Sent != 0 || e.Dropped != 96 || len(e.DroppedBy) != 1 || e.DroppedBy["shutdown"] != 96 {
		t.Errorf("run totals %+v, want 96 dropped (shutdown 96)", rt)
	}
	if got := r.Totals(); got == nil || got.Lost() != 96 {
		t.Errorf("Reporter.Totals() = %+v, want 96 lost", got)
	}
}

// TestReporterExportSurvivesFileError: when the record file fails, the
// run stops with its error, and the exports are still closed (drained).
func TestReporterExportSurvivesFileError(t *testing.T) {
	sink := &fakeSink{}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 100, BatchAge: time.Hour})
	r, err := report.New(report.Config{Out: enospcWriter{}, Kind: flow.Key5Tuple, Exports: []record.Export{q}})
	if err != nil {
		t.Fatal(err)
	}
	recs := genRecords(0, 256) // the Reporter hands records on 256 at a time
	var first error
	for i := range recs {
		if first = r.Record(&recs[i]); first != nil {
			break
		}
	}
	if first == nil {
		first = r.Flush()
	}
	if !errors.Is(first, syscall.ENOSPC) {
		t.Fatalf("error %v, want ENOSPC", first)
	}
	if err := r.Close(); err != first {
		t.Errorf("Close: %v, want the first error", err)
	}
	if got := sink.records(); len(got) != 256 || sink.closes != 1 {
		t.Errorf("export got %d records and %d closes; want the %d handed on before the error, and closed", len(got), sink.closes, 256)
	}
}

// enospcWriter fails every write as a full disk does.
type enospcWriter struct{}

func (enospcWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

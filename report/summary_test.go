package report

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/record/recordtest"
)

// fullSummary has every field set (recordtest.FullSummary), so that a
// round trip that lost one would show.
var fullSummary = recordtest.FullSummary()

// fullSummaryLine is fullSummary's line, written by hand from the
// SummaryWriter comment: the old fields in their order, then the new ones,
// key beside filter.
const fullSummaryLine = `{"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T00:01:00.000000001Z","packets":1010,"malformed":3,"skipped":5,"keys":990,"prefiltered":40,"distinct":120,"dropped":7,"malformed_by":{"bad_header":1,"truncated":2},"skipped_by":{"not_ip":5},"dropped_by":{"ring_full":7},"final":true,"observer":"r1.example.net","filter":"qht:mem=64MiB,buckets=4,fpbits=12","key":"dst","late":5,"late_by":{"window_closed":5},"distinct_estimate":121,"sketch":"AQ4A/4A=","export_dropped":{"ipfix://127.0.0.1:4739":{"queue_full":3,"shutdown":1}}}` + "\n"

func TestSummaryNewFields(t *testing.T) {
	var out bytes.Buffer
	if err := NewSummaryWriter(&out).Window(&fullSummary); err != nil {
		t.Fatal(err)
	}
	if out.String() != fullSummaryLine {
		t.Errorf("got  %s\nwant %s", out.String(), fullSummaryLine)
	}
}

func TestSummaryRoundTrip(t *testing.T) {
	var out bytes.Buffer
	sw := NewSummaryWriter(&out)
	// Maps the writer shows as {} read back as empty maps.
	w1 := record.Summary{WindowSummary: window1}
	w1.DroppedBy, w1.LateBy, w1.ExportDropped = map[string]uint64{}, map[string]uint64{}, map[string]map[string]uint64{}
	w2 := record.Summary{WindowSummary: window2, Observer: "r2", Key: flow.Key5Tuple}
	w2.SkippedBy, w2.LateBy, w2.ExportDropped = map[string]uint64{}, map[string]uint64{}, map[string]map[string]uint64{}
	want := []record.Summary{w1, fullSummary, w2}
	for i := range want {
		if err := sw.Window(&want[i]); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadSummaries(strings.NewReader("\n" + out.String() + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	sr := NewSummaryReader(strings.NewReader("\n" + out.String()))
	for i := range want {
		var s record.Summary
		if err := sr.Read(&s); err != nil || sr.Line() != i+2 {
			t.Errorf("summary %d: %v at line %d, want line %d", i, err, sr.Line(), i+2)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, want)
	}
}

// TestSummaryReaderErrors: every kind of bad line is an error naming its
// line, and reading stops there.
func TestSummaryReaderErrors(t *testing.T) {
	good := strings.TrimSuffix(fullSummaryLine, "\n")
	replace := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("%q not in the line", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	for _, tc := range []struct {
		name, line, says string
	}{
		{"not JSON", "window_start=2026", "not a JSON object"},
		{"array", "[1,2]", "not a JSON object"},
		{"truncated", good[:len(good)-10], "unexpected EOF"},
		{"two objects", good + good, "more after"},
		{"missing packets", replace(`"packets":1010,`, ""), "no packets"},
		{"missing final", replace(`"final":true,`, ""), "no final"},
		{"negative", replace(`"keys":990`, `"keys":-1`), "keys"},
		{"fraction", replace(`"distinct":120`, `"distinct":1.5`), "distinct"},
		{"string count", replace(`"dropped":7`, `"dropped":"7"`), "dropped"},
		{"bad time", replace(`"window_start":"2026-01-01T00:00:00Z"`, `"window_start":"2026-01-01 00:00"`), "RFC 3339"},
		{"time out of range", replace(`"window_end":"2026-01-01T00:01:00.000000001Z"`, `"window_end":"3000-01-01T00:00:00Z"`), "out of range"},
		{"end before start", replace(`"window_end":"2026-01-01T00:01:00.000000001Z"`, `"window_end":"2025-01-01T00:00:00Z"`), "before window_start"},
		{"bad base64", replace(`"sketch":"AQ4A/4A="`, `"sketch":"not base64!"`), "sketch"},
		{"bad reason map", replace(`"late_by":{"window_closed":5}`, `"late_by":{"window_closed":"x"}`), "late_by"},
		{"bad export map", replace(`{"queue_full":3,"shutdown":1}`, `3`), "export_dropped"},
		{"unknown key kind", replace(`"key":"dst"`, `"key":"dest"`), `key: flow: invalid key kind "dest"`},
		{"empty key kind", replace(`"key":"dst"`, `"key":""`), "key: flow: invalid key kind"},
		{"key not a string", replace(`"key":"dst"`, `"key":2`), "key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input := good + "\n\n" + tc.line + "\n" + good + "\n"
			sr := NewSummaryReader(strings.NewReader(input))
			var s record.Summary
			if err := sr.Read(&s); err != nil {
				t.Fatalf("line 1: %v", err)
			}
			err := sr.Read(&s)
			var se *SummaryError
			if !errors.As(err, &se) || se.Line != 3 || !errors.Is(err, record.ErrSummary) {
				t.Fatalf("got %v; want a *SummaryError for line 3 wrapping ErrSummary", err)
			}
			if !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "line 3") {
				t.Errorf("error %q does not say %q and line 3", err, tc.says)
			}
			if err2 := sr.Read(&s); err2 != err {
				t.Errorf("read after the error: %v, want the same error", err2)
			}
		})
	}
}

// TestSummaryKey: every key kind is written as --key spells it, right
// after filter, and read back; an unknown kind (zero, or not a valid one)
// is left out and reads back as zero; a key no flowdedup writes is an
// error wrapping both ErrSummary and flow.ErrBadKind.
func TestSummaryKey(t *testing.T) {
	for _, c := range []struct {
		kind flow.KeyKind
		json string // what follows "filter":"exact"
	}{
		{flow.KeySrc, `,"key":"src","late":0`},
		{flow.KeyDst, `,"key":"dst","late":0`},
		{flow.KeyPair, `,"key":"pair","late":0`},
		{flow.Key5Tuple, `,"key":"5tuple","late":0`},
		{0, `,"late":0`},
		{flow.Key5Tuple + 1, `,"late":0`},
	} {
		in := record.Summary{WindowSummary: window1, Filter: "exact", Key: c.kind}
		line := record.AppendSummary(nil, &in)
		if !bytes.Contains(line, []byte(`"filter":"exact"`+c.json+`,`)) {
			t.Errorf("kind %v: line %s lacks %s after filter", c.kind, line, c.json)
		}
		var back record.Summary
		if err := record.ParseSummary(line[:len(line)-1], &back); err != nil {
			t.Fatalf("kind %v: %v", c.kind, err)
		}
		want := c.kind
		if !want.IsValid() {
			want = 0
		}
		if back.Key != want {
			t.Errorf("kind %v read back as %v, want %v", c.kind, back.Key, want)
		}
	}
	// Keys by network: the prefix lengths follow the kind.
	m, err := flow.ParseMask("24,64")
	if err != nil {
		t.Fatal(err)
	}
	in := record.Summary{WindowSummary: window1, Filter: "exact", Key: flow.KeySrc, Prefix: m}
	line := record.AppendSummary(nil, &in)
	if !bytes.Contains(line, []byte(`"filter":"exact","key":"src/24,64","late":0,`)) {
		t.Errorf("prefix 24,64: line %s lacks key src/24,64", line)
	}
	var back record.Summary
	if err := record.ParseSummary(line[:len(line)-1], &back); err != nil || back.Key != flow.KeySrc || back.Prefix != m {
		t.Errorf("key src/24,64 read back as %v/%v, %v", back.Key, back.Prefix, err)
	}
	bad := strings.Replace(fullSummaryLine, `"key":"dst"`, `"key":"dst/33"`, 1)
	if _, err := ReadSummaries(strings.NewReader(bad)); !errors.Is(err, record.ErrSummary) || !errors.Is(err, flow.ErrBadMask) {
		t.Errorf("key dst/33: %v, want ErrSummary and flow.ErrBadMask", err)
	}
	bad = strings.Replace(fullSummaryLine, `"key":"dst"`, `"key":"proto"`, 1)
	if _, err := ReadSummaries(strings.NewReader(bad)); !errors.Is(err, record.ErrSummary) || !errors.Is(err, flow.ErrBadKind) {
		t.Errorf("key proto: %v, want ErrSummary and flow.ErrBadKind", err)
	}
}

func TestSummaryReaderLongLine(t *testing.T) {
	line := `{"x":"` + strings.Repeat("a", MaxSummaryLine) + `"}`
	_, err := ReadSummaries(strings.NewReader(fullSummaryLine + line + "\n"))
	var se *SummaryError
	if !errors.As(err, &se) || se.Line != 2 || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("got %v, want a line-2 error saying it is too long", err)
	}
}

func TestSummaryReaderUnknownFields(t *testing.T) {
	// A newer flowdedup appends fields: they are ignored.
	line := strings.Replace(fullSummaryLine, `"final":true,`, `"final":true,"some_future_field":[1,{"a":2}],`, 1)
	got, err := ReadSummaries(strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !reflect.DeepEqual(got[0], fullSummary) {
		t.Errorf("got %+v, want fullSummary", got)
	}
	// An old summary without the new fields reads with them zero.
	got, err = ReadSummaries(strings.NewReader(`{"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T01:00:00Z","packets":1,"malformed":0,"skipped":0,"keys":1,"distinct":1,"dropped":0,"malformed_by":{},"skipped_by":{},"dropped_by":{},"final":true}`))
	if err != nil || len(got) != 1 || got[0].Packets != 1 || got[0].Sketch != nil || got[0].Observer != "" || got[0].Key != 0 {
		t.Errorf("old summary: %+v, %v", got, err)
	}
	if err := NewSummaryReader(strings.NewReader("")).Read(new(record.Summary)); err != io.EOF {
		t.Errorf("empty input: %v, want io.EOF", err)
	}
}

// FuzzSummaryReader: any input is read without a panic, and a line it
// accepts is written back as a line that reads back the same.
func FuzzSummaryReader(f *testing.F) {
	f.Add([]byte(fullSummaryLine))
	f.Add([]byte(`{"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T01:00:00Z","packets":1,"malformed":0,"skipped":0,"keys":1,"distinct":1,"dropped":0,"final":true}`))
	f.Add([]byte(`{"window_start":"1970-01-01T00:00:00Z","window_end":"1970-01-01T00:00:00Z","packets":0,"malformed":0,"skipped":0,"keys":0,"distinct":0,"dropped":0,"final":false,"sketch":""}`))
	f.Add([]byte("{}\n[]\n"))
	f.Add([]byte(`{"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T01:00:00Z","packets":1,"malformed":0,"skipped":0,"keys":1,"distinct":1,"dropped":0,"final":true,"spread":{"src":[{"addr":"10.0.0.1","distinct":3,"error":1}],"dst":[]}}`))
	f.Add([]byte(`{"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T01:00:00Z","packets":1,"malformed":0,"skipped":0,"keys":1,"distinct":1,"dropped":0,"final":true,"spread":{"dst":[{"addr":"10.0.0.0/24","distinct":3,"error":0}]}}`))
	f.Add([]byte(fullSummaryLine + "\n" + runTotalsExportsLine + `{"run_totals":{}}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sr := NewSummaryReader(bytes.NewReader(data))
		for range 100 {
			var s record.Summary
			if err := sr.Read(&s); err != nil {
				return
			}
			line := record.AppendSummary(nil, &s)
			var back record.Summary
			if err := record.ParseSummary(line[:len(line)-1], &back); err != nil {
				t.Fatalf("re-reading %s: %v", line, err)
			}
			if again := record.AppendSummary(nil, &back); !bytes.Equal(again, line) {
				t.Fatalf("not stable:\n%s%s", line, again)
			}
		}
	})
}

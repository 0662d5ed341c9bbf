package report

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// names are test observer names.
type names map[uint32]string

func (n names) ObserverName(id uint32) string { return n[id] }

// batchExport records the batches and summaries an export is given.
type batchExport struct {
	batches []record.Batch
	windows []record.Summary
}

func (e *batchExport) Records(b *record.Batch) error {
	c := *b
	c.Records = slices.Clone(b.Records)
	e.batches = append(e.batches, c)
	return nil
}
func (e *batchExport) Window(s *record.Summary) error              { e.windows = append(e.windows, *s); return nil }
func (e *batchExport) Flush() error                                { return nil }
func (e *batchExport) Close() error                                { return nil }
func (e *batchExport) TakeDropped(m *map[string]map[string]uint64) {}
func (e *batchExport) Stats() record.ExportStats                   { return record.ExportStats{Dest: "test"} }

// TestObservers: with Config.Observers, records name their exporter, each
// export batch holds one observer's records under its name, and each
// summary's exporters count their records of the window.
func TestObservers(t *testing.T) {
	const w = int64(60e9)
	rec := func(i int, obs uint32, win int64) record.Record {
		k := flow.MakeKey(flow.KeySrc, netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), netip.Addr{}, 0, 0, 0)
		return record.Record{Key: k, TimeNs: win*w + int64(i), WindowNs: win * w, WindowEndNs: (win + 1) * w, ObserverID: obs, Windowed: true}
	}
	n := names{2: "192.0.2.1#0", 3: "192.0.2.2#7"}
	for _, format := range Formats {
		var out, sums bytes.Buffer
		exp := &batchExport{}
		r, err := New(Config{
			Out: &out, Format: format, Kind: flow.KeySrc, Summary: &sums, Observer: "collector",
			Exports: []record.Export{exp}, Observers: n,
			Annotate: func(s *record.Summary) {
				s.Collect = &record.CollectCounts{Datagrams: 5, Exporters: []record.ExporterCounts{{ID: 2, Exporter: n[2], Protocol: "ipfix", Records: 9}}}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			obs := uint32(2 + i%2)
			for _, win := range []int64{0, 1} {
				rr := rec(i, obs, win)
				if err := r.Record(&rr); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, win := range []int64{0, 1} {
			if err := r.Window(&record.WindowSummary{StartNs: win * w, EndNs: (win + 1) * w, Distinct: 10, Final: win == 1, Windowed: true}); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		switch format {
		case "jsonl":
			if len(lines) != 20 || !strings.HasSuffix(lines[0], `,"exporter":"192.0.2.1#0"}`) || !strings.HasSuffix(lines[2], `,"exporter":"192.0.2.2#7"}`) {
				t.Errorf("jsonl: %d lines, first %q, third %q", len(lines), lines[0], lines[2])
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(lines[1]), &v); err != nil || v["exporter"] != "192.0.2.1#0" {
				t.Errorf("jsonl: %q: %v %v", lines[1], v, err)
			}
		case "csv":
			if lines[0] != "ts,src,window,exporter" || !strings.HasSuffix(lines[1], ",192.0.2.1#0") {
				t.Errorf("csv: %q, %q", lines[0], lines[1])
			}
		case "text":
			if !strings.HasSuffix(lines[0], "10.0.0.0  192.0.2.1#0") {
				t.Errorf("text: %q", lines[0])
			}
		}
		got := map[string]int{}
		for _, b := range exp.batches {
			for _, rr := range b.Records {
				if n[rr.ObserverID] != b.Observer {
					t.Fatalf("a record of observer %d in a batch of %q", rr.ObserverID, b.Observer)
				}
			}
			got[b.Observer] += len(b.Records)
		}
		if got[n[2]] != 10 || got[n[3]] != 10 || len(got) != 2 {
			t.Errorf("exported records by observer %v", got)
		}
		if len(exp.windows) != 2 || exp.windows[0].Observer != "collector" {
			t.Fatalf("summaries %+v", exp.windows)
		}
		c := exp.windows[0].Collect
		if c == nil || len(c.Exporters) != 2 || c.Exporters[0].Distinct != 5 || c.Exporters[0].Records != 9 || c.Exporters[1].Exporter != n[3] || c.Exporters[1].Distinct != 5 {
			t.Errorf("summary's collect counts %+v", c)
		}
		var line struct {
			Collect record.CollectCounts `json:"collect"`
		}
		first, _, _ := strings.Cut(sums.String(), "\n")
		if err := json.Unmarshal([]byte(first), &line); err != nil || line.Collect.Datagrams != 5 || len(line.Collect.Exporters) != 2 {
			t.Errorf("summary line %s: %+v %v", first, line, err)
		}
	}
}

// TestObserversWithoutWindows: in a run without windows (collect --window
// 0) the one summary's exporters count all their records, whatever the
// summary's bounds: they are the packets' first and last times, not the
// records' window (which is none).
func TestObserversWithoutWindows(t *testing.T) {
	n := names{2: "192.0.2.1#0", 3: "192.0.2.2#7"}
	exp := &batchExport{}
	r, err := New(Config{
		Out: new(bytes.Buffer), Format: "jsonl", Kind: flow.KeySrc, Summary: new(bytes.Buffer), Observer: "collector",
		Exports: []record.Export{exp}, Observers: n,
		Annotate: func(s *record.Summary) {
			s.Collect = &record.CollectCounts{Exporters: []record.ExporterCounts{{ID: 2, Exporter: n[2], Protocol: "ipfix"}}}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// 7 records of observer 2 and 4 of observer 3, at times from
	// 1767225600 s (2026-01-01) on.
	const t0 = int64(1767225600e9)
	for i := range 11 {
		obs := uint32(2)
		if i >= 7 {
			obs = 3
		}
		k := flow.MakeKey(flow.KeySrc, netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), netip.Addr{}, 0, 0, 0)
		rec := record.Record{Key: k, TimeNs: t0 + int64(i)*1e9, ObserverID: obs}
		if err := r.Record(&rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Window(&record.WindowSummary{StartNs: t0, EndNs: t0 + 11e9, Distinct: 11, Final: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if len(exp.windows) != 1 || exp.windows[0].Collect == nil {
		t.Fatalf("summaries %+v", exp.windows)
	}
	got := map[string]uint64{}
	for _, e := range exp.windows[0].Collect.Exporters {
		got[e.Exporter] = e.Distinct
	}
	if got[n[2]] != 7 || got[n[3]] != 4 || len(got) != 2 {
		t.Errorf("exporters' distinct %v, want %s 7 and %s 4", got, n[2], n[3])
	}
}

package report

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/record"
)

// gathered returns the samples of the family name in reg: the label
// values joined by "," (in the labels' order of name) to the value.
func gathered(t *testing.T, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	out, err := gatherValues(reg, name)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// gatherValues is gathered for any goroutine: it returns its error.
func gatherValues(reg prometheus.Gatherer, name string) (map[string]float64, error) {
	fams, err := reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		if f.GetType().String() != "GAUGE" {
			return nil, fmt.Errorf("%s is a %v, want a gauge", name, f.GetType())
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[strings.Join(labels, ",")] = m.GetGauge().GetValue()
		}
	}
	return out, nil
}

// checkWindow is a Destination after the gauges: at each summary it reads
// the gauges back and compares them with that summary and with the
// window's count known independently.
type checkWindow struct {
	t       *testing.T
	reg     prometheus.Gatherer
	kind    string
	want    []uint64 // per window, from tshark (testdata/pcaps/README.md)
	windows int
}

func (c *checkWindow) Window(s *record.Summary) error {
	t := c.t
	i := c.windows
	c.windows++
	label := "kind=" + c.kind
	if got := gathered(t, c.reg, "flowdedup_window_distinct"); len(got) != 1 || got[label] != float64(s.Distinct) {
		t.Errorf("window %d: flowdedup_window_distinct %v, want {%s} %d (the summary's)", i, got, label, s.Distinct)
	}
	if i < len(c.want) && s.Distinct != c.want[i] {
		t.Errorf("window %d: distinct %d, want %d (tshark)", i, s.Distinct, c.want[i])
	}
	if got := gathered(t, c.reg, "flowdedup_window_distinct_estimate"); len(got) != 1 || got[label] != float64(s.DistinctEstimate) {
		t.Errorf("window %d: flowdedup_window_distinct_estimate %v, want {%s} %d", i, got, label, s.DistinctEstimate)
	}
	// Window 0 starts at 2026-01-01T00:00:00Z, Unix 1767225600, and
	// windows are a minute long.
	end := float64(1767225600 + 60*(i+1))
	if got := gathered(t, c.reg, "flowdedup_window_end_timestamp_seconds"); len(got) != 1 || got[""] != end {
		t.Errorf("window %d: flowdedup_window_end_timestamp_seconds %v, want %v", i, got, end)
	}
	if got := gathered(t, c.reg, "flowdedup_collect_exporter_window_distinct"); len(got) != 0 {
		t.Errorf("window %d: exporter gauges %v in a run that is not collect's", i, got)
	}
	return nil
}
func (c *checkWindow) Records(*record.Batch) error { return nil }
func (c *checkWindow) Flush() error                { return nil }
func (c *checkWindow) Close() error                { return nil }

// TestWindowGaugesReplay runs testdata/pcaps/windows.pcap (three 1-minute
// windows) through the real pipeline and Reporter, with a summary file and
// the window gauges, for each key kind. At each window's summary the
// gauges are that summary's values, and the summaries' distinct the
// tshark counts of the README; after the run the gauges equal the summary
// file's last line, read back, and the open windows' count is 0. Before
// the first window closes, the window gauges are absent, not 0.
func TestWindowGaugesReplay(t *testing.T) {
	want := map[flow.KeyKind][]uint64{ // testdata/pcaps/README.md, per 1-minute window
		flow.KeySrc:    {63, 63, 56},
		flow.KeyDst:    {28, 27, 27},
		flow.KeyPair:   {188, 181, 160},
		flow.Key5Tuple: {338, 341, 238},
	}
	for _, kind := range []flow.KeyKind{flow.KeySrc, flow.KeyDst, flow.KeyPair, flow.Key5Tuple} {
		t.Run(kind.String(), func(t *testing.T) {
			src, err := pcapfile.Open(filepath.Join("..", "testdata", "pcaps", "windows.pcap"))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			var p *pipeline.Pipeline
			gauges := NewWindowGauges(kind, func() pipeline.Stats { return p.Stats() })
			reg := prometheus.NewRegistry()
			reg.MustRegister(gauges)
			check := &checkWindow{t: t, reg: reg, kind: kind.String(), want: want[kind]}
			var summaries bytes.Buffer
			sink, err := New(Config{Kind: kind, Summary: &summaries, Destinations: []record.Destination{gauges, check}})
			if err != nil {
				t.Fatal(err)
			}
			p, err = pipeline.New(pipeline.Config{Workers: 2, Filter: "exact", Key: kind, Seed: 1, Window: 60e9}, sink)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"flowdedup_window_distinct", "flowdedup_window_distinct_estimate", "flowdedup_window_end_timestamp_seconds"} {
				if got := gathered(t, reg, name); len(got) != 0 {
					t.Fatalf("before any window: %s %v, want no sample", name, got)
				}
			}
			if got := gathered(t, reg, "flowdedup_open_window_distinct"); got["kind="+kind.String()] != 0 || len(got) != 1 {
				t.Fatalf("before any packet: flowdedup_open_window_distinct %v, want {kind=%s} 0", got, kind)
			}
			if err := p.Run(t.Context(), src); err != nil {
				t.Fatal(err)
			}
			if check.windows != 3 {
				t.Fatalf("%d windows, want 3", check.windows)
			}
			all, err := ReadSummaries(&summaries)
			if err != nil || len(all) != 3 {
				t.Fatalf("summary file: %d summaries, %v", len(all), err)
			}
			last := all[len(all)-1]
			label := "kind=" + kind.String()
			if got := gathered(t, reg, "flowdedup_window_distinct"); got[label] != float64(last.Distinct) || last.Distinct != want[kind][2] {
				t.Errorf("flowdedup_window_distinct %v, the file's last distinct %d, tshark's %d", got, last.Distinct, want[kind][2])
			}
			if got := gathered(t, reg, "flowdedup_window_distinct_estimate"); got[label] != float64(last.DistinctEstimate) {
				t.Errorf("flowdedup_window_distinct_estimate %v, the file's last distinct_estimate %d", got, last.DistinctEstimate)
			}
			// The estimate is a HyperLogLog's of precision 14 (16384
			// registers): for n <= 338 keys it is in its linear-counting
			// range, where only keys sharing a register are lost, about
			// n^2/(2*16384) < 4 of them on average; 8 keeps the check
			// sound (the run is deterministic: one seed) and still fails
			// an estimate of another window or kind.
			if d := int64(last.DistinctEstimate) - int64(want[kind][2]); d < -8 || d > 8 {
				t.Errorf("distinct_estimate %d, tshark's count %d", last.DistinctEstimate, want[kind][2])
			}
			if got := gathered(t, reg, "flowdedup_window_end_timestamp_seconds"); got[""] != float64(last.EndNs)/1e9 {
				t.Errorf("flowdedup_window_end_timestamp_seconds %v, the file's window_end %d ns", got, last.EndNs)
			}
			if got := gathered(t, reg, "flowdedup_open_window_distinct"); got[label] != 0 {
				t.Errorf("after the run: flowdedup_open_window_distinct %v, want 0 (every window closed)", got)
			}
		})
	}
}

// TestWindowGaugesOpenWindow: the open windows' count is the pipeline's
// distinct less the closed windows' summaries'.
func TestWindowGaugesOpenWindow(t *testing.T) {
	distinct := uint64(500)
	g := NewWindowGauges(flow.KeyPair, func() pipeline.Stats { return pipeline.Stats{Distinct: distinct} })
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	check := func(want float64) {
		t.Helper()
		if got := gathered(t, reg, "flowdedup_open_window_distinct"); len(got) != 1 || got["kind=pair"] != want {
			t.Fatalf("flowdedup_open_window_distinct %v, want {kind=pair} %v", got, want)
		}
	}
	check(500) // no window closed: all of them
	g.Window(&record.Summary{WindowSummary: record.WindowSummary{Distinct: 300, EndNs: 60e9}})
	check(200)
	distinct = 650
	g.Window(&record.Summary{WindowSummary: record.WindowSummary{Distinct: 200, EndNs: 120e9}})
	check(150)
	// No stats: no open-window gauge.
	g = NewWindowGauges(flow.KeyPair, nil)
	reg = prometheus.NewRegistry()
	reg.MustRegister(g)
	if got := gathered(t, reg, "flowdedup_open_window_distinct"); len(got) != 0 {
		t.Fatalf("without the pipeline's stats: %v", got)
	}
}

// TestWindowGaugesExporters: collect's summaries give a gauge per exporter
// the summary lists, by name and protocol; an exporter the next summary
// does not list has no sample; two observers of one name (one that left
// the registry and came back) are one series, their sum.
func TestWindowGaugesExporters(t *testing.T) {
	g := NewWindowGauges(flow.KeySrc, nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	g.Window(&record.Summary{
		WindowSummary: record.WindowSummary{Distinct: 42, DistinctEstimate: 41, EndNs: 1767229200e9},
		Collect: &record.CollectCounts{Exporters: []record.ExporterCounts{
			{ID: 1, Exporter: "192.0.2.1#0", Protocol: "netflow9", Distinct: 30},
			{ID: 2, Exporter: "192.0.2.2#7", Protocol: "ipfix", Distinct: 10},
			{ID: 3, Exporter: "other", Protocol: "ipfix", Distinct: 1},
			{ID: 4, Exporter: "other", Protocol: "ipfix", Distinct: 1},
		}},
	})
	want := `
# HELP flowdedup_collect_exporter_window_distinct Distinct keys of an exporter's observation domain in the last closed window (its summary's collect.exporters[].distinct); absent until a window closes, and for exporters that window's summary does not list.
# TYPE flowdedup_collect_exporter_window_distinct gauge
flowdedup_collect_exporter_window_distinct{exporter="192.0.2.1#0",kind="src",protocol="netflow9"} 30
flowdedup_collect_exporter_window_distinct{exporter="192.0.2.2#7",kind="src",protocol="ipfix"} 10
flowdedup_collect_exporter_window_distinct{exporter="other",kind="src",protocol="ipfix"} 2
# HELP flowdedup_window_distinct Distinct keys of the last closed window (its summary's distinct), by key kind; absent until a window closes.
# TYPE flowdedup_window_distinct gauge
flowdedup_window_distinct{kind="src"} 42
# HELP flowdedup_window_distinct_estimate HyperLogLog estimate of the distinct keys of the last closed window (its summary's distinct_estimate), by key kind; absent until a window closes.
# TYPE flowdedup_window_distinct_estimate gauge
flowdedup_window_distinct_estimate{kind="src"} 41
# HELP flowdedup_window_end_timestamp_seconds End of the last closed window (its summary's window_end), Unix seconds; absent until a window closes.
# TYPE flowdedup_window_end_timestamp_seconds gauge
flowdedup_window_end_timestamp_seconds 1.7672292e+09
`
	names := []string{"flowdedup_collect_exporter_window_distinct", "flowdedup_window_distinct", "flowdedup_window_distinct_estimate", "flowdedup_window_end_timestamp_seconds"}
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	g.Window(&record.Summary{
		WindowSummary: record.WindowSummary{Distinct: 5},
		Collect: &record.CollectCounts{Exporters: []record.ExporterCounts{
			{ID: 2, Exporter: "192.0.2.2#7", Protocol: "ipfix", Distinct: 5},
		}},
	})
	got := gathered(t, reg, "flowdedup_collect_exporter_window_distinct")
	if fmt.Sprint(got) != "map[exporter=192.0.2.2#7,kind=src,protocol=ipfix:5]" {
		t.Fatalf("after a window of one exporter: %v", got)
	}
}

// TestWindowGaugesWindowAllocs: keeping a window allocates nothing once
// the exporters' slice has grown (it is reused).
func TestWindowGaugesWindowAllocs(t *testing.T) {
	g := NewWindowGauges(flow.KeySrc, nil)
	s := &record.Summary{Collect: &record.CollectCounts{Exporters: []record.ExporterCounts{{Exporter: "a#0"}, {Exporter: "b#0"}}}}
	g.Window(s)
	if n := testing.AllocsPerRun(100, func() { g.Window(s) }); n != 0 {
		t.Fatalf("Window allocates %v times", n)
	}
}

// TestWindowGaugesConcurrentScrape: scrapes taken while the pipeline runs
// (as Prometheus's come, from another goroutine) each show one window's
// count or none, never a torn or unknown value; run it with -race.
func TestWindowGaugesConcurrentScrape(t *testing.T) {
	src, err := pcapfile.Open(filepath.Join("..", "testdata", "pcaps", "windows.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var p *pipeline.Pipeline
	ready := make(chan struct{})
	gauges := NewWindowGauges(flow.KeySrc, func() pipeline.Stats { <-ready; return p.Stats() })
	reg := prometheus.NewRegistry()
	reg.MustRegister(gauges)
	sink, err := New(Config{Kind: flow.KeySrc, Destinations: []record.Destination{gauges}})
	if err != nil {
		t.Fatal(err)
	}
	p, err = pipeline.New(pipeline.Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Seed: 1, Window: 60e9}, sink)
	if err != nil {
		t.Fatal(err)
	}
	close(ready)
	done := make(chan struct{})
	scraped := make(chan error, 1)
	go func() {
		// The README's per-window counts of sources, and the total of
		// the three windows' distinct: what the open-window gauge can at
		// most be.
		allowed := map[float64]bool{63: true, 56: true}
		for n := 0; ; n++ {
			select {
			case <-done:
				if n == 0 {
					scraped <- fmt.Errorf("no scrape taken")
				} else {
					scraped <- nil
				}
				return
			default:
			}
			got, err := gatherValues(reg, "flowdedup_window_distinct")
			if v, ok := got["kind=src"]; err != nil || len(got) > 1 || ok && !allowed[v] {
				scraped <- fmt.Errorf("scrape %d: flowdedup_window_distinct %v (%v)", n, got, err)
				return
			}
			open, err := gatherValues(reg, "flowdedup_open_window_distinct")
			if err != nil || len(open) != 1 || open["kind=src"] > 63+63+56 {
				scraped <- fmt.Errorf("scrape %d: flowdedup_open_window_distinct %v (%v)", n, open, err)
				return
			}
		}
	}()
	if err := p.Run(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	close(done)
	if err := <-scraped; err != nil {
		t.Fatal(err)
	}
}

package report

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/record"
)

// WindowGauges is a synchronous Destination that keeps the last closed
// window's summary and exports it to Prometheus, so that a dashboard gets
// the distinct counts of each window ("distinct sources per hour") from the
// metrics, without the summary file or a database:
//
//	flowdedup_window_distinct{kind}                       the last closed window's distinct (the summary's distinct)
//	flowdedup_window_distinct_estimate{kind}              its HyperLogLog estimate (the summary's distinct_estimate)
//	flowdedup_window_end_timestamp_seconds                its end, Unix seconds (the summary's window_end)
//	flowdedup_open_window_distinct{kind}                  keys found unseen since, in the windows still open
//	flowdedup_collect_exporter_window_distinct{exporter,protocol,kind}
//	                                                      each exporter's distinct in the last closed window (collect: the summary's collect.exporters[].distinct)
//
// kind is the run's key kind as --key spells it (src, dst, pair, 5tuple),
// the one kind the run keys. The values are those of the very Summary the
// Reporter gives the summary file (WindowGauges is a Destination fed after
// it), so a scrape and the file's last line agree. Before the first window
// closes, the window gauges have no sample at all (absent, not 0: no
// window has a count yet); flowdedup_open_window_distinct has one from the
// start when the gauges are given the pipeline's Stats. The exporter
// family has a sample per exporter that the last summary's collect part
// lists, labelled by the exporter's name (ADDR#ID, bounded by collect's
// observer registry: 1024 and "other"), never by a flow's address.
//
// flowdedup_open_window_distinct is the pipeline's distinct keys
// (pipeline.Stats.Distinct) less the distinct of the closed windows'
// summaries: the keys of the windows still open, and, for the moment
// between a window's close and its summary reaching the Reporter, of that
// window too. It is never negative (the closed windows' sum is read before
// the pipeline's count, which only grows).
//
// Window is called from the Reporter's goroutine and Collect from the
// scraper's: a mutex keeps each scrape one window's values.
type WindowGauges struct {
	kind  string
	stats func() pipeline.Stats // nil: no open-window gauge

	mu        sync.Mutex
	have      bool // a window has closed
	distinct  uint64
	estimate  uint64
	endNs     int64
	closedSum uint64 // distinct of every closed window
	exporters []exporterGauge
}

type exporterGauge struct {
	name, protocol string
	distinct       uint64
}

var _ record.Destination = (*WindowGauges)(nil)
var _ prometheus.Collector = (*WindowGauges)(nil)

// NewWindowGauges returns the gauges of a run keying kind. stats, when not
// nil, is the pipeline's (Pipeline.Stats), for
// flowdedup_open_window_distinct; it is called once per scrape.
func NewWindowGauges(kind flow.KeyKind, stats func() pipeline.Stats) *WindowGauges {
	name := ""
	if kind.IsValid() {
		name = kind.String()
	}
	return &WindowGauges{kind: name, stats: stats}
}

var (
	descWinDistinct = newDesc("window_distinct",
		"Distinct keys of the last closed window (its summary's distinct), by key kind; absent until a window closes.", "kind")
	descWinEstimate = newDesc("window_distinct_estimate",
		"HyperLogLog estimate of the distinct keys of the last closed window (its summary's distinct_estimate), by key kind; absent until a window closes.", "kind")
	descWinEnd = newDesc("window_end_timestamp_seconds",
		"End of the last closed window (its summary's window_end), Unix seconds; absent until a window closes.")
	descOpenDistinct = newDesc("open_window_distinct",
		"Distinct keys found so far in the windows not yet summarised, by key kind.", "kind")
	descExpWinDistinct = prometheus.NewDesc("flowdedup_collect_exporter_window_distinct",
		"Distinct keys of an exporter's observation domain in the last closed window (its summary's collect.exporters[].distinct); absent until a window closes, and for exporters that window's summary does not list.",
		[]string{"exporter", "protocol", "kind"}, nil)
)

// Window keeps the summary s of the closed window.
func (g *WindowGauges) Window(s *record.Summary) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.have = true
	g.distinct, g.estimate, g.endNs = s.Distinct, s.DistinctEstimate, s.EndNs
	g.closedSum += s.Distinct
	g.exporters = g.exporters[:0]
	if s.Collect != nil {
	next:
		for _, e := range s.Collect.Exporters {
			// Two observers of one name (one that left the registry and
			// came back under a new number) are one series: a scrape with
			// a series twice would fail whole.
			for i := range g.exporters {
				if x := &g.exporters[i]; x.name == e.Exporter && x.protocol == e.Protocol {
					x.distinct += e.Distinct
					continue next
				}
			}
			g.exporters = append(g.exporters, exporterGauge{name: e.Exporter, protocol: e.Protocol, distinct: e.Distinct})
		}
	}
	return nil
}

// Records does nothing: the gauges count windows, not records.
func (g *WindowGauges) Records(*record.Batch) error { return nil }

// Flush does nothing.
func (g *WindowGauges) Flush() error { return nil }

// Close does nothing: the gauges keep the last window for the scrapes
// until the process ends.
func (g *WindowGauges) Close() error { return nil }

// Describe implements prometheus.Collector.
func (g *WindowGauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descWinDistinct, descWinEstimate, descWinEnd, descOpenDistinct, descExpWinDistinct} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (g *WindowGauges) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	g.mu.Lock()
	have, distinct, estimate, endNs, closed := g.have, g.distinct, g.estimate, g.endNs, g.closedSum
	exporters := append([]exporterGauge(nil), g.exporters...)
	g.mu.Unlock()
	if have {
		gauge(descWinDistinct, float64(distinct), g.kind)
		gauge(descWinEstimate, float64(estimate), g.kind)
		gauge(descWinEnd, float64(endNs/1e9)+float64(endNs%1e9)/1e9) // whole seconds exact
		for _, e := range exporters {
			gauge(descExpWinDistinct, float64(e.distinct), e.name, e.protocol, g.kind)
		}
	}
	if g.stats != nil {
		// closed was read first: the pipeline's count, read after, only grows.
		var open uint64
		if d := g.stats().Distinct; d > closed {
			open = d - closed
		}
		gauge(descOpenDistinct, float64(open), g.kind)
	}
}

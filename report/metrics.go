package report

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flowdedup/flowdedup/pipeline"
)

// Reasons given a series from the start, so that rate() sees the first
// event: the pipeline's labels (pipeline/window.go), which its Stats omit
// while they are zero. malformed: flow.IsMalformed errors and damaged
// capture files; skipped: frames without an IP key.
var (
	malformedReasons = []string{"truncated", "bad_header", "too_many_headers", "corrupt_file", "tunnel_truncated", "tunnel_bad_header", "tunnel_too_deep"}
	skippedReasons   = []string{"not_ip", "unsupported_link", "tunnel_unknown", "tunnel_not_data"}
	droppedReasons   = []string{"ring_full", "kernel", "xdp_ring_full"}
	lateReasons      = []string{"window_closed", "time_jump"}
)

// NewCollector returns a Prometheus collector of the pipeline counters that
// stats returns. stats is called once per scrape, from the scraping
// goroutine, and each scrape is one consistent snapshot. It exports:
//
//	flowdedup_packets_total                  frames read
//	flowdedup_keys_total                     keys given to the filters
//	flowdedup_prefiltered_total              keys the XDP prefilter found seen (part of keys)
//	flowdedup_distinct_total                 keys the filters reported unseen
//	flowdedup_malformed_total{reason}        corrupt frames and capture files
//	flowdedup_skipped_total{reason}          frames without an IP key
//	flowdedup_dropped_total{reason}          keys or frames lost (live capture)
//	flowdedup_late_total{reason}             packets not keyed for their time (window_closed, time_jump)
//	flowdedup_windows_closed_total           windows closed and summarised
//	flowdedup_worker_keys_total{worker}      keys given to a shard's filter
//	flowdedup_worker_distinct_total{worker}  keys a shard's filter reported unseen
//	flowdedup_ring_occupancy_ratio{worker}   queued batches / ring capacity
//	flowdedup_filter_fill_ratio{worker}      a shard filter's fill ratio
//
// The reason labels are the pipeline's (flow.Reason labels, "corrupt_file",
// "ring_full", "kernel"); the usual ones are exported as 0 before they
// occur. A count that Stats gives without a reason (Malformed above the sum
// of MalformedBy, say) is exported under reason "other".
// filter_fill_ratio is left out for filters without one (FillRatio < 0),
// ring_occupancy_ratio for workers without a ring (RingCap 0).
func NewCollector(stats func() pipeline.Stats) prometheus.Collector {
	return &collector{stats: stats}
}

type collector struct {
	stats func() pipeline.Stats
}

func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("flowdedup_"+name, help, labels, nil)
}

var (
	descPackets        = newDesc("packets_total", "Frames read from the capture source.")
	descKeys           = newDesc("keys_total", "Flow keys given to the duplicate filters.")
	descPrefiltered    = newDesc("prefiltered_total", "Flow keys the XDP program's in-kernel prefilter found already seen in the window (part of keys_total).")
	descDistinct       = newDesc("distinct_total", "Flow keys the filters reported unseen (distinct-flow records).")
	descMalformed      = newDesc("malformed_total", "Corrupt frames and capture files, by reason.", "reason")
	descSkipped        = newDesc("skipped_total", "Well-formed frames without an IP flow key, by reason.", "reason")
	descDropped        = newDesc("dropped_total", "Keys or frames lost before the filters, by reason.", "reason")
	descLate           = newDesc("late_total", "Packets neither keyed nor reported for their time, by reason: window_closed (older than every open window, beyond --lateness), time_jump (a lone timestamp far ahead of its neighbours).", "reason")
	descWindows        = newDesc("windows_closed_total", "Windows closed and summarised.")
	descWorkerKeys     = newDesc("worker_keys_total", "Flow keys given to a worker's filter shard.", "worker")
	descWorkerDistinct = newDesc("worker_distinct_total", "Flow keys a worker's filter shard reported unseen.", "worker")
	descRing           = newDesc("ring_occupancy_ratio", "Batches waiting in a worker's input ring over its capacity.", "worker")
	descFill           = newDesc("filter_fill_ratio", "Fill ratio of a worker's filter shard.", "worker")
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPackets, descKeys, descPrefiltered, descDistinct, descMalformed, descSkipped,
		descDropped, descLate, descWindows, descWorkerKeys, descWorkerDistinct, descRing, descFill} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(descPackets, s.Packets)
	counter(descKeys, s.Keys)
	counter(descPrefiltered, s.Prefiltered)
	counter(descDistinct, s.Distinct)
	for reason, n := range byReason(s.Malformed, s.MalformedBy, malformedReasons) {
		counter(descMalformed, n, reason)
	}
	for reason, n := range byReason(s.Skipped, s.SkippedBy, skippedReasons) {
		counter(descSkipped, n, reason)
	}
	for reason, n := range byReason(s.Dropped, s.DroppedBy, droppedReasons) {
		counter(descDropped, n, reason)
	}
	for reason, n := range byReason(s.Late, s.LateBy, lateReasons) {
		counter(descLate, n, reason)
	}
	counter(descWindows, s.Windows)
	for i, w := range s.Workers {
		worker := strconv.Itoa(i)
		counter(descWorkerKeys, w.Keys, worker)
		counter(descWorkerDistinct, w.Distinct, worker)
		if w.RingCap > 0 {
			gauge(descRing, float64(w.RingLen)/float64(w.RingCap), worker)
		}
		if w.FillRatio >= 0 {
			gauge(descFill, w.FillRatio, worker)
		}
	}
}

// byReason returns the counts of by, zero for the reasons of always that
// by lacks, and any part of total that by does not account for under
// "other".
func byReason(total uint64, by map[string]uint64, always []string) map[string]uint64 {
	m := make(map[string]uint64, len(by)+len(always))
	for _, reason := range always {
		m[reason] = 0
	}
	var sum uint64
	for reason, n := range by {
		m[reason] += n
		sum += n
	}
	if total > sum {
		m["other"] += total - sum
	}
	return m
}

// Serve serves the metrics of reg (prometheus.DefaultGatherer when nil) on
// addr: the exposition on /metrics and a page linking it on /. It returns
// the address it listens on, which tells the port chosen for ":0", once the
// listener is open; the server runs until ctx is done and then shuts down,
// giving scrapes in progress up to 5 seconds.
//
// A taken address is an error wrapping syscall.EADDRINUSE that says to
// choose another --metrics address.
func Serve(ctx context.Context, addr string, reg *prometheus.Registry) (net.Addr, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("report: metrics server: %w", err)
	}
	var gatherer prometheus.Gatherer = prometheus.DefaultGatherer
	if reg != nil {
		gatherer = reg
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("report: metrics server: %w (choose another --metrics address)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("report: metrics server: %w", err)
	}

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, indexPage)
	})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
	}
	go srv.Serve(ln) // returns http.ErrServerClosed after Shutdown
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(shutdownCtx) != nil {
			srv.Close()
		}
	}()
	return ln.Addr(), nil
}

const indexPage = `<!DOCTYPE html>
<html><head><title>flowdedup</title></head>
<body><h1>flowdedup</h1><p><a href="/metrics">Metrics</a></p></body>
</html>
`

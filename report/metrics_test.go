package report

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	ftestutil "github.com/flowdedup/flowdedup/internal/testutil"

	"github.com/flowdedup/flowdedup/pipeline"
)

func fakeStats() pipeline.Stats {
	return pipeline.Stats{
		Packets:     12345,
		Malformed:   9,
		Keys:        12000,
		Distinct:    800,
		Dropped:     5,
		Skipped:     2,
		Windows:     3,
		MalformedBy: map[string]uint64{"truncated": 4, "bad_header": 2},
		SkippedBy:   map[string]uint64{"not_ip": 2},
		DroppedBy:   map[string]uint64{"ring_full": 5},
		Late:        7,
		LateBy:      map[string]uint64{"window_closed": 6, "time_jump": 1},
		Prefiltered: 2500,
		Workers: []pipeline.WorkerStats{
			{Keys: 7000, Distinct: 500, RingLen: 16, RingCap: 64, FillRatio: 0.25},
			{Keys: 5000, Distinct: 300, RingLen: 0, RingCap: 64, FillRatio: -1},
		},
	}
}

// expositionWant is fakeStats in the text exposition format, by hand.
// Malformed 9 is 6 by reason and 3 without a reason, under "other"; the
// reasons the pipeline has not seen yet are 0.
const expositionWant = `
# HELP flowdedup_packets_total Frames read from the capture source.
# TYPE flowdedup_packets_total counter
flowdedup_packets_total 12345
# HELP flowdedup_keys_total Flow keys given to the duplicate filters.
# TYPE flowdedup_keys_total counter
flowdedup_keys_total 12000
# HELP flowdedup_prefiltered_total Flow keys the XDP program's in-kernel prefilter found already seen in the window (part of keys_total).
# TYPE flowdedup_prefiltered_total counter
flowdedup_prefiltered_total 2500
# HELP flowdedup_distinct_total Flow keys the filters reported unseen (distinct-flow records).
# TYPE flowdedup_distinct_total counter
flowdedup_distinct_total 800
# HELP flowdedup_malformed_total Corrupt frames and capture files, by reason.
# TYPE flowdedup_malformed_total counter
flowdedup_malformed_total{reason="bad_header"} 2
flowdedup_malformed_total{reason="corrupt_file"} 0
flowdedup_malformed_total{reason="other"} 3
flowdedup_malformed_total{reason="too_many_headers"} 0
flowdedup_malformed_total{reason="truncated"} 4
flowdedup_malformed_total{reason="tunnel_bad_header"} 0
flowdedup_malformed_total{reason="tunnel_too_deep"} 0
flowdedup_malformed_total{reason="tunnel_truncated"} 0
# HELP flowdedup_skipped_total Well-formed frames without an IP flow key, by reason.
# TYPE flowdedup_skipped_total counter
flowdedup_skipped_total{reason="not_ip"} 2
flowdedup_skipped_total{reason="tunnel_not_data"} 0
flowdedup_skipped_total{reason="tunnel_unknown"} 0
flowdedup_skipped_total{reason="unsupported_link"} 0
# HELP flowdedup_dropped_total Keys or frames lost before the filters, by reason.
# TYPE flowdedup_dropped_total counter
flowdedup_dropped_total{reason="kernel"} 0
flowdedup_dropped_total{reason="ring_full"} 5
flowdedup_dropped_total{reason="xdp_ring_full"} 0
# HELP flowdedup_late_total Packets neither keyed nor reported for their time, by reason: window_closed (older than every open window, beyond --lateness), time_jump (a lone timestamp far ahead of its neighbours).
# TYPE flowdedup_late_total counter
flowdedup_late_total{reason="time_jump"} 1
flowdedup_late_total{reason="window_closed"} 6
# HELP flowdedup_windows_closed_total Windows closed and summarised.
# TYPE flowdedup_windows_closed_total counter
flowdedup_windows_closed_total 3
# HELP flowdedup_worker_keys_total Flow keys given to a worker's filter shard.
# TYPE flowdedup_worker_keys_total counter
flowdedup_worker_keys_total{worker="0"} 7000
flowdedup_worker_keys_total{worker="1"} 5000
# HELP flowdedup_worker_distinct_total Flow keys a worker's filter shard reported unseen.
# TYPE flowdedup_worker_distinct_total counter
flowdedup_worker_distinct_total{worker="0"} 500
flowdedup_worker_distinct_total{worker="1"} 300
# HELP flowdedup_ring_occupancy_ratio Batches waiting in a worker's input ring over its capacity.
# TYPE flowdedup_ring_occupancy_ratio gauge
flowdedup_ring_occupancy_ratio{worker="0"} 0.25
flowdedup_ring_occupancy_ratio{worker="1"} 0
# HELP flowdedup_filter_fill_ratio Fill ratio of a worker's filter shard.
# TYPE flowdedup_filter_fill_ratio gauge
flowdedup_filter_fill_ratio{worker="0"} 0.25
`

func TestCollector(t *testing.T) {
	c := NewCollector(fakeStats)
	if err := testutil.CollectAndCompare(c, strings.NewReader(expositionWant)); err != nil {
		t.Error(err)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	// A registry checks the descriptions against the metrics.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if _, err := reg.Gather(); err != nil {
		t.Errorf("pedantic gather: %v", err)
	}
}

func TestCollectorPackets(t *testing.T) {
	var s pipeline.Stats
	c := NewCollector(func() pipeline.Stats { return s })
	for _, n := range []uint64{0, 1, 12345} {
		s.Packets = n
		if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP flowdedup_packets_total Frames read from the capture source.
# TYPE flowdedup_packets_total counter
flowdedup_packets_total `+itoa(n)+"\n"), "flowdedup_packets_total"); err != nil {
			t.Error(err)
		}
	}
	// Without workers, the run counters and the zeros of the usual
	// reasons are exported.
	if n := testutil.CollectAndCount(c); n != 5+7+4+3+2 {
		t.Errorf("%d metrics from empty Stats, want 5 counters and 7+4+3+2 reasons", n)
	}
	if n := testutil.CollectAndCount(c, "flowdedup_worker_keys_total"); n != 0 {
		t.Errorf("%d worker series without workers, want 0", n)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(fakeStats))
	addr, err := Serve(ctx, "127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr.String()

	body := get(t, base+"/metrics", http.StatusOK)
	if !strings.Contains(body, "\nflowdedup_packets_total 12345\n") {
		t.Errorf("/metrics lacks flowdedup_packets_total 12345:\n%s", body)
	}
	if body := get(t, base+"/", http.StatusOK); !strings.Contains(body, `href="/metrics"`) {
		t.Errorf("/ does not link /metrics:\n%s", body)
	}
	get(t, base+"/nothing", http.StatusNotFound)

	// The same address again is taken.
	_, err = Serve(ctx, addr.String(), reg)
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), addr.String()) || !strings.Contains(err.Error(), "--metrics") {
		t.Errorf("second Serve on %s: %v; want an error wrapping EADDRINUSE that names the address and the flag", addr, err)
	} else {
		t.Log(err)
	}

	cancel()
	ftestutil.WaitFor(t, "the server to stop accepting connections after its context ended", time.Minute, func() bool {
		conn, err := net.Dial("tcp", addr.String())
		if err != nil {
			return true
		}
		conn.Close()
		return false
	})

	if _, err := Serve(ctx, "127.0.0.1:0", reg); !errors.Is(err, context.Canceled) {
		t.Errorf("Serve with a done context: %v, want context.Canceled", err)
	}
}

func get(t *testing.T, url string, status int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status {
		t.Errorf("GET %s: %s, want %d", url, resp.Status, status)
	}
	return string(body)
}

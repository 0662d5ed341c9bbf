package pipeline

import (
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// countSink counts without keeping anything, so the test measures the
// pipeline's allocations only.
type countSink struct{ records, windows int }

func (s *countSink) Record(*Record) error        { s.records++; return nil }
func (s *countSink) Window(*WindowSummary) error { s.windows++; return nil }
func (s *countSink) Close() error                { return nil }

// TestSteadyStateAllocs runs a million packets (a few thousand flows,
// windows of 100k packets, so markers, resets and summaries are exercised
// too) and counts every heap allocation of the run, setup included: the
// per-packet path must allocate nothing.
func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const (
		packets = 1 << 20
		flows   = 4096
	)
	pkts := make([]pkt, 16384)
	for i := range pkts {
		pkts[i] = pkt{srcFrame(i % flows), t0 + int64(i)*int64(time.Microsecond)}
	}
	src := newSource(pkts)
	src.cycle, src.step = true, int64(len(pkts))*int64(time.Microsecond)
	limited := &limitSource{fakeSource: src, left: packets}
	sink := &countSink{}
	p, err := New(Config{Workers: 2, Filter: "qht:mem=256KiB", Key: flow.KeySrc, Window: 100 * time.Millisecond}, sink)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := p.Run(t.Context(), limited); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	allocs := after.Mallocs - before.Mallocs
	perPacket := float64(allocs) / packets
	t.Logf("%d allocations for %d packets (%.5f per packet), %d records, %d windows", allocs, packets, perPacket, sink.records, sink.windows)
	if perPacket >= 0.01 {
		t.Errorf("%.4f allocations per packet, want < 0.01", perPacket)
	}
	if sink.windows < 10 {
		t.Errorf("%d windows, want >= 10", sink.windows)
	}
}

// limitSource ends a cycling source after a number of frames.
type limitSource struct {
	*fakeSource
	left int
}

func (s *limitSource) Next(p *capture.Packet) error {
	if s.left == 0 {
		return io.EOF
	}
	s.left--
	return s.fakeSource.Next(p)
}

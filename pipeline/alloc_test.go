package pipeline

import (
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// countSink counts without keeping anything, so the test measures the
// pipeline's allocations only.
type countSink struct{ records, windows int }

func (s *countSink) Record(*record.Record) error        { s.records++; return nil }
func (s *countSink) Window(*record.WindowSummary) error { s.windows++; return nil }
func (s *countSink) Close() error                       { return nil }

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

// TestSketchAllocs: the sketches allocate nothing per window, and
// KeepSketch one encoding per window: two runs of the same 100 windows,
// with and without KeepSketch, differ by at most 2 allocations a window
// (the encoding, and now and then its pooled compressor refilled after a
// garbage collection emptied the pool).
func TestSketchAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const packets = 100_000
	pkts := make([]pkt, packets)
	for i := range pkts {
		pkts[i] = pkt{srcFrame(i % 3000), t0 + int64(i)*int64(10*time.Microsecond)} // 1 s: 100 windows of 10 ms
	}
	allocs := func(keep bool) (uint64, int) {
		sink := &countSink{}
		p, err := New(Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: 10 * time.Millisecond, KeepSketch: keep}, sink)
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if err := p.Run(t.Context(), newSource(pkts)); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs, sink.windows
	}
	allocs(true) // fill the encoder pool
	without, n := allocs(false)
	with, n2 := allocs(true)
	t.Logf("%d windows: %d allocations without KeepSketch, %d with", n, without, with)
	if n != 100 || n2 != 100 {
		t.Fatalf("%d and %d windows, want 100", n, n2)
	}
	if with > without+2*uint64(n) {
		t.Errorf("KeepSketch: %d allocations more for %d windows, want at most 2 a window", with-without, n)
	}
}

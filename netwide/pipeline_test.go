package netwide_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/netwide"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/sketch"
)

// frames is a capture.Source over prepared frames.
type frames struct {
	data  [][]byte
	times []int64
	i     int
}

func (s *frames) Next(p *capture.Packet) error {
	if s.i == len(s.data) {
		return io.EOF
	}
	*p = capture.Packet{Data: s.data[s.i], WireLen: len(s.data[s.i]), TimeNs: s.times[s.i], LinkType: flow.LinkEthernet}
	s.i++
	return nil
}

func (s *frames) Close() error { return nil }

// summaries is a pipeline.Sink that keeps the summaries, as netwide takes
// them.
type summaries struct {
	observer string
	out      []netwide.Summary
}

func (s *summaries) Record(*record.Record) error { return nil }
func (s *summaries) Close() error                { return nil }
func (s *summaries) Window(w *record.WindowSummary) error {
	s.out = append(s.out, netwide.Summary{Observer: s.observer, StartNs: w.StartNs, EndNs: w.EndNs,
		Distinct: w.Distinct, DistinctEstimate: w.DistinctEstimate, Sketch: w.Sketch,
		Source: fmt.Sprintf("%s:%d", s.observer, len(s.out)+1)})
	return nil
}

func srcAddr(i int) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], 0x0a000000+uint32(i))
	return netip.AddrFrom4(b)
}

// TestFleet runs three pipelines, as three routers, over overlapping
// traffic of 1-minute windows, with several workers and a lateness, and
// merges their summaries: per window and per 5-minute period, the merged
// sketch is register-equal to the sketch of the exact union of the source
// addresses the three saw, and its estimate within 4 standard errors of
// the union's size.
func TestFleet(t *testing.T) {
	const (
		p       = 12
		seed    = 0xfeed
		minutes = 10
	)
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	dst := netip.MustParseAddr("192.0.2.1")
	exact := map[int64]map[int]bool{} // by minute: every source address id
	var all []netwide.Summary
	for r := range 3 {
		rng := rand.New(rand.NewPCG(uint64(r), 9))
		src := &frames{}
		for i := range 30000 {
			tm := t0 + int64(i)*int64(minutes*time.Minute)/30000
			m := (tm - t0) / int64(time.Minute)
			id := int(m)*2000 + r*1500 + rng.IntN(4000) // routers and minutes overlap
			src.data = append(src.data, testutil.UDP4Frame(srcAddr(id), dst, 1000, 53, 60))
			src.times = append(src.times, tm)
			if exact[m] == nil {
				exact[m] = map[int]bool{}
			}
			exact[m][id] = true
		}
		sink := &summaries{observer: fmt.Sprint("router", r)}
		pl, err := pipeline.New(pipeline.Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: time.Minute, Lateness: 10 * time.Second,
			SketchSeed: seed, SketchPrecision: p, KeepSketch: true}, sink)
		if err != nil {
			t.Fatal(err)
		}
		if err := pl.Run(t.Context(), src); err != nil {
			t.Fatal(err)
		}
		all = append(all, sink.out...)
	}
	ref := func(minutesFrom, minutesTo int64) (*sketch.HLL, int) {
		h, err := sketch.New(p, seed)
		if err != nil {
			t.Fatal(err)
		}
		union := map[int]bool{}
		for m := minutesFrom; m < minutesTo; m++ {
			for id := range exact[m] {
				union[id] = true
				k := flow.MakeKey(flow.KeySrc, srcAddr(id), netip.Addr{}, 0, 0, 0)
				h.Insert(&k)
			}
		}
		return h, len(union)
	}
	for _, by := range []time.Duration{0, 5 * time.Minute} {
		gs, err := netwide.Merge(all, netwide.Options{By: by})
		if err != nil {
			t.Fatal(err)
		}
		span := max(by, time.Minute)
		if want := minutes * time.Minute / span; len(gs) != int(want) {
			t.Fatalf("by %v: %d groups, want %d", by, len(gs), want)
		}
		for _, g := range gs {
			m0 := (g.StartNs - t0) / int64(time.Minute)
			h, n := ref(m0, m0+int64(span/time.Minute))
			if !g.Sketch.Equal(h) || len(g.Observers) != 3 {
				t.Errorf("by %v, minute %d: merged sketch != the sketch of the union of %d keys (observers %v)", by, m0, n, g.Observers)
			}
			tol := 4*1.04/math.Sqrt(1<<p)*float64(n) + 1 // 4 standard errors (Flajolet et al., AofA 2007)
			if math.Abs(float64(g.Estimate)-float64(n)) > tol || g.SumDistinct <= uint64(n) {
				t.Errorf("by %v, minute %d: estimate %d (sum of routers' distinct %d), exact union %d", by, m0, g.Estimate, g.SumDistinct, n)
			}
		}
	}
}

// BenchmarkMergerAdd is the cost of merging one summary: decoding its
// sketch (precision 14, 5000 keys) and merging it into its group's.
func BenchmarkMergerAdd(b *testing.B) {
	h, err := sketch.New(sketch.DefaultPrecision, sketch.DefaultSeed)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 5000 {
		k := flow.MakeKey(flow.KeySrc, srcAddr(i), netip.Addr{}, 0, 0, 0)
		h.Insert(&k)
	}
	enc, err := h.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	m, err := netwide.New(netwide.Options{By: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	s := netwide.Summary{Observer: "r", StartNs: 0, EndNs: int64(time.Minute), DistinctEstimate: h.Estimate(), Sketch: enc}
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Add(&s); err != nil {
			b.Fatal(err)
		}
	}
}

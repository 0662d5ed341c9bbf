package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/record"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/sketch"
)

// TestSketchConfig: the sketch seed and precision default to the sketch
// package's, and a precision outside its range is a config error.
func TestSketchConfig(t *testing.T) {
	p, err := New(Config{Workers: 1, Filter: "exact", Key: flow.KeySrc}, &collectSink{})
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Config(); c.SketchSeed != sketch.DefaultSeed || c.SketchPrecision != sketch.DefaultPrecision || c.KeepSketch {
		t.Errorf("defaults: seed %#x, precision %d, keep %v", c.SketchSeed, c.SketchPrecision, c.KeepSketch)
	}
	for _, prec := range []uint8{3, 19, 255} {
		_, err := New(Config{Workers: 1, Filter: "exact", Key: flow.KeySrc, SketchPrecision: prec}, &collectSink{})
		if !errors.Is(err, ErrConfig) || !errors.Is(err, sketch.ErrPrecision) {
			t.Errorf("precision %d: %v, want ErrConfig and sketch.ErrPrecision", prec, err)
		}
	}
	p, err = New(Config{Workers: 1, Filter: "exact", Key: flow.KeySrc, SketchSeed: 5, SketchPrecision: 10, KeepSketch: true}, &collectSink{})
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Config(); c.SketchSeed != 5 || c.SketchPrecision != 10 || !c.KeepSketch {
		t.Errorf("config %+v", c)
	}
}

// sketchTolerance is how far a window's estimate of n distinct keys may be
// from n: 4 standard errors of an HLL of precision p (1.04/sqrt(2^p),
// Flajolet et al., AofA 2007; below 2^p keys the error is that of linear
// counting, smaller still), plus one for rounding. A normal error goes
// beyond 4 standard errors with probability 6e-5; the data and seeds are
// fixed, so the tests are deterministic. The estimate's exactness is
// checked apart from this, register by register, against a reference.
func sketchTolerance(p uint8, n int) float64 {
	return 4*1.04/math.Sqrt(float64(uint64(1)<<p))*float64(n) + 1
}

// refSketch is the sketch of a key set made directly, without a pipeline.
func refSketch(t *testing.T, p uint8, seed uint64, keys map[flow.Key]bool) *sketch.HLL {
	t.Helper()
	h, err := sketch.New(p, seed)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys {
		h.Insert(&k)
	}
	return h
}

// decodeSketch decodes a summary's sketch.
func decodeSketch(t *testing.T, w *record.WindowSummary) *sketch.HLL {
	t.Helper()
	var h sketch.HLL
	if err := h.UnmarshalBinary(w.Sketch); err != nil {
		t.Fatalf("window %d: sketch of %d bytes: %v", w.StartNs, len(w.Sketch), err)
	}
	return &h
}

// checkSketches compares every summary's sketch with the reference sketch
// of want[its start] (nil: no key), register for register, and its
// estimate with the reference's and with the exact count.
func checkSketches(t *testing.T, cfg Config, wins []record.WindowSummary, want map[int64]map[flow.Key]bool) {
	t.Helper()
	p, seed := cfg.SketchPrecision, cfg.SketchSeed
	for i := range wins {
		w := &wins[i]
		keys := want[w.StartNs]
		ref := refSketch(t, p, seed, keys)
		got := decodeSketch(t, w)
		if !got.Equal(ref) {
			t.Errorf("window %d: sketch differs from the sketch of its %d keys (estimates %d, %d)", w.StartNs, len(keys), got.Estimate(), ref.Estimate())
		}
		if w.DistinctEstimate != ref.Estimate() {
			t.Errorf("window %d: estimate %d, the reference sketch's %d", w.StartNs, w.DistinctEstimate, ref.Estimate())
		}
		if d := math.Abs(float64(w.DistinctEstimate) - float64(len(keys))); d > sketchTolerance(p, len(keys)) {
			t.Errorf("window %d: estimate %d of %d distinct keys", w.StartNs, w.DistinctEstimate, len(keys))
		}
	}
}

// TestSketchWindows: with two producers, three workers, windows and a
// lateness of several windows, each summary's sketch is, register for
// register, the sketch of exactly the keys the lateness model puts in its
// window, whatever the filter does: a lossy filter (a 1 KiB QHT, which
// misjudges many keys) changes Distinct, not the estimate.
func TestSketchWindows(t *testing.T) {
	ms := int64(time.Millisecond)
	const window, lateness = time.Second, 1500 * time.Millisecond
	rng := rand.New(rand.NewPCG(9, 9))
	a, aids := jitterStream(rng, 40000, 60000, ms/4, 600*ms)
	b, bids := jitterStream(rng, 40000, 60000, ms/4, 600*ms)
	for i := range b {
		b[i].t -= 300 * ms // b lags a
	}
	ma, mb := newLateModel(window, lateness), newLateModel(window, lateness)
	ma.run(a, aids)
	mb.run(b, bids)
	want := map[int64]map[flow.Key]bool{}
	for _, m := range []*lateModel{ma, mb} {
		for s, keys := range m.keys {
			if want[s] == nil {
				want[s] = map[flow.Key]bool{}
			}
			maps.Copy(want[s], keys)
		}
	}
	for _, filter := range []string{"exact", "qht:mem=1KiB"} {
		t.Run(filter, func(t *testing.T) {
			cfg := Config{Workers: 3, Filter: filter, Key: flow.KeySrc, Window: window, Lateness: lateness,
				RingBatches: 8, BatchSize: 32, SketchSeed: 77, SketchPrecision: 12, KeepSketch: true}
			sink, _ := run(t, cfg, newSource(a), newSource(b))
			_, wins := sink.snapshot()
			if len(wins) < 8 {
				t.Fatalf("%d summaries, want >= 8", len(wins))
			}
			checkSketches(t, cfg, wins, want)
			off := 0
			for _, w := range wins {
				if w.Distinct != uint64(len(want[w.StartNs])) {
					off++
				}
			}
			t.Logf("%d windows, %d where the filter's distinct count is off", len(wins), off)
			if filter != "exact" && off == 0 {
				t.Error("the lossy filter made no error: the test shows nothing")
			}
			if filter == "exact" && off != 0 {
				t.Errorf("exact filter: %d windows with a wrong distinct count", off)
			}
		})
	}
}

// TestSketchKernelPrefilter: a source that keys in the kernel and drops the
// repeats of keys it has delivered in the window (capture.KernelCounter,
// the XDP fast path) hands the workers each distinct key of a window once,
// and an HLL needs each key only once: each window's sketch is, register
// for register, the sketch of every key of the window's frames, although
// most keys never reach user space, and its estimate is within tolerance of
// the exact count. When the kernel loses keys to a full ring, only the keys
// lost and never sent again in the window are missing: the sketch is that
// of the keys delivered.
func TestSketchKernelPrefilter(t *testing.T) {
	const window = 200 * time.Millisecond
	var pkts []pkt
	all := map[int64]map[flow.Key]bool{} // every key of each window's frames
	for i := range 40000 {
		tm := t0 + int64(i)*int64(25*time.Microsecond) // 1 s: 5 windows of 8000 packets
		id := (i*7919)%3000 + (i/8000)*1000            // 3000 keys a window, two thirds of them in the next one too
		pkts = append(pkts, pkt{srcFrame(id), tm})
		w := t0 + (tm-t0)/int64(window)*int64(window)
		if all[w] == nil {
			all[w] = map[flow.Key]bool{}
		}
		all[w][srcKey(id)] = true
	}
	for _, lose := range []int{0, 7} {
		t.Run(fmt.Sprint("lose=", lose), func(t *testing.T) {
			src := &kernelSource{pkts: pkts, window: int64(window), lose: lose}
			delivered := map[int64]map[flow.Key]bool{}
			ref := &kernelSource{pkts: pkts, window: int64(window), lose: lose}
			var p capture.Packet
			for ref.Next(&p) == nil {
				w := p.TimeNs / int64(window) * int64(window)
				if delivered[w] == nil {
					delivered[w] = map[flow.Key]bool{}
				}
				delivered[w][p.Key] = true
			}
			cfg := Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: window, Live: true,
				SketchSeed: 3, SketchPrecision: sketch.DefaultPrecision, KeepSketch: true}
			sink, _ := run(t, cfg, src)
			_, wins := sink.snapshot()
			if len(wins) != 5 {
				t.Fatalf("%d summaries, want 5", len(wins))
			}
			var prefiltered uint64
			for _, w := range wins {
				prefiltered += w.Prefiltered
			}
			if prefiltered < uint64(len(pkts))/2 {
				t.Fatalf("the kernel prefiltered %d of %d keys: the test shows nothing", prefiltered, len(pkts))
			}
			checkSketches(t, cfg, wins, delivered)
			missing := 0
			for w, keys := range all {
				missing += len(keys) - len(delivered[w])
			}
			t.Logf("%d keys prefiltered in the kernel; %d keys of a window never delivered in it", prefiltered, missing)
			if lose != 0 && missing == 0 {
				t.Error("the kernel lost no key for good: the test shows nothing")
			}
			if lose == 0 {
				for _, w := range wins {
					if !maps.Equal(delivered[w.StartNs], all[w.StartNs]) {
						t.Fatalf("window %d: the kernel delivered %d keys of %d", w.StartNs, len(delivered[w.StartNs]), len(all[w.StartNs]))
					}
				}
				checkSketches(t, cfg, wins, all)
			}
		})
	}
}

// TestSketchIndependentOfRun: a window's sketch depends on its keys and the
// sketch seed only, not on the per-run secret seed, the filter, the number
// of workers or of sources: sketches of two routers that saw the same keys
// are byte-equal, which is what makes them mergeable. Another sketch seed
// gives another sketch, and its fingerprint.
func TestSketchIndependentOfRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	pkts, _ := randomStream(rng, 30000, 8000, func(i int) int64 { return t0 + int64(i)*int64(50*time.Microsecond) })
	sketches := func(cfg Config, sources ...capture.Source) [][]byte {
		cfg.Key, cfg.Window, cfg.KeepSketch = flow.KeySrc, 500*time.Millisecond, true
		sink, _ := run(t, cfg, sources...)
		_, wins := sink.snapshot()
		var out [][]byte
		for _, w := range wins {
			out = append(out, w.Sketch)
		}
		return out
	}
	a := sketches(Config{Workers: 1, Filter: "exact", Seed: 1}, newSource(pkts))
	b := sketches(Config{Workers: 3, Filter: "qht:mem=4KiB", Seed: 2}, newSource(pkts[:15000]), newSource(pkts[15000:]))
	if len(a) != 3 || !slices.EqualFunc(a, b, bytes.Equal) {
		t.Errorf("%d and %d summaries: sketches differ between runs of the same keys", len(a), len(b))
	}
	c := sketches(Config{Workers: 1, Filter: "exact", Seed: 1, SketchSeed: 12345}, newSource(pkts))
	var ha, hc sketch.HLL
	if err := errors.Join(ha.UnmarshalBinary(a[0]), hc.UnmarshalBinary(c[0])); err != nil {
		t.Fatal(err)
	}
	if ha.Fingerprint() != sketch.Fingerprint(sketch.DefaultSeed) || hc.Fingerprint() != sketch.Fingerprint(12345) || ha.Equal(&hc) {
		t.Errorf("fingerprints %016x, %016x", ha.Fingerprint(), hc.Fingerprint())
	}
	if err := ha.Merge(&hc); !errors.Is(err, sketch.ErrSeedMismatch) {
		t.Errorf("merging sketches of two seeds: %v", err)
	}
}

// TestSketchEmptyAndOff: without KeepSketch summaries carry the estimate
// only; with it, empty windows (a gap in the traffic) carry an empty sketch
// of the run's seed, and with windows off the one summary has the sketch of
// every key.
func TestSketchEmptyAndOff(t *testing.T) {
	pkts := []pkt{{srcFrame(1), t0}, {srcFrame(2), t0}, {srcFrame(1), t0 + 5*sec}, {srcFrame(3), t0 + 5*sec}}
	sink, _ := run(t, Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: time.Second}, newSource(pkts))
	_, wins := sink.snapshot()
	if len(wins) != 6 || wins[0].DistinctEstimate != 2 || wins[5].DistinctEstimate != 2 || wins[2].DistinctEstimate != 0 {
		t.Fatalf("summaries %+v", wins)
	}
	for _, w := range wins {
		if w.Sketch != nil {
			t.Fatal("a sketch without KeepSketch")
		}
	}
	cfg := Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: time.Second, KeepSketch: true, SketchSeed: sketch.DefaultSeed, SketchPrecision: sketch.DefaultPrecision}
	sink, _ = run(t, cfg, newSource(pkts))
	_, wins = sink.snapshot()
	want := map[int64]map[flow.Key]bool{
		t0:         {srcKey(1): true, srcKey(2): true},
		t0 + 5*sec: {srcKey(1): true, srcKey(3): true},
	}
	if len(wins) != 6 {
		t.Fatalf("%d summaries, want 6", len(wins))
	}
	checkSketches(t, cfg, wins, want) // windows 1-4 against the empty sketch
	cfg.Window = 0
	sink, _ = run(t, cfg, newSource(pkts))
	_, wins = sink.snapshot()
	if len(wins) != 1 {
		t.Fatalf("%d summaries, want 1", len(wins))
	}
	checkSketches(t, cfg, wins, map[int64]map[flow.Key]bool{wins[0].StartNs: {srcKey(1): true, srcKey(2): true, srcKey(3): true}})
}

// TestSketchFeed: the feed's cache skips a key only when a key of the same
// flow hash was inserted in the window: keys whose hashes share a cache
// entry evict each other and are all counted, a hash of 0 is counted, and
// after take the same keys count again, in the new sketch.
func TestSketchFeed(t *testing.T) {
	proto, err := sketch.New(12, 1)
	if err != nil {
		t.Fatal(err)
	}
	f := newSketchFeed(proto)
	var keys []flow.Key
	var hashes []uint64
	want := map[flow.Key]bool{}
	for i := range 3000 {
		k := srcKey(i % 1000) // each key three times
		keys = append(keys, k)
		want[k] = true
		// Flow hashes that all fall in 4 cache entries: keys evict each
		// other constantly. Key 0's hash is 0.
		hashes = append(hashes, uint64(i%4)<<(64-recentBits)|uint64(i%1000)<<1) // (the cache keeps h|1: hashes differing in bit 0 alone would share a tag)
	}
	f.add(keys[:1500], hashes[:1500])
	f.add(keys[1500:], hashes[1500:])
	got := f.take(proto.Clone())
	if ref := refSketch(t, 12, 1, want); !got.Equal(ref) {
		t.Errorf("sketch of %d keys: estimate %d, want the reference's %d", len(want), got.Estimate(), ref.Estimate())
	}
	// Hashes of distinct keys: every repeat hits the cache, none is lost.
	for i := range hashes {
		hashes[i] = uint64(i%1000) * 0x9e3779b97f4a7c15
	}
	f.add(keys, hashes)
	if got := f.take(proto.Clone()); !got.Equal(refSketch(t, 12, 1, want)) {
		t.Error("after take, the keys were not counted afresh")
	}
	if n := testing.AllocsPerRun(100, func() { f.add(keys, hashes) }); n != 0 {
		t.Errorf("add: %v allocations", n)
	}
}

// TestNoEstimateSameOutput: with NoEstimate the workers skip the sketch,
// and nothing but the summaries' estimate (0, an empty sketch's) and
// sketch (an empty one's) changes: the records in the Sink's order, the
// rest of every summary and the stats are those of the run with the
// sketch, on every testdata capture and the generated messy ones, with 1
// and 2 workers, inline and with parse goroutines, windows on and off.
func TestNoEstimateSameOutput(t *testing.T) {
	empty, err := sketch.New(sketch.DefaultPrecision, sketch.DefaultSeed)
	if err != nil {
		t.Fatal(err)
	}
	emptyForm, err := empty.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	inputs := fanoutInputs(t)
	if raceEnabled || testing.Short() {
		for name := range inputs {
			if name != "jitter" && name != "testdata" {
				delete(inputs, name)
			}
		}
	}
	for name, paths := range inputs {
		for _, c := range []Config{
			{Workers: 1},
			{Workers: 2, Window: 10 * time.Second, Lateness: 30 * time.Second, KeepSketch: true},
			{Workers: 2, Parsers: 2, Window: time.Minute},
		} {
			c.Filter, c.Key, c.Seed, c.FilterSeed = "qht:mem=64KiB", flow.KeySrc, 0x5eed, 3
			what := fmt.Sprintf("%s %d workers %d parsers window %v", name, c.Workers, c.Parsers, c.Window)
			wantRecs, wantWindows, wantStats, _ := replayRinged(t, c, false, paths)
			c.NoEstimate = true
			gotRecs, gotWindows, gotStats, _ := replayRinged(t, c, false, paths)
			if c.Workers > 1 {
				sortRecords(gotRecs)
				sortRecords(wantRecs)
			}
			if !slices.Equal(gotRecs, wantRecs) {
				t.Fatalf("%s: NoEstimate changed the records (%d against %d)", what, len(gotRecs), len(wantRecs))
			}
			if len(gotWindows) != len(wantWindows) || len(wantWindows) == 0 {
				t.Fatalf("%s: %d summaries with NoEstimate, %d without", what, len(gotWindows), len(wantWindows))
			}
			estimated := false
			for i := range wantWindows {
				got, want := gotWindows[i], wantWindows[i]
				if got.DistinctEstimate != 0 {
					t.Errorf("%s: summary %d: estimate %d with NoEstimate, want 0", what, i, got.DistinctEstimate)
				}
				if c.KeepSketch && !slices.Equal(got.Sketch, emptyForm) {
					t.Errorf("%s: summary %d: a sketch of %d bytes, not the empty one's %d", what, i, len(got.Sketch), len(emptyForm))
				}
				estimated = estimated || want.DistinctEstimate > 0
				got.DistinctEstimate, got.Sketch = want.DistinctEstimate, want.Sketch
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: summary %d differs beyond the estimate:\n got %+v\nwant %+v", what, i, got, want)
				}
			}
			if !estimated {
				t.Fatalf("%s: no summary had an estimate without NoEstimate: the test shows nothing", what)
			}
			if !reflect.DeepEqual(gotStats, wantStats) {
				t.Fatalf("%s: stats differ:\n got %+v\nwant %+v", what, gotStats, wantStats)
			}
		}
	}
}

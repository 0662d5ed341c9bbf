package filters

import (
	"errors"
	"math"
	"testing"

	"github.com/flowdedup/flowdedup/mix"
)

// bdbfNaive is the decaying Bloom filter with no blocks: every arrival
// decrements every non-zero counter, then an element is a duplicate iff its
// k counters (the same indices as BDBF's) are non-zero, and sets them to
// W+1, so that they stay non-zero for the next W arrivals.
type bdbfNaive struct {
	c       []uint64
	k, w, m int
}

func (n *bdbfNaive) observe(h uint64) bool {
	for i, v := range n.c {
		if v > 0 {
			n.c[i] = v - 1
		}
	}
	alive := true
	step, g := bloomStep(h), h
	for range n.k {
		i := mix.Reduce(g, n.m)
		alive = alive && n.c[i] > 0
		n.c[i] = uint64(n.w + 1)
		g += step
	}
	return alive
}

// Decaying by blocks only batches the naive DBF's decrements, so the two
// answer alike, element for element, including past the window and when a
// block is decayed the same arrival its counter is set.
func TestBDBFMatchesNaiveDBF(t *testing.T) {
	for _, spec := range []string{"bdbf:mem=4KiB,window=100", "bdbf:mem=2KiB,window=300", "bdbf:mem=1KiB,window=7", "bdbf:mem=600bit,window=1"} {
		f := mustNew[*BDBF](t, spec, 1)
		ref := &bdbfNaive{c: make([]uint64, f.Counters()), k: f.K(), w: f.Window(), m: f.Counters()}
		r := mix.NewWyrand(2)
		universe := 3 * f.Window()
		dups := 0
		for step := range 20000 {
			h := mix.Mix64(uint64(r.IntN(universe)) + 1)
			got, want := f.Observe(h), ref.observe(h)
			if got != want {
				t.Fatalf("%s: step %d: b_DBF says %v, naive DBF %v", spec, step, got, want)
			}
			if got {
				dups++
			}
		}
		t.Logf("%s: m=%d d=%d k=%d s=%d P=%d: 20000 answers equal (%d duplicates)", spec, f.Counters(), f.CounterBits(), f.K(), f.BlockSize(), f.blocks, dups)
	}
}

// No false negative inside the window: an element whose previous occurrence
// is at most W arrivals back is always a duplicate. Against an exact sliding
// window, the only errors are false positives on the others, at about the
// Bloom rate of the window's distinct elements.
func TestBDBFNoFalseNegativeInWindow(t *testing.T) {
	const spec = "bdbf:mem=64KiB,window=6000"
	f := mustNew[*BDBF](t, spec, 1)
	w := f.Window()
	last := map[uint64]int{} // element -> arrival of its last occurrence
	r := mix.NewWyrand(3)
	inWindow, fp, others := 0, 0, 0
	for t0 := range 200000 {
		// A universe of 4W: about a fifth of arrivals repeat within W.
		h := mix.Mix64(uint64(r.IntN(4 * w)))
		got := f.Observe(h)
		prev, seen := last[h]
		if seen && t0-prev <= w {
			inWindow++
			if !got {
				t.Fatalf("arrival %d: duplicate of arrival %d (gap %d <= W=%d) reported unseen", t0, prev, t0-prev, w)
			}
		} else {
			others++
			if got {
				fp++
			}
		}
		last[h] = t0
	}
	// Distinct elements in a window of W arrivals from a universe of U=4W:
	// U(1 - (1-1/U)^W).
	u := 4 * float64(w)
	alive := u * (1 - math.Pow(1-1/u, float64(w)))
	bound := math.Pow(1-math.Exp(-float64(f.K())*alive/float64(f.Counters())), float64(f.K()))
	got := float64(fp) / float64(others)
	t.Logf("%s: %d in-window duplicates all found; windowed FPR %.4f (Bloom estimate %.4f)", spec, inWindow, got, bound)
	if sd := math.Sqrt(bound * (1 - bound) / float64(others)); got > 1.1*bound+5*sd {
		t.Errorf("windowed FPR %.4f, above the Bloom estimate %.4f", got, bound)
	}
}

// The window's edge is exact: a duplicate W arrivals after its previous
// occurrence is found, one W+1 after is not (with memory to spare, so that
// false positives do not blur the edge), wherever the decay cursor stands.
func TestBDBFForgetsAfterWindow(t *testing.T) {
	f := mustNew[*BDBF](t, "bdbf:mem=256KiB,window=500", 1)
	w := f.Window()
	r := mix.NewWyrand(4)
	for trial := range 2000 {
		gap := w + trial%2 // W, then W+1
		x := r.Uint64()
		f.Observe(x)
		for range gap - 1 {
			f.Observe(r.Uint64())
		}
		if got, want := f.Observe(x), gap <= w; got != want {
			t.Fatalf("trial %d: element repeated %d arrivals later reported duplicate=%v, want %v (W=%d)", trial, gap, got, want, w)
		}
	}
}

// A distinct stream keeps W elements alive: the FPR is the Bloom filter's
// for W elements in m counters with k hashes.
func TestBDBFDistinctFPR(t *testing.T) {
	const spec = "bdbf:mem=64KiB" // W=6000 as the QHT paper's benchmark
	f := mustNew[*BDBF](t, spec, 1)
	r := mix.NewWyrand(5)
	for range 2 * f.Window() {
		f.Observe(r.Uint64())
	}
	const n = 100000
	fp := 0
	for range n {
		if f.Observe(r.Uint64()) {
			fp++
		}
	}
	want := math.Pow(1-math.Exp(-float64(f.K()*f.Window())/float64(f.Counters())), float64(f.K()))
	got := float64(fp) / n
	sd := math.Sqrt(want * (1 - want) / n)
	t.Logf("%s: m=%d d=%d k=%d: FPR %.4f, Bloom estimate %.4f", spec, f.Counters(), f.CounterBits(), f.K(), got, want)
	if math.Abs(got-want) > 0.05*want+5*sd {
		t.Errorf("FPR %.4f, want the Bloom estimate %.4f", got, want)
	}
}

// Counters must hold W + P, and an arrival decays at most max(k, ...)
// counters as the doc says.
func TestBDBFShape(t *testing.T) {
	for _, mem := range []int{64, 1000, 8 << 13, 8 << 20, 8 << 26} {
		for _, w := range []int{1, 2, 7, 100, 6000, 1 << 20, bdbfMaxWindow} {
			if mem < bitsLen(2*w) {
				continue
			}
			f := newBDBF(mem, w)
			d := f.CounterBits()
			if int64(w+f.blocks) > int64(1)<<d-1 {
				t.Errorf("mem=%d W=%d: d=%d cannot hold W+P=%d", mem, w, d, w+f.blocks)
			}
			if f.blocks*f.BlockSize() < f.m || (f.blocks-1)*f.BlockSize() >= f.m {
				t.Errorf("mem=%d W=%d: %d blocks of %d do not tile %d counters", mem, w, f.blocks, f.BlockSize(), f.m)
			}
			if d < 32 && f.BlockSize() > f.K() {
				t.Errorf("mem=%d W=%d: decays %d counters per arrival, more than k=%d, at d=%d < 32", mem, w, f.BlockSize(), f.K(), d)
			}
			if f.SizeBits() > mem || f.SizeBits() != f.m*d {
				t.Errorf("mem=%d W=%d: SizeBits %d", mem, w, f.SizeBits())
			}
		}
	}
}

func bitsLen(x int) int {
	n := 0
	for ; x > 0; x >>= 1 {
		n++
	}
	return n
}

func TestBDBFSpec(t *testing.T) {
	for _, c := range []struct {
		spec, want string
		bits       int
	}{
		{"bdbf:mem=64KiB", "bdbf:mem=64KiB,window=6000", 37449 * 14},
		// d = bits(200) = 8 gives s = 64 > k = 16: widened to d = 10, s = 8.
		{"bdbf:window=100,mem=8KiB", "bdbf:mem=8KiB,window=100", 65536 / 10 * 10},
		{"bdbf:mem=3bit,window=1", "bdbf:mem=3bit,window=1", 2},
	} {
		f := mustNew[*BDBF](t, c.spec, 1)
		if f.String() != c.want || f.SizeBits() != c.bits {
			t.Errorf("New(%q) = %q, %d bits; want %q, %d bits", c.spec, f.String(), f.SizeBits(), c.want, c.bits)
		}
	}
	for spec, want := range map[string]error{
		"bdbf:window=0":             ErrBadParam,
		"bdbf:window=2000000000":    ErrBadParam,
		"bdbf:window=ten":           ErrBadParam,
		"bdbf:mem=13bit":            ErrTooSmall, // W=6000 needs 14-bit counters
		"bdbf:mem=1KiB,k=4":         ErrUnknownParam,
		"bdbf:mem=1KiB,window=1e3":  ErrBadParam,
		"bdbf:mem=1KiB,,window=100": ErrSyntax,
	} {
		if _, err := New(spec, 1); !errors.Is(err, want) {
			t.Errorf("New(%q) error %v, want %v", spec, err, want)
		}
	}
}

package filters

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/flowdedup/flowdedup/mix"
)

// fpbufferWithin reports whether a Binomial(n, p) count is within 5
// standard deviations of its mean (a false failure has probability < 1e-6).
func fpbufferWithin(count, n int, p float64) bool {
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	return math.Abs(float64(count)-mean) <= 5*sd+1e-9
}

// On distinct elements every lookup misses, so each is reported duplicate
// with probability q: the FP count is Binomial(distincts, q).
func TestFPBufferFPRIsQ(t *testing.T) {
	for _, q := range []float64{0, 0.02, 0.1, 0.5, 1} {
		f := mustNew[*FPBuffer](t, "fpbuffer:entries=1000,q="+fpbufferFloat(q), 3)
		r := mix.NewWyrand(4)
		const n = 100000
		fp := 0
		for range n {
			if f.Observe(r.Uint64()) {
				fp++
			}
		}
		t.Logf("q=%g: FPR %.4f over %d distinct", q, float64(fp)/n, n)
		if !fpbufferWithin(fp, n, q) {
			t.Errorf("q=%g: %d FPs of %d distinct, want Binomial(%d, %g) = %.0f ± 5 sd", q, fp, n, n, q, n*q)
		}
	}
}

// FPBuffering changes only the answer to a miss, never the buffer, so run
// next to an LRU of the same size it hits exactly where the LRU hits. A
// duplicate is then a false negative iff the LRU misses it and the coin says
// distinct: FNs ~ Binomial(LRU's FNs, 1-q), so FNR = FNR_LRU * (1-q).
func TestFPBufferFNRIsLRUTimesOneMinusQ(t *testing.T) {
	const entries, q = 2000, 0.1
	f := mustNew[*FPBuffer](t, "fpbuffer:entries=2000,q=0.1", 5)
	l := NewLRU(entries, 0)
	seen := map[uint64]bool{}
	r := mix.NewWyrand(6)
	dups, lruFN, fpbFN := 0, 0, 0
	for range 200000 {
		h := uint64(r.IntN(4 * entries)) // a universe of 4x the buffer: many hits, many misses
		got, lruGot := f.Observe(h), l.Observe(h)
		if lruGot && !got {
			t.Fatalf("%#x: LRU hit but FPBuffer says distinct", h)
		}
		if seen[h] {
			dups++
			if !lruGot {
				lruFN++
			}
			if !got {
				fpbFN++
			}
		}
		seen[h] = true
	}
	t.Logf("FNR: LRU %.4f, FPBuffer %.4f, LRU*(1-q) %.4f (%d duplicates)",
		float64(lruFN)/float64(dups), float64(fpbFN)/float64(dups), float64(lruFN)/float64(dups)*(1-q), dups)
	if !fpbufferWithin(fpbFN, lruFN, 1-q) {
		t.Errorf("FPBuffer FNs %d, want Binomial(LRU FNs %d, 1-q) = %.0f ± 5 sd", fpbFN, lruFN, float64(lruFN)*(1-q))
	}
}

// Reset empties the buffer and rewinds the coin: the filter then answers as
// one fresh from New, coin for coin.
func TestFPBufferResetReplays(t *testing.T) {
	const spec = "fpbuffer:entries=100,q=0.3"
	f := mustNew[*FPBuffer](t, spec, 9)
	fresh := mustNew[*FPBuffer](t, spec, 9)
	r := mix.NewWyrand(1)
	hs := make([]uint64, 1000)
	for i := range hs {
		hs[i] = uint64(r.IntN(300))
		f.Observe(hs[i])
	}
	f.Reset()
	for i, h := range hs {
		if got, want := f.Observe(h), fresh.Observe(h); got != want {
			t.Fatalf("step %d: after Reset %v, fresh filter %v", i, got, want)
		}
	}
}

func TestFPBufferSpec(t *testing.T) {
	for spec, want := range map[string]string{
		"fpbuffer":                       "fpbuffer:mem=" + FormatMem(L2CacheBits()) + ",q=0.1",
		"fpbuffer:mem=64KiB":             "fpbuffer:mem=64KiB,q=0.1",
		"fpbuffer:entries=1000,q=0.25":   "fpbuffer:entries=1000,q=0.25",
		"fpbuffer:q=1e-3,mem=65536bit":   "fpbuffer:mem=8KiB,q=0.001",
		"fpbuffer:mem=100bit,q=0.123456": "fpbuffer:mem=100bit,q=0.123456",
	} {
		f := mustNew[*FPBuffer](t, spec, 1)
		if f.String() != want {
			t.Errorf("New(%q).String() = %q, want %q", spec, f.String(), want)
		}
		if g := mustNew[*FPBuffer](t, f.String(), 1); g.String() != want || g.SizeBits() != f.SizeBits() {
			t.Errorf("%q does not round-trip: %q, %d bits", want, g.String(), g.SizeBits())
		}
	}
	if f := mustNew[*FPBuffer](t, "fpbuffer:mem=100bit", 1); f.SizeBits() != 64 || f.Entries() != 1 {
		t.Errorf("mem=100bit: %d bits, %d entries; want one 64-bit entry", f.SizeBits(), f.Entries())
	}
	for spec, want := range map[string]error{
		"fpbuffer:q=1.5":       ErrBadParam,
		"fpbuffer:q=-0.1":      ErrBadParam,
		"fpbuffer:q=NaN":       ErrBadParam,
		"fpbuffer:q=often":     ErrBadParam,
		"fpbuffer:entries=0":   ErrBadParam,
		"fpbuffer:mem=63bit":   ErrTooSmall,
		"fpbuffer:fps=0.1":     ErrUnknownParam,
		"fpbuffer:mem=1KiB,q=": ErrSyntax,
	} {
		if _, err := New(spec, 1); !errors.Is(err, want) {
			t.Errorf("New(%q) error %v, want %v", spec, err, want)
		}
	}
}

func fpbufferFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

package filters

import (
	"errors"
	"math"
	"testing"

	"github.com/flowdedup/flowdedup/mix"
)

// cuckooFill observes n fresh hashes and returns them.
func cuckooFill(c *Cuckoo, r *mix.Wyrand, n int) []uint64 {
	hs := make([]uint64, n)
	for i := range hs {
		hs[i] = r.Uint64()
		c.Observe(hs[i])
	}
	return hs
}

// Until relocation first gives up, every inserted fingerprint stays in one
// of its element's two buckets (a kick moves it to its other one), so there
// is no false negative: an element reported unseen is stored, and one
// reported a duplicate already matches a fingerprint of its pair, which
// never leaves the pair. The loads are below each setting's measured first
// drop: about 0.97 for b=4, f=16 (Fan et al. report 95% for b=4), 0.88 for
// b=2, f=12, and only 0.33 for the QHT benchmark's b=1, f=3, where a 3-bit
// fingerprint gives a bucket only 7 alternates.
func TestCuckooNoFalseNegativeBeforeFull(t *testing.T) {
	for _, c := range []struct {
		spec string
		load float64
	}{
		{"cuckoo:mem=64KiB,buckets=4,fpbits=16", 0.90},
		{"cuckoo:mem=64KiB,buckets=2,fpbits=12", 0.80},
		{"cuckoo:mem=16KiB", 0.25},
	} {
		f := mustNew[*Cuckoo](t, c.spec, 2)
		r := mix.NewWyrand(3)
		hs := cuckooFill(f, &r, int(c.load*float64(f.Buckets()*f.Slots())))
		if f.Dropped() != 0 {
			t.Errorf("%s: %d fingerprints dropped at load %.2f", c.spec, f.Dropped(), f.Load())
		}
		for i, h := range hs {
			if !f.Observe(h) {
				t.Fatalf("%s: element %d of %d forgotten at load %.3f (false negative)", c.spec, i, len(hs), f.Load())
			}
		}
		t.Logf("%s: %d elements, load %.3f, no false negative", c.spec, len(hs), f.Load())
	}
}

// Saturated, an unseen element is a false positive when one of the 2b
// fingerprints of its two (full) buckets equals its own, each uniform over
// S = 2^f - 1 values: at most 2b/S (union bound; equality when the 2b are
// distinct) and at least 1 - (1-1/S)^(2b) (independent). The QHT paper's
// Table 4 measures 28.2-28.6% for b=1, f=3, where 2b/S = 28.57%.
func TestCuckooSaturatedFPR(t *testing.T) {
	for _, spec := range []string{"cuckoo:mem=1KiB", "cuckoo:mem=2KiB,buckets=4,fpbits=6"} {
		f := mustNew[*Cuckoo](t, spec, 4)
		r := mix.NewWyrand(5)
		slots := f.Buckets() * f.Slots()
		cuckooFill(f, &r, 5*slots)
		if f.Load() != 1 || f.Dropped() == 0 {
			t.Fatalf("%s: not saturated: load %.3f, %d dropped", spec, f.Load(), f.Dropped())
		}
		const n = 20000
		fp := 0
		for range n {
			if f.Observe(r.Uint64()) {
				fp++
			}
		}
		s := float64(int(1)<<f.FPBits() - 1)
		b2 := 2 * float64(f.Slots())
		hi, lo := b2/s, 1-math.Pow(1-1/s, b2)
		fpr := float64(fp) / n
		sd := math.Sqrt(hi * (1 - hi) / n)
		t.Logf("%s: saturated FPR %.4f, bounds [%.4f, %.4f]", spec, fpr, lo, hi)
		if fpr > hi+5*sd || fpr < lo-5*sd {
			t.Errorf("%s: saturated FPR %.4f outside [1-(1-1/S)^2b, 2b/S] = [%.4f, %.4f] ± 5 sd", spec, fpr, lo, hi)
		}
	}
}

// Once relocation gives up, Observe still returns, stores the new element,
// drops one older fingerprint, and allocates nothing; the table stays full
// and every stored fingerprint is non-zero.
func TestCuckooDropsWhenFull(t *testing.T) {
	f := mustNew[*Cuckoo](t, "cuckoo:mem=512bit,buckets=2,fpbits=8", 6)
	r := mix.NewWyrand(7)
	cuckooFill(f, &r, 10*f.Buckets()*f.Slots())
	before := f.Dropped()
	if before == 0 {
		t.Fatal("no fingerprint dropped on a stream of 10x the table's slots")
	}
	if n := testing.AllocsPerRun(2000, func() { f.Observe(r.Uint64()) }); n != 0 {
		t.Errorf("saturated Observe allocates %.2f times per call", n)
	}
	if f.Dropped() <= before || f.Load() != 1 {
		t.Errorf("after 2000 more distinct elements: %d dropped (was %d), load %.3f", f.Dropped(), before, f.Load())
	}
	// Right after insertion an element is found unless the kick chain came
	// back and dropped it, which takes a cycle through its own bucket.
	missed := 0
	for range 1000 {
		h := r.Uint64()
		f.Observe(h)
		if !f.Observe(h) {
			missed++
		}
	}
	if missed > 100 {
		t.Errorf("%d of 1000 elements not found right after their insertion", missed)
	}
	t.Logf("%d dropped; %d of 1000 new elements lost to their own kick chain", f.Dropped(), missed)
}

// Partial-key cuckoo hashing needs i2 = i1 XOR alt(fp) to differ from i1 and
// to be an involution: from either bucket, the other is found from fp alone.
func TestCuckooAlternateBucket(t *testing.T) {
	f := mustNew[*Cuckoo](t, "cuckoo:mem=4KiB,buckets=1,fpbits=8", 1)
	for fp := uint64(1); fp < 256; fp++ {
		a := f.alt(fp)
		if a == 0 || a >= f.Buckets() {
			t.Fatalf("alt(%d) = %d with %d buckets", fp, a, f.Buckets())
		}
		for i := range f.Buckets() {
			if j := i ^ a; j^f.alt(fp) != i {
				t.Fatalf("alt is not an involution at bucket %d, fp %d", i, fp)
			}
		}
	}
	// One bucket: both candidates are bucket 0, and the filter still works.
	one := mustNew[*Cuckoo](t, "cuckoo:mem=16bit,buckets=2,fpbits=8", 1)
	if one.Buckets() != 1 || one.SizeBits() != 16 {
		t.Fatalf("mem=16bit, b=2, f=8: %d buckets, %d bits", one.Buckets(), one.SizeBits())
	}
	r := mix.NewWyrand(2)
	for range 100 {
		one.Observe(r.Uint64())
	}
	if one.Load() != 1 {
		t.Errorf("single bucket load %.2f after 100 elements", one.Load())
	}
}

func TestCuckooSpec(t *testing.T) {
	for _, c := range []struct {
		spec, want string
		bits       int
	}{
		// 524288/3 = 174762 slots: 2^17 buckets of 1x3 bits.
		{"cuckoo:mem=64KiB", "cuckoo:mem=64KiB,buckets=1,fpbits=3", 1 << 17 * 3},
		// 524288/(4*12) = 10922: 2^13 buckets of 48 bits.
		{"cuckoo:mem=64KiB,buckets=4,fpbits=12", "cuckoo:mem=64KiB,buckets=4,fpbits=12", 1 << 13 * 48},
		// A power of two already: 2^15 buckets of 16 bits, all of mem.
		{"cuckoo:fpbits=8,buckets=2,mem=512kib", "cuckoo:mem=512KiB,buckets=2,fpbits=8", 512 * 8192},
		{"cuckoo:mem=100bit", "cuckoo:mem=100bit,buckets=1,fpbits=3", 32 * 3},
	} {
		f := mustNew[*Cuckoo](t, c.spec, 1)
		if f.String() != c.want || f.SizeBits() != c.bits {
			t.Errorf("New(%q) = %q, %d bits; want %q, %d bits", c.spec, f.String(), f.SizeBits(), c.want, c.bits)
		}
		if n := f.Buckets(); n&(n-1) != 0 || n*f.Slots()*f.FPBits() != f.SizeBits() {
			t.Errorf("%q: %d buckets, SizeBits %d", c.spec, n, f.SizeBits())
		}
	}
	for spec, want := range map[string]error{
		"cuckoo:buckets=8":           ErrBadParam, // 8 > 2^3-1
		"cuckoo:fpbits=2,buckets=4":  ErrBadParam,
		"cuckoo:fpbits=33":           ErrBadParam,
		"cuckoo:fpbits=0":            ErrBadParam,
		"cuckoo:buckets=65":          ErrBadParam,
		"cuckoo:mem=2bit":            ErrTooSmall,
		"cuckoo:mem=1KiB,kicks=10":   ErrUnknownParam,
		"cuckoo:mem=1KiB,buckets=x2": ErrBadParam,
	} {
		if _, err := New(spec, 1); !errors.Is(err, want) {
			t.Errorf("New(%q) error %v, want %v", spec, err, want)
		}
	}
}

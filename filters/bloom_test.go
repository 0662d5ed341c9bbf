package filters

import (
	"errors"
	"math"
	"testing"

	"github.com/flowdedup/flowdedup/mix"
)

func bloomMust(t testing.TB, spec string) *Bloom { return mustNew[*Bloom](t, spec, 1) }

// Before saturation the FP rate after n distinct elements is
// (1 - e^(-kn/m))^k and the fill ratio 1 - e^(-kn/m).
func TestBloomFPRMatchesFormula(t *testing.T) {
	const m = 1 << 20 // bits
	const queries = 1 << 16
	for _, c := range []struct {
		k     int
		perM  float64 // n/m
		specK string
	}{
		{2, 0.1, "2"}, {2, 0.5, "2"}, {4, 0.25, "4"}, {1, 1, "1"},
	} {
		b := bloomMust(t, "bloom:mem=128KiB,k="+c.specK)
		n := int(c.perM * m)
		g := mix.NewSplitMix(uint64(c.k)<<32 | uint64(n))
		for range n {
			b.Observe(g.Uint64())
		}
		k := float64(c.k)
		fill := 1 - math.Exp(-k*float64(n)/m)
		// The bits of a Bloom filter are negatively correlated, so the
		// binomial variance fill(1-fill)/m bounds the fill's.
		fillTol := 4 * math.Sqrt(fill*(1-fill)/m)
		if got := b.FillRatio(); math.Abs(got-fill) > fillTol {
			t.Errorf("k=%d n/m=%g: fill ratio %.5f, want 1-e^(-kn/m) = %.5f ± %.5f", c.k, c.perM, got, fill, fillTol)
		}
		// Each query is also inserted, so average the formula over the
		// queries' positions n..n+queries-1.
		want := 0.0
		for j := n; j < n+queries; j++ {
			want += math.Pow(1-math.Exp(-k*float64(j)/m), k)
		}
		want /= queries
		fp := 0
		for range queries {
			if b.Observe(g.Uint64()) {
				fp++
			}
		}
		got := float64(fp) / queries
		// Bernoulli noise of the answers plus the fill's own noise, which
		// all queries share: dFPR/dfill = k fill^(k-1).
		slope := k * math.Pow(fill, k-1)
		tol := 4 * math.Sqrt(want*(1-want)/queries+slope*slope*fill*(1-fill)/m)
		t.Logf("k=%d n/m=%g: FP rate %.5f, formula %.5f ± %.5f", c.k, c.perM, got, want, tol)
		if math.Abs(got-want) > tol {
			t.Errorf("k=%d n/m=%g: FP rate %.5f, want (1-e^(-kn/m))^k = %.5f ± %.5f (4 sd)", c.k, c.perM, got, want, tol)
		}
	}
}

func TestBloomNeverForgets(t *testing.T) {
	b := bloomMust(t, "bloom:mem=4KiB,k=3")
	g := mix.NewSplitMix(5)
	hs := make([]uint64, 20000) // far past saturation of 32768 bits
	for i := range hs {
		hs[i] = g.Uint64()
		b.Observe(hs[i])
	}
	for i, h := range hs {
		if !b.Observe(h) {
			t.Fatalf("element %d: false negative", i)
		}
	}
	b.Reset()
	if b.FillRatio() != 0 || b.Observe(hs[0]) {
		t.Fatalf("Reset left bits set")
	}
}

func TestBloomSpec(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"bloom:mem=64KiB", "bloom:mem=64KiB,k=2"},
		{"bloom:mem=1000bit,k=5", "bloom:mem=125B,k=5"},
		{"bloom:mem=1001bit,k=1", "bloom:mem=1001bit,k=1"},
	} {
		b := bloomMust(t, c.spec)
		if got := b.String(); got != c.want {
			t.Errorf("New(%q).String() = %q, want %q", c.spec, got, c.want)
		}
		r := bloomMust(t, b.String())
		if r.String() != b.String() || r.SizeBits() != b.SizeBits() || r.K() != b.K() {
			t.Errorf("%q does not round-trip: %q", b.String(), r.String())
		}
	}
	if b := bloomMust(t, "bloom:mem=1001bit"); b.SizeBits() != 1001 {
		t.Errorf("SizeBits = %d, want 1001", b.SizeBits())
	}
	for _, c := range []struct {
		spec string
		want error
	}{
		{"bloom:mem=64KiB,k=0", ErrBadParam},
		{"bloom:mem=64KiB,k=65", ErrBadParam},
		{"bloom:mem=64KiB,k=two", ErrBadParam},
		{"bloom:mem=0bit", ErrBadParam},
		{"bloom:mem=64KiB,p=1", ErrUnknownParam},
		{"bloom:mem=2bit,k=2", ErrTooSmall},
	} {
		f, err := New(c.spec, 1)
		if !errors.Is(err, c.want) {
			t.Errorf("New(%q) = %v, %v; want an error wrapping %v", c.spec, f, err, c.want)
		}
	}
}

func TestBloomObserveDoesNotAllocate(t *testing.T) {
	var f Filter = bloomMust(t, "bloom:mem=64KiB,k=3")
	h := uint64(1)
	if n := testing.AllocsPerRun(1000, func() { h = mix.Mix64(h); f.Observe(h) }); n != 0 {
		t.Errorf("Observe allocates %v times per call", n)
	}
}

func BenchmarkBloomObserve(b *testing.B) {
	hs := sbfBenchHashes()
	for _, spec := range []string{"mem=64KiB,k=2", "mem=1MiB,k=2", "mem=64MiB,k=2"} {
		b.Run(spec, func(b *testing.B) {
			f := bloomMust(b, "bloom:"+spec)
			f.Reset() // touch every page before timing
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				f.Observe(hs[i&(len(hs)-1)])
				i++
			}
		})
	}
}

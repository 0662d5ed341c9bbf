package mix

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// The known answers below come from the reference C implementations, not
// from this package: Vigna's splitmix64.c and the wyrand of wyhash.h
// (before final4), compiled with clang and run for the seeds given. The
// splitmix64 stream of seed 1234567 is also the one Rosetta Code's
// "Pseudo-random numbers/Splitmix64" task publishes.

func TestMix64KnownAnswers(t *testing.T) {
	for _, c := range []struct{ in, want uint64 }{
		{0, 0},
		{1, 0x5692161d100b05e5},
		{Golden, 0xe220a8397b1dcdaf},
		{0xdeadbeefcafef00d, 0x19104ae2406d51c3},
		{math.MaxUint64, 0xb4d055fcf2cbbd7b},
	} {
		if got := Mix64(c.in); got != c.want {
			t.Errorf("Mix64(%#x) = %#x, want %#x", c.in, got, c.want)
		}
	}
}

func TestSplitMixKnownAnswers(t *testing.T) {
	for _, c := range []struct {
		seed uint64
		want [5]uint64
	}{
		{0, [5]uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f, 0xf88bb8a8724c81ec, 0x1b39896a51a8749b}},
		{1234567, [5]uint64{6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431, 16408922859458223821}},
		{math.MaxUint64, [5]uint64{0xe4d971771b652c20, 0xe99ff867dbf682c9, 0x382ff84cb27281e9, 0x6d1db36ccba982d2, 0xb4a0472e578069ae}},
	} {
		r := NewSplitMix(c.seed)
		for i, want := range c.want {
			if got := r.Uint64(); got != want {
				t.Errorf("seed %d: output %d = %#x, want %#x", c.seed, i, got, want)
			}
		}
	}
}

func TestWyrandKnownAnswers(t *testing.T) {
	for _, c := range []struct {
		state uint64
		want  [5]uint64
	}{
		{0, [5]uint64{0x111cb3a78f59a58e, 0xceabd938ff4e856d, 0x61fb51318f47d2a4, 0x78bd03c491909760, 0x7c003d7fb14820de}},
		{1234567, [5]uint64{0x0e6c0d75670e37cc, 0x6c97c0b827352c64, 0xd0cd28cec7470d39, 0xa51d2a195ac69861, 0xe09117771f95f935}},
		{math.MaxUint64, [5]uint64{0xba1dc814e82d5d44, 0x57accfe85fe29d15, 0x3afa6e616fb3aa6f, 0x6cfb4186089762e0, 0xd90193b110f43807}},
	} {
		r := Wyrand{s: c.state} // the reference's seed is the raw state
		for i, want := range c.want {
			if got := r.Uint64(); got != want {
				t.Errorf("state %#x: output %d = %#x, want %#x", c.state, i, got, want)
			}
		}
	}
	// NewWyrand spreads its seed with Mix64 first (Mix64 is checked above).
	r, ref := NewWyrand(7), Wyrand{s: Mix64(7 ^ Golden)}
	for range 3 {
		if r.Uint64() != ref.Uint64() {
			t.Fatal("NewWyrand(seed) must start from the state Mix64(seed ^ Golden)")
		}
	}
}

// PCG is math/rand/v2's source, draw for draw.
func TestPCGMatchesStdlib(t *testing.T) {
	for _, seed := range [][2]uint64{{0, 0}, {42, 1}, {math.MaxUint64, 5}} {
		r, ref := NewPCG(seed[0], seed[1]), rand.NewPCG(seed[0], seed[1])
		for i := range 1000 {
			if got, want := r.Uint64(), ref.Uint64(); got != want {
				t.Fatalf("seed %v: draw %d = %#x, want %#x", seed, i, got, want)
			}
		}
	}
}

func TestReduce(t *testing.T) {
	for _, c := range []struct {
		h    uint64
		n    int
		want int
	}{
		{0, 10, 0},
		{math.MaxUint64, 10, 9},
		{1 << 63, 10, 5},
		{1 << 62, 1000, 250},
		{math.MaxUint64, 1, 0},
		{0x8000000000000001, 3, 1},
	} {
		if got := Reduce(c.h, c.n); got != c.want {
			t.Errorf("Reduce(%#x, %d) = %d, want %d", c.h, c.n, got, c.want)
		}
	}
}

// TestUint64NRejects checks Uint64N draw for draw against Lemire's rule
// stated with math/big: x*n split into its high and low 64 bits, x redrawn
// while the low part is below 2^64 mod n. n = 2^63+1 rejects about half of
// the draws, so both branches run many times.
func TestUint64NRejects(t *testing.T) {
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	for _, n := range []uint64{1<<63 + 1, 3, 1 << 40, math.MaxUint64} {
		bn := new(big.Int).SetUint64(n)
		thresh := new(big.Int).Mod(two64, bn)
		want := func(next func() uint64) uint64 {
			for {
				v := new(big.Int).Mul(new(big.Int).SetUint64(next()), bn)
				lo := new(big.Int).Mod(v, two64)
				if lo.Cmp(thresh) >= 0 {
					return new(big.Int).Rsh(v, 64).Uint64()
				}
			}
		}
		s, sref := NewSplitMix(n), NewSplitMix(n)
		p, pref := NewPCG(n, 1), NewPCG(n, 1)
		for i := range 1000 {
			if got, w := s.Uint64N(n), want(sref.Uint64); got != w {
				t.Fatalf("SplitMix: Uint64N(%d) draw %d = %d, want %d", n, i, got, w)
			}
			if got, w := p.Uint64N(n), want(pref.Uint64); got != w {
				t.Fatalf("PCG: Uint64N(%d) draw %d = %d, want %d", n, i, got, w)
			}
		}
		if s != sref || p != pref {
			t.Fatalf("n=%d: Uint64N consumed a different number of draws than the rule", n)
		}
	}
}

// TestUint64NUniform compares the counts of 7 values (not a power of two)
// over 700,000 draws with the uniform law by a chi-square test, bounded by
// the 1 - 1e-6 quantile of the chi-square law with 6 degrees of freedom
// (chiSquareBound): a correct generator exceeds it once in a million
// seeds, a wrong reduction (say, modulo bias or an off-by-one) by far.
func TestUint64NUniform(t *testing.T) {
	const n, draws = 7, 700000
	rs := map[string]interface{ Uint64N(uint64) uint64 }{"splitmix": new(SplitMix), "pcg": &PCG{}}
	for name, r := range rs {
		var counts [n]float64
		for range draws {
			v := r.Uint64N(n)
			if v >= n {
				t.Fatalf("%s: Uint64N(%d) = %d", name, n, v)
			}
			counts[v]++
		}
		var chi2 float64
		for _, c := range counts {
			d := c - draws/n
			chi2 += d * d / (draws / n)
		}
		if limit := chiSquareBound(n - 1); chi2 > limit {
			t.Errorf("%s: chi-square %.1f over %d values, want below %.1f", name, chi2, n, limit)
		}
	}
}

func TestFloat64Range(t *testing.T) {
	if unit(0) != 0 || unit(math.MaxUint64) != 1-0x1p-53 {
		t.Errorf("unit(0) = %v, unit(max) = %v, want 0 and 1-2^-53", unit(0), unit(math.MaxUint64))
	}
	r := NewSplitMix(3)
	var sum float64
	const draws = 100000
	for range draws {
		f := r.Float64()
		if f < 0 || f >= 1 {
			t.Fatalf("Float64 = %v, want [0, 1)", f)
		}
		sum += f
	}
	// The mean of n uniforms has standard deviation sqrt(1/12/n), about
	// 0.0009 here: 6 of them is one failure in half a billion seeds.
	if mean := sum / draws; math.Abs(mean-0.5) > 6*math.Sqrt(1.0/12/draws) {
		t.Errorf("mean of %d draws %v, want 0.5", draws, mean)
	}
}

// The hot-path draws allocate nothing.
func TestNoAllocs(t *testing.T) {
	w, s, p := NewWyrand(1), NewSplitMix(1), NewPCG(1, 2)
	var sink uint64
	if n := testing.AllocsPerRun(1000, func() {
		sink += uint64(w.IntN(1000)) + uint64(s.IntN(1000)) + uint64(p.IntN(1000))
		sink += uint64(w.Float64() + s.Float64() + p.Float64())
		sink += Mix64(sink) + uint64(Reduce(sink, 17))
	}); n != 0 {
		t.Errorf("%v allocations per draw, want 0", n)
	}
	_ = sink
}

func BenchmarkMix64(b *testing.B) {
	b.ReportAllocs()
	x := uint64(1)
	for b.Loop() {
		x = Mix64(x)
	}
	_ = x
}

func BenchmarkWyrandIntN(b *testing.B) {
	b.ReportAllocs()
	r := NewWyrand(1)
	var x int
	for b.Loop() {
		x += r.IntN(1000)
	}
	_ = x
}

func BenchmarkSplitMixUint64N(b *testing.B) {
	b.ReportAllocs()
	r := NewSplitMix(1)
	var x uint64
	for b.Loop() {
		x += r.Uint64N(1000)
	}
	_ = x
}

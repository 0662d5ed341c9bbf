package eval

import (
	"math"
	"math/bits"
)

// splitMix is a small deterministic generator for synthetic streams.
type splitMix struct{ s uint64 }

func newSplitMix(seed uint64) splitMix { return splitMix{s: seed} }

func (r *splitMix) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// below returns a uniform value in [0, n) without modulo bias (Lemire's
// method with rejection).
func (r *splitMix) below(n uint64) uint64 {
	hi, lo := bits.Mul64(r.next(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(r.next(), n)
		}
	}
	return hi
}

// float64 returns a uniform value in [0, 1).
func (r *splitMix) float64() float64 { return float64(r.next()>>11) * 0x1p-53 }

// zipf draws ranks in [1, n] with P(k) proportional to k^-s, for any s > 0,
// by rejection-inversion (Hörmann and Derflinger, "Rejection-inversion to
// generate variates from monotone discrete distributions", 1996): O(1) per
// draw and no table, so universes of billions cost nothing to set up.
// math/rand's Zipf needs s > 1; skewed traffic is often s < 1.
type zipf struct {
	n        float64
	s        float64
	hX1      float64 // H(1.5) - 1
	hN       float64 // H(n + 0.5)
	shortcut float64
}

func newZipf(n uint64, s float64) *zipf {
	z := &zipf{n: float64(n), s: s}
	z.hX1 = z.bigH(1.5) - 1
	z.hN = z.bigH(z.n + 0.5)
	z.shortcut = 2 - z.bigHInv(z.bigH(2.5)-z.h(2))
	return z
}

// h is the unnormalised mass x^-s.
func (z *zipf) h(x float64) float64 { return math.Exp(-z.s * math.Log(x)) }

// bigH is an antiderivative of h: (x^(1-s) - 1)/(1-s), written with expm1 so
// it stays accurate as s approaches 1 (where it tends to log x).
func (z *zipf) bigH(x float64) float64 {
	lx := math.Log(x)
	return expm1OverX((1-z.s)*lx) * lx
}

// bigHInv inverts bigH.
func (z *zipf) bigHInv(y float64) float64 {
	t := y * (1 - z.s)
	if t < -1 {
		t = -1 // rounding can step past the domain edge
	}
	return math.Exp(log1pOverX(t) * y)
}

func (z *zipf) sample(r *splitMix) uint64 {
	for {
		u := z.hN + r.float64()*(z.hX1-z.hN)
		x := z.bigHInv(u)
		k := math.Floor(x + 0.5)
		if k < 1 {
			k = 1
		} else if k > z.n {
			k = z.n
		}
		if k-x <= z.shortcut || u >= z.bigH(k+0.5)-z.h(k) {
			return uint64(k)
		}
	}
}

// expm1OverX is (e^x - 1)/x, 1 at x = 0.
func expm1OverX(x float64) float64 {
	if math.Abs(x) < 1e-8 {
		return 1 + x/2
	}
	return math.Expm1(x) / x
}

// log1pOverX is log(1+x)/x, 1 at x = 0.
func log1pOverX(x float64) float64 {
	if math.Abs(x) < 1e-8 {
		return 1 - x/2
	}
	return math.Log1p(x) / x
}

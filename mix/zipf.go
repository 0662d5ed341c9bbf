package mix

import "math"

// Zipf draws ranks in [1, n] with P(k) proportional to k^-s, for any s > 0,
// by rejection-inversion (Hörmann and Derflinger, "Rejection-inversion to
// generate variates from monotone discrete distributions", ACM TOMACS,
// 1996): O(1) per draw and no table, so universes of billions cost nothing
// to set up. math/rand's Zipf needs s > 1; skewed traffic is often s < 1.
// A Zipf is read-only once made: goroutines may share it, each with its
// own generator.
type Zipf struct {
	n        float64
	s        float64
	hX1      float64 // H(1.5) - 1
	hN       float64 // H(n + 0.5)
	shortcut float64
}

// NewZipf returns the sampler of ranks 1..n, n >= 1, with exponent s > 0.
func NewZipf(n uint64, s float64) *Zipf {
	z := &Zipf{n: float64(n), s: s}
	z.hX1 = z.bigH(1.5) - 1
	z.hN = z.bigH(z.n + 0.5)
	z.shortcut = 2 - z.bigHInv(z.bigH(2.5)-z.h(2))
	return z
}

// h is the unnormalised mass x^-s.
func (z *Zipf) h(x float64) float64 { return math.Exp(-z.s * math.Log(x)) }

// bigH is an antiderivative of h: (x^(1-s) - 1)/(1-s), written with expm1 so
// it stays accurate as s approaches 1 (where it tends to log x).
func (z *Zipf) bigH(x float64) float64 {
	lx := math.Log(x)
	return expm1OverX((1-z.s)*lx) * lx
}

// bigHInv inverts bigH.
func (z *Zipf) bigHInv(y float64) float64 {
	t := y * (1 - z.s)
	if t < -1 {
		t = -1 // rounding can step past the domain edge
	}
	return math.Exp(log1pOverX(t) * y)
}

// Draw returns a rank in [1, n], drawing one or (rarely) more uniforms
// from r.
func (z *Zipf) Draw(r Rand) uint64 {
	for {
		u := z.hN + r.Float64()*(z.hX1-z.hN)
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

// Alias samples an index in [0, n) from a fixed discrete distribution in
// O(1) by Walker's alias method, with Vose's construction ("A linear
// algorithm for generating random numbers with a given distribution", IEEE
// TSE, 1991): index i is kept with probability prob[i], else replaced by
// alias[i]. An Alias is read-only once made.
type Alias struct {
	prob  []float64
	alias []uint32
}

// NewZipfTable returns the alias table of ranks 1..n as indices 0..n-1,
// with P(rank k) proportional to k^-s. It holds 12 bytes per rank.
func NewZipfTable(n int, s float64) *Alias {
	w := make([]float64, n)
	for i := range w {
		w[i] = math.Exp(-s * math.Log(float64(i+1)))
	}
	return NewAlias(w)
}

// NewAlias returns the table of the weights w: index i is drawn with
// probability w[i]/sum(w). The weights must be non-negative and finite,
// with a positive sum, and at most 2^32 of them. NewAlias keeps w and
// overwrites it.
func NewAlias(w []float64) *Alias {
	var total float64
	for _, v := range w {
		total += v
	}
	n := len(w)
	a := &Alias{prob: w, alias: make([]uint32, n)}
	// Scale to mean 1, then pair each under-full index with an over-full
	// one that tops it up. work holds the under-full indices from the
	// front and the over-full ones from the back.
	work := make([]uint32, n)
	small, large := 0, n
	for i := range w {
		w[i] *= float64(n) / total
		if w[i] < 1 {
			work[small] = uint32(i)
			small++
		} else {
			large--
			work[large] = uint32(i)
		}
	}
	for small > 0 && large < n {
		small--
		l, g := work[small], work[large]
		a.alias[l] = g // prob[l] already holds l's share
		w[g] -= 1 - w[l]
		if w[g] < 1 {
			large++
			work[small] = g
			small++
		}
	}
	// Whatever is left is full up to rounding.
	for _, i := range work[:small] {
		w[i] = 1
	}
	for _, i := range work[large:] {
		w[i] = 1
	}
	return a
}

// Len returns the number of indices the table draws from.
func (a *Alias) Len() int { return len(a.prob) }

// Draw returns an index in [0, Len()), drawing two uniforms from r.
func (a *Alias) Draw(r Rand) int {
	i := r.Uint64N(uint64(len(a.prob)))
	if r.Float64() < a.prob[i] {
		return int(i)
	}
	return int(a.alias[i])
}

package mix

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// chiSquareBound is the 1 - 1e-6 quantile of the chi-square law with df
// degrees of freedom: the statistic of a correct sampler exceeds it in one
// run in a million (for seeds chosen at random; the tests' seeds are fixed,
// so they are deterministic), while a sampler off by a rank, or with a
// wrong exponent, exceeds it by orders of magnitude at the draw counts used.
func chiSquareBound(df int) float64 {
	return distuv.ChiSquared{K: float64(df)}.Quantile(1 - 1e-6)
}

// chiSquare compares counts with the probabilities p (summing to 1) over
// draws draws. Cells expected to hold fewer than 5 draws, where the
// chi-square approximation of the statistic's law fails, are pooled into
// one cell. It returns the statistic and its degrees of freedom.
func chiSquare(counts []int, p []float64, draws int) (chi2 float64, df int) {
	var poolCount, poolWant float64
	cells := 0
	for i, c := range counts {
		want := float64(draws) * p[i]
		if want < 5 {
			poolCount += float64(c)
			poolWant += want
			continue
		}
		d := float64(c) - want
		chi2 += d * d / want
		cells++
	}
	if poolWant > 0 {
		if poolWant >= 5 {
			d := poolCount - poolWant
			chi2 += d * d / poolWant
			cells++
		} else if poolCount > poolWant+10*math.Sqrt(poolWant)+10 {
			chi2 = math.Inf(1) // mass where there should be almost none
		}
	}
	return chi2, cells - 1
}

// zipfPMF returns P(rank k) = k^-s / H(n, s) for k = 1..n, at index k-1.
func zipfPMF(n int, s float64) []float64 {
	p := make([]float64, n)
	var h float64
	for k := n; k >= 1; k-- { // smallest terms first
		p[k-1] = math.Pow(float64(k), -s)
		h += p[k-1]
	}
	for i := range p {
		p[i] /= h
	}
	return p
}

// TestZipfMatchesPMF draws from Zipf for exponents below, at and above 1
// (math/rand's Zipf cannot do s <= 1) and compares the ranks' counts with
// the exact pmf by a chi-square test at chiSquareBound.
func TestZipfMatchesPMF(t *testing.T) {
	const draws = 400000
	for _, c := range []struct {
		n int
		s float64
	}{{20, 0.5}, {20, 0.99}, {20, 1}, {20, 1.3}, {20, 2.5}, {1, 1}, {2, 0.01}, {1000, 1.1}} {
		z := NewZipf(uint64(c.n), c.s)
		r := NewSplitMix(uint64(c.n)*1000 + uint64(c.s*1000))
		counts := make([]int, c.n)
		for range draws {
			k := z.Draw(&r)
			if k < 1 || k > uint64(c.n) {
				t.Fatalf("n=%d s=%g: rank %d outside [1, %d]", c.n, c.s, k, c.n)
			}
			counts[k-1]++
		}
		chi2, df := chiSquare(counts, zipfPMF(c.n, c.s), draws)
		if df < 1 {
			continue // one rank: checked by the range test above
		}
		if limit := chiSquareBound(df); chi2 > limit {
			t.Errorf("n=%d s=%g: chi-square %.1f with %d degrees of freedom, want below %.1f", c.n, c.s, chi2, df, limit)
		}
	}
}

// harmonic returns H(n, s) = sum of k^-s for k = 1..n by the Euler-Maclaurin
// formula: the first m-1 terms summed, the rest as an integral with its
// first two corrections. The next correction is below s(s+1)(s+2)/720 *
// m^-(s+3), under 1e-11 for m = 1000 and s < 2.
func harmonic(n, s float64) float64 {
	const m = 1000
	var h float64
	for k := m - 1; k >= 1; k-- {
		h += math.Pow(float64(k), -s)
	}
	if n < m {
		panic("harmonic: n below m")
	}
	var integral float64
	if s == 1 {
		integral = math.Log(n / m)
	} else {
		integral = (math.Pow(n, 1-s) - math.Pow(m, 1-s)) / (1 - s)
	}
	return h + integral + (math.Pow(m, -s)+math.Pow(n, -s))/2 + s/12*(math.Pow(m, -s-1)-math.Pow(n, -s-1))
}

// TestZipfHugeUniverse checks the head of a universe too big for a table,
// where the sampler's continuous approximations matter most: ranks 1 and
// 1-10 must have their shares of H(n, s) (harmonic, itself checked against
// a direct sum). Each count is binomial: 6 standard deviations is one
// failure in 500 million seeds.
func TestZipfHugeUniverse(t *testing.T) {
	const n, draws = 1 << 40, 200000
	for _, s := range []float64{0.8, 1, 1.1} {
		var direct float64
		for k := 1_000_000; k >= 1; k-- {
			direct += math.Pow(float64(k), -s)
		}
		if em := harmonic(1e6, s); math.Abs(em-direct) > 1e-9*direct {
			t.Fatalf("s=%g: Euler-Maclaurin H(1e6) = %.12g, direct sum %.12g", s, em, direct)
		}
		h := harmonic(n, s)
		z := NewZipf(n, s)
		r := NewSplitMix(99)
		ones, small := 0, 0
		for range draws {
			k := z.Draw(&r)
			if k < 1 || k > n {
				t.Fatalf("s=%g: rank %d outside [1, 2^40]", s, k)
			}
			if k == 1 {
				ones++
			}
			if k <= 10 {
				small++
			}
		}
		var h10 float64
		for k := 1; k <= 10; k++ {
			h10 += math.Pow(float64(k), -s)
		}
		for _, c := range []struct {
			what string
			got  int
			p    float64
		}{{"rank 1", ones, 1 / h}, {"ranks 1-10", small, h10 / h}} {
			mean, sd := draws*c.p, math.Sqrt(draws*c.p*(1-c.p))
			if math.Abs(float64(c.got)-mean) > 6*sd {
				t.Errorf("s=%g: %s drawn %d times, want %.0f ± %.0f", s, c.what, c.got, mean, 6*sd)
			}
		}
	}
}

// TestZipfTableMatchesPMF does the same for the alias tables, including a
// single rank and an exponent so steep that almost all mass is on rank 1.
func TestZipfTableMatchesPMF(t *testing.T) {
	const draws = 200000
	for _, c := range []struct {
		n int
		s float64
	}{{1, 1}, {2, 0.01}, {20, 0.5}, {50, 1}, {50, 2.5}, {1000, 1.1}, {5, 60}} {
		a := NewZipfTable(c.n, c.s)
		if a.Len() != c.n {
			t.Fatalf("n=%d: table of %d ranks", c.n, a.Len())
		}
		r := NewPCG(uint64(c.n), 1)
		counts := make([]int, c.n)
		for range draws {
			counts[a.Draw(&r)]++
		}
		chi2, df := chiSquare(counts, zipfPMF(c.n, c.s), draws)
		if df < 1 {
			if c.n > 1 && counts[0] < draws-10 {
				t.Errorf("n=%d s=%g: rank 1 drawn %d of %d times", c.n, c.s, counts[0], draws)
			}
			continue
		}
		if limit := chiSquareBound(df); chi2 > limit {
			t.Errorf("n=%d s=%g: chi-square %.1f with %d degrees of freedom, want below %.1f", c.n, c.s, chi2, df, limit)
		}
	}
}

// TestAliasWeights: any weights, zeros included (never drawn).
func TestAliasWeights(t *testing.T) {
	w := []float64{0, 1, 2, 0, 5, 0.5, 1e-3}
	var total float64
	for _, v := range w {
		total += v
	}
	p := make([]float64, len(w))
	for i, v := range w {
		p[i] = v / total
	}
	a := NewAlias(w)
	r := NewSplitMix(5)
	const draws = 300000
	counts := make([]int, len(p))
	for range draws {
		counts[a.Draw(&r)]++
	}
	if counts[0] != 0 || counts[3] != 0 {
		t.Errorf("zero weights drawn: %v", counts)
	}
	chi2, df := chiSquare(counts, p, draws)
	if limit := chiSquareBound(df); chi2 > limit {
		t.Errorf("chi-square %.1f with %d degrees of freedom, want below %.1f", chi2, df, limit)
	}
}

func BenchmarkZipfDraw(b *testing.B) {
	b.ReportAllocs()
	z := NewZipf(1<<30, 1.1)
	r := NewSplitMix(1)
	var x uint64
	for b.Loop() {
		x += z.Draw(&r)
	}
	_ = x
}

package filters

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/flowdedup/flowdedup/mix"
)

// qhtNew builds a QHT-family filter from spec or fails the test.
func qhtNew(t testing.TB, spec string, seed uint64) *QHT { return mustNew[*QHT](t, spec, seed) }

// qhtSpec names a filter of exactly rows rows (plus extra bits, less than a
// row, that floor(M/(k*s)) must drop).
func qhtSpec(name string, rows, k, s, extra int) string {
	return fmt.Sprintf("%s:mem=%dbit,buckets=%d,fpbits=%d", name, rows*k*s+extra, k, s)
}

// qhtRef is a reference model of the three variants written straight from
// the paper's pseudo-code: rows as slices, loops over buckets. It draws from
// its own copy of the filter's random source as the filter does: one bucket
// per call for qht and qhtd, used only when the row is full. (With k = 1 the
// filter draws nothing: every draw is 0 and the state goes unused.)
type qhtRef struct {
	variant qhtVariant
	rows    [][]uint64
	mask    uint64
	rng     mix.Wyrand
}

func newQHTRef(v qhtVariant, rows, k, s int, seed uint64) *qhtRef {
	r := &qhtRef{variant: v, rows: make([][]uint64, rows), mask: 1<<uint(s) - 1, rng: mix.NewWyrand(seed)}
	for i := range r.rows {
		r.rows[i] = make([]uint64, k)
	}
	return r
}

func (r *qhtRef) observe(h uint64) bool {
	row := r.rows[mix.Reduce(h, len(r.rows))]
	// Option (3): while 0, remix.
	fp := h & r.mask
	for x := h; fp == 0; fp = x & r.mask {
		x = mix.Mix64(x + mix.Golden)
	}
	dup := false
	for _, b := range row {
		if b == fp {
			dup = true
			break
		}
	}
	if r.variant == qhtQueue {
		copy(row, row[1:])
		row[len(row)-1] = fp
		return dup
	}
	random := int((r.rng.Uint64() >> 32) * uint64(len(row)) >> 32)
	if dup && r.variant == qhtBasic {
		return true
	}
	j := -1
	for i, b := range row {
		if b == 0 {
			j = i
			break
		}
	}
	if j < 0 {
		j = random
	}
	row[j] = fp
	return dup
}

// qhtShapes covers one-word rows that straddle words (k*s not dividing 64),
// rows of exactly 64 bits, wide rows of several chunks with a short last
// chunk, and the extremes of both parameters.
var qhtShapes = []struct{ k, s int }{
	{1, 1}, {1, 3}, {3, 2}, {3, 5}, {4, 8}, {7, 9}, {8, 8}, {2, 32},
	{5, 13}, {12, 7}, {64, 7}, {64, 32},
}

func TestQHTMatchesReferenceModel(t *testing.T) {
	for _, v := range []qhtVariant{qhtBasic, qhtDup, qhtQueue} {
		for _, sh := range qhtShapes {
			const rows = 61 // odd, so rows start at every bit offset mod 64 for odd k*s
			spec := qhtSpec(v.String(), rows, sh.k, sh.s, sh.k*sh.s-1)
			t.Run(spec, func(t *testing.T) {
				q := qhtNew(t, spec, 7)
				if q.Rows() != rows || q.SizeBits() != rows*sh.k*sh.s || q.Buckets() != sh.k || q.FPBits() != sh.s {
					t.Fatalf("rows %d size %d k %d s %d, want %d %d %d %d",
						q.Rows(), q.SizeBits(), q.Buckets(), q.FPBits(), rows, rows*sh.k*sh.s, sh.k, sh.s)
				}
				ref := newQHTRef(v, rows, sh.k, sh.s, 7)
				// The state, read through packed (independent of the row
				// code), holds the reference's fingerprints in the same
				// order; a full row is the same bucket for bucket. (A row
				// not yet full keeps them at its top, Algorithm 1 at its
				// bottom: see QHT.)
				checkState := func(when int) {
					t.Helper()
					for i, row := range ref.rows {
						var got, want []uint64
						for j, b := range row {
							if b != 0 {
								want = append(want, b)
							}
							if c := q.cells.get(i*sh.k + j); c != 0 {
								got = append(got, c)
							}
						}
						if !slices.Equal(got, want) {
							t.Fatalf("after %d: row %d holds %v, reference %v", when, i, got, want)
						}
						if len(want) == sh.k {
							for j, b := range row {
								if c := q.cells.get(i*sh.k + j); c != b {
									t.Fatalf("after %d: full row %d bucket %d = %d, reference %d", when, i, j, c, b)
								}
							}
						}
					}
				}
				// A universe of 3 elements per bucket: rows fill, evict and
				// see true duplicates.
				universe := uint64(3 * rows * sh.k)
				x := mix.NewWyrand(99)
				for i := range 20 * rows * sh.k {
					h := testHash(x.Uint64()%universe, 1)
					if got, want := q.Observe(h), ref.observe(h); got != want {
						t.Fatalf("observation %d (h=%#x): got %v, reference %v", i, h, got, want)
					}
					if i == rows*sh.k/2 { // most rows partly filled
						checkState(i)
					}
				}
				checkState(20 * rows * sh.k)
				// Nothing was written past the last row.
				end := q.SizeBits()
				for w := end / 64; w < len(q.cells.words); w++ {
					word := q.cells.words[w]
					if w == end/64 {
						word &^= 1<<uint(end%64) - 1
					}
					if word != 0 {
						t.Fatalf("word %d beyond the state holds %#x", w, word)
					}
				}
			})
		}
	}
}

// TestQHTLane checks the SWAR row matcher against a loop over fields, for
// every field width and count, on words whose fields are often zero or equal
// to the probe.
func TestQHTLane(t *testing.T) {
	x := mix.NewWyrand(1)
	for s := uint(1); s <= 32; s++ {
		mask := uint64(1)<<s - 1
		for n := uint(1); n*s <= 64; n++ {
			l := newQHTLane(n, s)
			for range 200 {
				fp := x.Uint64() & mask
				var v uint64
				for i := range n {
					var f uint64
					switch x.IntN(4) {
					case 0:
						f = 0
					case 1:
						f = fp
					default:
						f = x.Uint64() & mask
					}
					v |= f << (i * s)
				}
				var zeros uint64
				holds := false
				for i := range n {
					f := v >> (i * s) & mask
					if f == 0 {
						zeros |= 1 << (i*s + s - 1)
					}
					holds = holds || f == fp
				}
				if got := l.zeros(v); got != zeros {
					t.Fatalf("s=%d n=%d v=%#x: zeros %#x, want %#x", s, n, v, got, zeros)
				}
				if got := l.holds(v, fp); got != holds {
					t.Fatalf("s=%d n=%d v=%#x fp=%d: holds %v, want %v", s, n, v, fp, got, holds)
				}
			}
		}
	}
}

// TestQHTLoadStore checks the unaligned row read and both writes at every
// offset and width against bit-by-bit access, up to the last bit before the
// spare word.
func TestQHTLoadStore(t *testing.T) {
	x := mix.NewWyrand(2)
	words := make([]uint64, 3)
	for width := uint(1); width <= 64; width++ {
		mask := ^uint64(0) >> (64 - width)
		for bit := uint64(0); bit+uint64(width) <= 128; bit++ {
			for i := range words {
				words[i] = x.Uint64()
			}
			before := append([]uint64(nil), words...)
			var want uint64
			for i := range uint64(width) {
				b := bit + i
				want |= (words[b/64] >> (b % 64) & 1) << i
			}
			if got := qhtLoad(words, bit, mask); got != want {
				t.Fatalf("load(bit %d, width %d) = %#x, want %#x", bit, width, got, want)
			}
			v := x.Uint64() & mask
			qhtStore(words, bit, mask, v)
			for b := uint64(0); b < 192; b++ {
				old := before[b/64] >> (b % 64) & 1
				if b >= bit && b < bit+uint64(width) {
					old = v >> (b - bit) & 1
				}
				if got := words[b/64] >> (b % 64) & 1; got != old {
					t.Fatalf("store(bit %d, width %d): bit %d = %d, want %d", bit, width, b, got, old)
				}
			}
			// qhtFlip of old^new writes new, and nothing else.
			copy(before, words)
			v2 := x.Uint64() & mask
			qhtFlip(words, bit, v^v2)
			for b := uint64(0); b < 192; b++ {
				old := before[b/64] >> (b % 64) & 1
				if b >= bit && b < bit+uint64(width) {
					old = v2 >> (b - bit) & 1
				}
				if got := words[b/64] >> (b % 64) & 1; got != old {
					t.Fatalf("flip(bit %d, width %d): bit %d = %d, want %d", bit, width, b, got, old)
				}
			}
		}
	}
}

// TestQHTFingerprint checks option (3) of Sec. 3.2: fingerprints are never 0
// (the empty mark) and uniform over the S = 2^s - 1 others, including for
// hashes whose low bits are 0 and go through the remix.
func TestQHTFingerprint(t *testing.T) {
	for _, s := range []int{1, 2, 3} {
		mask := uint64(1)<<s - 1
		fingerprint := func(h uint64) uint64 { return nonZeroFingerprint(h, mask) }
		S := 1<<s - 1
		// Any hashes, and hashes whose low bits are 0, for which only the
		// remix gives a fingerprint.
		for _, lowZero := range []bool{false, true} {
			counts := make([]int, S+1)
			const n = 1 << 16
			for i := range uint64(n) {
				h := testHash(i, 3)
				if lowZero {
					h &^= mask
				}
				counts[fingerprint(h)]++
			}
			if counts[0] != 0 {
				t.Fatalf("s=%d: %d zero fingerprints", s, counts[0])
			}
			// Each count is binomial(n, 1/S): 5 standard errors.
			p := 1 / float64(S)
			tol := 5 * math.Sqrt(n*p*(1-p))
			for fp := 1; fp <= S; fp++ {
				if d := math.Abs(float64(counts[fp]) - n*p); d > tol+0.5 {
					t.Errorf("s=%d low bits 0=%v: fingerprint %d seen %d times, want %.0f ± %.0f",
						s, lowZero, fp, counts[fp], n*p, tol)
				}
			}
		}
	}
}

// qhtDistinctFPR feeds warm distinct elements, then returns the fraction of
// the next n distinct elements reported duplicate: all false positives.
func qhtDistinctFPR(q *QHT, warm, n int, salt uint64) float64 {
	i := uint64(0)
	for ; i < uint64(warm); i++ {
		q.Observe(testHash(i, salt))
	}
	fp := 0
	for end := i + uint64(n); i < end; i++ {
		if q.Observe(testHash(i, salt)) {
			fp++
		}
	}
	return float64(fp) / float64(n)
}

// TestQHTSaturatedFPR checks Theorem 4.1 (QHT: FPR -> k/S) and Sec. 5.1
// (QHTD: FPR -> 1 - (1 - 1/S)^k), and QQHTD against the latter, on uniform
// streams of distinct elements long past saturation.
func TestQHTSaturatedFPR(t *testing.T) {
	for _, c := range []struct {
		v    qhtVariant
		k, s int
	}{
		{qhtBasic, 1, 3}, {qhtBasic, 2, 3}, {qhtBasic, 4, 4}, {qhtBasic, 8, 8}, {qhtBasic, 12, 7},
		{qhtDup, 4, 3}, {qhtDup, 2, 4}, {qhtDup, 12, 7},
		{qhtQueue, 4, 3}, {qhtQueue, 12, 7},
	} {
		const rows = 2048
		spec := qhtSpec(c.v.String(), rows, c.k, c.s, 0)
		t.Run(spec, func(t *testing.T) {
			S := float64(int(1)<<c.s - 1)
			k := float64(c.k)
			want := k / S
			if c.v != qhtBasic {
				want = 1 - math.Pow(1-1/S, k)
			}
			// Warm-up: 30 elements per bucket. Every row is then full:
			// the chance a row got fewer than k of its ~30k arrivals is
			// below e^-20 per row.
			const n = 1 << 18
			got := qhtDistinctFPR(qhtNew(t, spec, 5), 30*rows*c.k, n, 11)
			// QHT: once every row is full, it holds exactly k distinct
			// fingerprints, so each unseen element is a false positive with
			// probability k/S whatever the row holds: the n outcomes are
			// independent Bernoulli(k/S), and 4.5 standard errors never fail
			// by chance (p < 1e-5). QHTD/QQHTD: buckets are independent
			// uniform only marginally; outcomes in one row are correlated
			// over the next k arrivals, which at most multiplies the
			// variance by about k: allow 4.5*sqrt(k) standard errors.
			se := math.Sqrt(want * (1 - want) / n)
			tol := 4.5 * se
			if c.v != qhtBasic {
				tol *= math.Sqrt(k)
			}
			t.Logf("FPR %.5f, analytic %.5f (tolerance %.5f)", got, want, tol)
			if math.Abs(got-want) > tol {
				t.Errorf("FPR %.5f, want %.5f ± %.5f", got, want, tol)
			}
		})
	}
}

// qhtExactFP is the probability that the (m+1)-th element of a distinct
// stream is a false positive in a QHT before saturation, computed exactly:
// its row has had J ~ Binomial(m, 1/N) arrivals and holds d distinct
// fingerprints, where each arrival adds one with probability 1 - d/S while
// d < k; the answer is E[d]/S.
func qhtExactFP(m, rows, k int, S float64) float64 {
	p := 1 / float64(rows)
	// pj = P(J = j), computed in logs; dist[d] = P(d | j arrivals).
	dist := make([]float64, k+1)
	dist[0] = 1
	var ed float64
	logPJ := float64(m) * math.Log1p(-p) // j = 0
	for j := 0; j <= m; j++ {
		pj := math.Exp(logPJ)
		if j > 10 && pj < 1e-18 {
			break
		}
		mean := 0.0
		for d, pd := range dist {
			mean += float64(d) * pd
		}
		ed += pj * mean
		next := make([]float64, k+1)
		for d, pd := range dist {
			add := 0.0
			if d < k {
				add = 1 - float64(d)/S
			}
			next[d] += pd * (1 - add)
			if d < k {
				next[d+1] += pd * add
			}
		}
		dist = next
		logPJ += math.Log(float64(m-j)) - math.Log(float64(j+1)) + math.Log(p) - math.Log1p(-p)
	}
	return ed / S
}

// TestQHTFiniteFPm checks FP_m before saturation. For k = 1 Theorem 4.1's
// FP_m = k/S (1 - (1 - 1/(Nk))^m) is exact: the row of the next element is
// non-empty with probability 1 - (1-1/N)^m, and then holds one uniform
// fingerprint. For k > 1 the paper's formula assumes every arrival evicts
// a random bucket even while its row has empty ones, so it underestimates
// FP_m; the measured rate is checked against the exact value and the
// paper's is only logged.
func TestQHTFiniteFPm(t *testing.T) {
	for _, c := range []struct{ k, s, rows int }{{1, 3, 1 << 16}, {4, 4, 1 << 14}} {
		spec := qhtSpec("qht", c.rows, c.k, c.s, 0)
		t.Run(spec, func(t *testing.T) {
			q := qhtNew(t, spec, 9)
			S := float64(int(1)<<c.s - 1)
			nk := c.rows * c.k
			paper := func(m int) float64 {
				return float64(c.k) / S * (1 - math.Pow(1-1/float64(nk), float64(m)))
			}
			// Windows of nk/2 observations centred on m = nk/4, nk and 3nk.
			type window struct{ lo, hi int }
			windows := []window{{0, nk / 2}, {3 * nk / 4, 5 * nk / 4}, {11 * nk / 4, 13 * nk / 4}}
			fps := make([]bool, windows[len(windows)-1].hi)
			for m := range fps {
				fps[m] = q.Observe(testHash(uint64(m), 21))
			}
			for _, w := range windows {
				var got, exact, approx float64
				for m := w.lo; m < w.hi; m++ {
					if fps[m] {
						got++
					}
					// FP_m varies slowly: sample the formulas every 64.
					if (m-w.lo)%64 == 0 {
						exact += qhtExactFP(m, c.rows, c.k, S)
						approx += paper(m)
					}
				}
				n := float64(w.hi - w.lo)
				samples := float64((w.hi - w.lo + 63) / 64)
				got, exact, approx = got/n, exact/samples, approx/samples
				// Outcomes depend on each other only through how many rows
				// are non-empty, which concentrates: treat them as n
				// Bernoulli trials and allow 4.5 standard errors, plus 1%
				// of the value for sampling the formula every 64 steps.
				tol := 4.5*math.Sqrt(exact*(1-exact)/n) + 0.01*exact
				t.Logf("m in [%d,%d): FPR %.5f, exact %.5f, paper's FP_m %.5f (tolerance %.5f)", w.lo, w.hi, got, exact, approx, tol)
				if math.Abs(got-exact) > tol {
					t.Errorf("m in [%d,%d): FPR %.5f, want %.5f ± %.5f", w.lo, w.hi, got, exact, tol)
				}
				if c.k == 1 && math.Abs(exact-approx) > 1e-3*exact {
					t.Errorf("k=1: exact FP_m %.6f differs from the paper's %.6f", exact, approx)
				}
			}
		})
	}
}

// qhtPaperFNR is FNR_inf of Theorem 4.2 (Appendix B) for a finite universe U.
func qhtPaperFNR(rows, k int, S, U float64) float64 {
	N, K := float64(rows), float64(k)
	a := (S - K) / (K * (N*S - 1))
	b := K / S
	c := 1 - 1/(N*K)
	da := U - (U-1)*(1-a)
	dc := U - (U-1)*c
	return 1 - b - (1-b)/da + a*b/((1-a-c)*da) - a*b/((1-a-c)*dc)
}

// TestQHTSaturatedFNR checks Theorem 4.2 on a uniform stream over a universe
// U much larger than N*k: over a late window, FNR -> 1 - k/S and FPR + FNR
// -> 1.
func TestQHTSaturatedFNR(t *testing.T) {
	for _, c := range []struct{ k, s int }{{1, 3}, {2, 3}, {4, 4}} {
		const rows = 1024
		spec := qhtSpec("qht", rows, c.k, c.s, 0)
		t.Run(spec, func(t *testing.T) {
			q := qhtNew(t, spec, 13)
			S := float64(int(1)<<c.s - 1)
			b := float64(c.k) / S
			U := 64 * rows * c.k
			seen := make([]bool, U)
			x := mix.NewWyrand(17)
			var fp, unseen, fn, dups float64
			// From U on the filter is saturated (U >> Nk arrivals), and a
			// third of arrivals are still unseen: the FPR is measured from
			// there. The FNR is measured from 3U on: a duplicate at time t
			// has its previous occurrence less than t ago, so early on its
			// gap is shorter than in the long run, and it is caught more
			// often than Theorem 4.2's limit says (see the bias below).
			for i := range 7 * U {
				e := x.IntN(U)
				dup := q.Observe(testHash(uint64(e), 23))
				switch {
				case seen[e] && i >= 3*U:
					dups++
					if !dup {
						fn++
					}
				case !seen[e] && i >= U:
					unseen++
					if dup {
						fp++
					}
				}
				seen[e] = true
			}
			fpr, fnr := fp/unseen, fn/dups
			paper := qhtPaperFNR(rows, c.k, S, float64(U))
			// A duplicate is caught only if its previous occurrence (a
			// Geometric(1/U) gap ago) is still stored, each arrival
			// evicting it with probability a = (S-k)/(k(NS-1)), or a false
			// duplicate stands in. So FNR falls short of 1-b by about
			// (1-b)/(1+Ua), 1.8% of 1-b at U = 64Nk: the paper's finite-U
			// FNR_inf has that term. With the gap cut at t >= 3U, retention
			// is up to 1/(1-e^-3) times the stationary one: bias at most
			// (1-b)/(1+Ua) * e^-3/(1-e^-3). Outcomes of one row are
			// correlated through its content, but rows are many and mix
			// fast: 6 binomial standard errors. FPR: 4.5 standard errors,
			// as in the FPR test.
			N, K := float64(rows), float64(c.k)
			a := (S - K) / (K * (N*S - 1))
			bias := (1 - b) / (1 + float64(U)*a) * math.Exp(-3) / (1 - math.Exp(-3))
			tolFN := 6*math.Sqrt(fnr*(1-fnr)/dups) + bias
			tolFP := 4.5 * math.Sqrt(b*(1-b)/unseen)
			t.Logf("FNR %.5f (paper finite-U %.5f, limit %.5f), FPR %.5f (limit %.5f), sum %.5f over %.0f dups, %.0f unseen",
				fnr, paper, 1-b, fpr, b, fpr+fnr, dups, unseen)
			if math.Abs(fnr-paper) > tolFN {
				t.Errorf("FNR %.5f, want the paper's %.5f ± %.5f", fnr, paper, tolFN)
			}
			// Against the limits themselves: FNR below 1-k/S by the
			// finite-U shortfall, allowed twice over.
			shortfall := (1 - b) / (1 + float64(U)*a)
			if d := (1 - b) - fnr; d < 0 || d > 2*shortfall {
				t.Errorf("FNR %.5f is not within %.4f below its limit 1-k/S = %.5f", fnr, 2*shortfall, 1-b)
			}
			if math.Abs(fpr-b) > tolFP {
				t.Errorf("FPR %.5f, want k/S = %.5f ± %.5f", fpr, b, tolFP)
			}
			if sum := fpr + fnr; math.Abs(sum-1) > 2*shortfall+tolFP {
				t.Errorf("FPR+FNR = %.5f, want 1 ± %.4f", sum, 2*shortfall+tolFP)
			}
		})
	}
}

// TestQHTNoFalseNegativeBeforeFull: QHT evicts only from a full row, so while
// no row has received more than k distinct elements it never forgets.
func TestQHTNoFalseNegativeBeforeFull(t *testing.T) {
	const rows, k, distinct = 4096, 4, 300
	q := qhtNew(t, qhtSpec("qht", rows, k, 6, 0), 1)
	perRow := make(map[int]int)
	for e := range uint64(distinct) {
		perRow[mix.Reduce(testHash(e, 31), rows)]++
	}
	for r, n := range perRow {
		if n > k {
			t.Fatalf("precondition: row %d receives %d > k distinct elements; pick another salt", r, n)
		}
	}
	seen := make([]bool, distinct)
	x := mix.NewWyrand(3)
	fn, dups := 0, 0
	for range 50 * distinct {
		e := x.IntN(distinct)
		dup := q.Observe(testHash(uint64(e), 31))
		if seen[e] {
			dups++
			if !dup {
				fn++
			}
		}
		seen[e] = true
	}
	if fn != 0 {
		t.Fatalf("%d false negatives among %d duplicates before any row was full", fn, dups)
	}
}

// TestQQHTDOneBucketIsQHT: with k = 1, QQHTD and QHT are the same filter
// (Sec. 5.2): same answers, same state. The filters share their k = 1 code,
// so the claim itself is checked on the reference models of Algorithms 1
// and 2, which share nothing, and the filters against them.
func TestQQHTDOneBucketIsQHT(t *testing.T) {
	for _, s := range []int{1, 3, 8} {
		const rows = 500
		a := qhtNew(t, qhtSpec("qht", rows, 1, s, 0), 42)
		b := qhtNew(t, qhtSpec("qqhtd", rows, 1, s, 0), 42)
		ra := newQHTRef(qhtBasic, rows, 1, s, 42)
		rb := newQHTRef(qhtQueue, rows, 1, s, 42)
		x := mix.NewWyrand(5)
		for i := range 20000 {
			h := testHash(uint64(x.IntN(2000)), 37)
			ga, gb, gra, grb := a.Observe(h), b.Observe(h), ra.observe(h), rb.observe(h)
			if gra != grb || ga != gra || gb != grb {
				t.Fatalf("s=%d observation %d: qht %v, qqhtd %v, Algorithm 1 %v, Algorithm 2 %v", s, i, ga, gb, gra, grb)
			}
		}
		for i := range ra.rows {
			if ra.rows[i][0] != rb.rows[i][0] {
				t.Fatalf("s=%d: Algorithms 1 and 2 differ at row %d", s, i)
			}
		}
		for i, w := range a.cells.words {
			if b.cells.words[i] != w {
				t.Fatalf("s=%d: states differ at word %d", s, i)
			}
		}
	}
}

// TestQQHTDFIFO: a row keeps the fingerprints of the last k elements that
// mapped to it, so an element seen again before k more elements entered its
// row is always a duplicate.
func TestQQHTDFIFO(t *testing.T) {
	for _, sh := range []struct{ k, s int }{{8, 8}, {3, 5}, {12, 7}} {
		const rows = 16
		q := qhtNew(t, qhtSpec("qqhtd", rows, sh.k, sh.s, 0), 3)
		universe := 4 * rows * sh.k
		inserts := make([]int, rows)  // arrivals per row so far
		last := make([]int, universe) // inserts[row] after e's last arrival
		for i := range last {
			last[i] = -1
		}
		x := mix.NewWyrand(8)
		checked := 0
		for i := range 50 * universe {
			e := x.IntN(universe)
			h := testHash(uint64(e), 41)
			r := mix.Reduce(h, rows)
			dup := q.Observe(h)
			if last[e] >= 0 && inserts[r]-last[e] < sh.k {
				checked++
				if !dup {
					t.Fatalf("k=%d observation %d: element re-seen after %d < k arrivals in its row reported unseen",
						sh.k, i, inserts[r]-last[e])
				}
			}
			inserts[r]++
			last[e] = inserts[r]
		}
		if checked < 1000 {
			t.Fatalf("k=%d: only %d re-observations within k arrivals: the test checks too little", sh.k, checked)
		}
	}
}

func TestQHTSpec(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"qht:mem=64KiB", "qht:mem=64KiB,buckets=1,fpbits=3"},
		{"qhtd:mem=65536bit,buckets=4,fpbits=8", "qhtd:mem=8KiB,buckets=4,fpbits=8"},
		{"qqhtd:fpbits=7,buckets=12,mem=1000bit", "qqhtd:mem=125B,buckets=12,fpbits=7"},
		{"QHT:mem=3bit,buckets=1,fpbits=3", "qht:mem=3bit,buckets=1,fpbits=3"},
		{"qht", "qht:mem=" + FormatMem(L2CacheBits()) + ",buckets=1,fpbits=3"},
	} {
		q := qhtNew(t, c.spec, 1)
		if got := q.String(); got != c.want {
			t.Errorf("New(%q).String() = %q, want %q", c.spec, got, c.want)
		}
		again := qhtNew(t, q.String(), 1)
		if again.String() != q.String() || again.SizeBits() != q.SizeBits() || again.Rows() != q.Rows() {
			t.Errorf("%q: rebuilt from its String is %q, %d bits", c.spec, again.String(), again.SizeBits())
		}
		// Identical: same answers on the same stream.
		for i := range uint64(5000) {
			h := testHash(i%1500, 43)
			if q.Observe(h) != again.Observe(h) {
				t.Fatalf("%q: rebuilt filter answers differently at %d", c.spec, i)
			}
		}
	}
	for _, c := range []struct {
		spec string
		err  error
	}{
		{"qht:buckets=0", ErrBadParam},
		{"qht:buckets=65,fpbits=8", ErrBadParam},
		{"qht:fpbits=0", ErrBadParam},
		{"qhtd:fpbits=33", ErrBadParam},
		{"qqhtd:buckets=x", ErrBadParam},
		{"qht:buckets=4,fpbits=2", ErrBadParam}, // k > S = 3
		{"qht:buckets=2,fpbits=1", ErrBadParam}, // k > S = 1
		{"qht:mem=1bit", ErrTooSmall},
		{"qqhtd:mem=20bit,buckets=7,fpbits=3", ErrTooSmall},
		{"qht:mem=lots", ErrBadParam},
		{"qht:k=2", ErrUnknownParam},
	} {
		_, err := New(c.spec, 1)
		if !errors.Is(err, c.err) {
			t.Errorf("New(%q) = %v, want %v", c.spec, err, c.err)
		}
	}
	if q := qhtNew(t, "qqhtd:mem=21bit,buckets=7,fpbits=3", 1); q.Rows() != 1 {
		t.Errorf("mem = k*s: %d rows, want 1", q.Rows())
	}
}

func TestQHTResetAndFillRatio(t *testing.T) {
	for _, name := range []string{"qht", "qhtd", "qqhtd"} {
		for _, sh := range []struct{ k, s int }{{4, 8}, {12, 7}} {
			spec := qhtSpec(name, 100, sh.k, sh.s, 0)
			q := qhtNew(t, spec, 77)
			if r := q.FillRatio(); r != 0 {
				t.Fatalf("%s: new filter fill ratio %v", spec, r)
			}
			// 6000 distinct elements: each row gets about 60 arrivals, and
			// fills unless fewer than k of them had distinct fingerprints.
			answers := make([]bool, 6000)
			for i := range answers {
				answers[i] = q.Observe(testHash(uint64(i), 47))
			}
			if r := q.FillRatio(); r != 1 {
				t.Fatalf("%s: fill ratio %v after saturation, want 1", spec, r)
			}
			q.Reset()
			if r := q.FillRatio(); r != 0 {
				t.Fatalf("%s: fill ratio %v after Reset", spec, r)
			}
			for i, want := range answers {
				if got := q.Observe(testHash(uint64(i), 47)); got != want {
					t.Fatalf("%s: after Reset observation %d = %v, new filter said %v", spec, i, got, want)
				}
			}
			q.Reset()
			q.Observe(testHash(1, 49))
			if got, want := q.FillRatio(), 1/float64(100*sh.k); got != want {
				t.Fatalf("%s: fill ratio %v after one element, want %v", spec, got, want)
			}
		}
	}
}

func TestQHTObserveAllocs(t *testing.T) {
	for _, spec := range []string{
		"qht:mem=64KiB", "qhtd:mem=64KiB,buckets=4,fpbits=8", "qqhtd:mem=64KiB,buckets=4,fpbits=8",
		"qht:mem=64KiB,buckets=12,fpbits=7", "qhtd:mem=64KiB,buckets=12,fpbits=7", "qqhtd:mem=64KiB,buckets=12,fpbits=7",
	} {
		q := qhtNew(t, spec, 1)
		i := uint64(0)
		if n := testing.AllocsPerRun(1000, func() { i++; q.Observe(testHash(i, 53)) }); n != 0 {
			t.Errorf("%s: %v allocs per Observe", spec, n)
		}
	}
}

// BenchmarkQHTObserve measures Observe on precomputed random hashes cycled
// from a 1<<16 slice, so that past the first cycle rows see duplicates and
// unseen elements mixed; the "distinct" cases remix the hash each cycle so
// every element is new. Observe does not branch on either outcome, so the
// two should cost the same.
func BenchmarkQHTObserve(b *testing.B) {
	const n = 1 << 16
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = testHash(uint64(i), 59)
	}
	for _, name := range []string{"qht", "qhtd", "qqhtd"} {
		for _, mem := range []string{"64KiB", "1MiB"} {
			for _, sh := range []struct{ k, s int }{{1, 3}, {4, 8}, {12, 7}} {
				spec := fmt.Sprintf("%s:mem=%s,buckets=%d,fpbits=%d", name, mem, sh.k, sh.s)
				b.Run(spec, func(b *testing.B) {
					q := qhtNew(b, spec, 1)
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						q.Observe(hashes[i&(n-1)])
						i++
					}
				})
				if sh.k == 12 {
					continue
				}
				b.Run(spec+"/distinct", func(b *testing.B) {
					q := qhtNew(b, spec, 1)
					b.ReportAllocs()
					i := uint64(0)
					for b.Loop() {
						// Cycle c of the slice xors c*odd into every hash:
						// a new element each time, at the cost of one multiply.
						q.Observe(hashes[i&(n-1)] ^ (i>>16)*0x9e3779b97f4a7c15)
						i++
					}
				})
			}
		}
	}
}

package filters

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"testing"

	"github.com/flowdedup/flowdedup/mix"
)

// sqfSpec names an SQF (tables = 0) or ISQF of exactly rows rows per table
// (plus extra bits, less than a row of every table, that must be dropped).
func sqfSpec(tables, rows, k, r, rprime, extra int) string {
	sigma := rprime + bits.Len(uint(r))
	if tables == 0 {
		return fmt.Sprintf("sqf:mem=%dbit,buckets=%d,r=%d,rprime=%d", rows*k*sigma+extra, k, r, rprime)
	}
	return fmt.Sprintf("isqf:mem=%dbit,buckets=%d,r=%d,rprime=%d,tables=%d", tables*rows*k*sigma+extra, k, r, rprime, tables)
}

// sqfProbs is the law of SQF signatures for uniform hashes, derived
// combinatorially rather than from the filter's code: the reduced remainder
// a (the remainder's r' high bits) is uniform, and the popcount is
// popcount(a) plus a Binomial(r - r', 1/2). Keys are signatures, reduced
// remainder then popcount in ceil(log2(r+1)) bits.
func sqfProbs(r, rprime int) map[uint64]float64 {
	d := r - rprime
	w := 0
	for 1<<w < r+1 {
		w++
	}
	p := map[uint64]float64{}
	for a := range uint64(1) << rprime {
		for j := 0; j <= d; j++ {
			binom := 1.0
			for i := range j {
				binom = binom * float64(d-i) / float64(i+1)
			}
			p[a<<w|uint64(bits.OnesCount64(a)+j)] = binom / float64(uint64(1)<<(rprime+d))
		}
	}
	return p
}

// sqfValues returns the probabilities of a signature law in a fixed order.
func sqfValues(p map[uint64]float64) []float64 {
	keys := make([]uint64, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	v := make([]float64, len(keys))
	for i, k := range keys {
		v[i] = p[k]
	}
	return v
}

// sqfESym is the elementary symmetric polynomial e_k of the values w.
func sqfESym(w []float64, k int) float64 {
	e := make([]float64, k+1)
	e[0] = 1
	for _, x := range w {
		for j := k; j >= 1; j-- {
			e[j] += e[j-1] * x
		}
	}
	return e[k]
}

// sqfHeld is P(x in A) for each signature x, where A is a k-set drawn with
// probability proportional to the product of the weights w of its members.
func sqfHeld(w []float64, k int) []float64 {
	ek := sqfESym(w, k)
	held := make([]float64, len(w))
	rest := make([]float64, 0, len(w))
	for i := range w {
		rest = append(append(rest[:0], w[:i]...), w[i+1:]...)
		held[i] = w[i] * sqfESym(rest, k-1) / ek
	}
	return held
}

// sqfExactFPR is the asymptotic FPR of an SQF on a uniform stream of
// distinct elements. Once a row is full it holds a set A of k distinct
// signatures; an arrival with signature x (probability p_x) is a false
// positive if x is in A and otherwise replaces a uniformly chosen member.
// The chain satisfies detailed balance with pi(A) proportional to the
// product of p_a over A (A -> A-a+x at rate p_x/k, back at rate p_a/k), so
// FPR = sum_x p_x P(x in A) = sum_x p_x^2 e_{k-1}(p without x) / e_k(p):
// k/S for uniform signatures (Theorem 4.1), sum p_x^2 for k = 1. Rows are
// independent on a distinct stream, each in its stationary law.
func sqfExactFPR(p []float64, k int) float64 {
	fpr := 0.0
	for i, h := range sqfHeld(p, k) {
		fpr += p[i] * h
	}
	return fpr
}

// sqfMeanFieldFPR extends sqfExactFPR to m ISQF tables. An element with
// signature x meets m rows, one per table, which hold x independently
// (their elements overlap by a fraction 1/N) with probability P_x each; it
// is stored, in all tables, only if none holds x. So each table's row is
// the chain above with the weight of x thinned to p_x (1 - P_x)^(m-1), and
// P_x is the fixed point of P = held(p (1-P)^(m-1)). FPR = sum_x p_x
// (1 - (1 - P_x)^m). Exact for m = 1 and, by symmetry, for uniform
// signatures (1 - (1 - k/S)^m), and as N grows otherwise.
func sqfMeanFieldFPR(p []float64, k, m int) float64 {
	P := make([]float64, len(p))
	for i := range P {
		P[i] = float64(k) / float64(len(p))
	}
	w := make([]float64, len(p))
	for range 500 {
		for i := range p {
			w[i] = p[i] * math.Pow(1-P[i], float64(m-1))
		}
		for i, h := range sqfHeld(w, k) {
			P[i] = (P[i] + h) / 2 // damped: the plain iteration can oscillate
		}
	}
	fpr := 0.0
	for i := range p {
		fpr += p[i] * (1 - math.Pow(1-P[i], float64(m)))
	}
	return fpr
}

// TestSQFSignature checks the signature against both papers' worked
// examples and its law against the combinatorial one: it is not uniform.
func TestSQFSignature(t *testing.T) {
	// QHT paper Sec. 4.1.1, footnote 14: r=3, r'=1. Only remainder 000
	// gives signature 000, both 001 and 010 give 001 (the reduced remainder
	// is the high bit, as in their example; popcount in 2 bits).
	g := newSQFSig(3, 1)
	for rem, want := range map[uint64]uint64{0b000: 0b000, 0b001: 0b001, 0b010: 0b001, 0b100: 0b101, 0b111: 0b111} {
		if got := g.signature(0xabc0<<3 | rem); got != want {
			t.Errorf("r=3 r'=1 remainder %03b: signature %03b, want %03b", rem, got, want)
		}
	}
	// ISQF paper Sec. 4.1: fingerprint 10011011, r=4, r'=2: reduced
	// remainder 10, popcount 3. The paper writes 1011, a 2-bit popcount,
	// which cannot hold popcount 4 = 100; with ceil(log2 5) = 3 bits it
	// is 10 011.
	if got := newSQFSig(4, 2).signature(0b1001_1011); got != 0b10_011 {
		t.Errorf("ISQF example: signature %b, want 10011", got)
	}
	if got := sqfSigBits(4, 2); got != 5 {
		t.Errorf("sigma(r=4, r'=2) = %d, want 2 + 3", got)
	}

	// Exhaustively, for every small r and r': the signatures of all 2^r
	// remainders follow sqfProbs, fit in sigma bits, and number S =
	// 2^r' (r-r'+1) (QHT paper Sec. 4.4.1).
	for r := 2; r <= 12; r++ {
		for rp := 1; rp < r; rp++ {
			g := newSQFSig(r, rp)
			want := sqfProbs(r, rp)
			counts := map[uint64]int{}
			for rem := range uint64(1) << r {
				s := g.signature(rem | 0x5555<<r) // quotient bits must not matter
				if s>>sqfSigBits(r, rp) != 0 {
					t.Fatalf("r=%d r'=%d: signature %#x wider than %d bits", r, rp, s, sqfSigBits(r, rp))
				}
				counts[s]++
			}
			if len(counts) != SQFSignatures(r, rp) || len(want) != len(counts) {
				t.Fatalf("r=%d r'=%d: %d signatures occur, law has %d, S = %d", r, rp, len(counts), len(want), SQFSignatures(r, rp))
			}
			for s, n := range counts {
				if got := float64(n) / float64(uint64(1)<<r); math.Abs(got-want[s]) > 1e-12 {
					t.Fatalf("r=%d r'=%d: signature %#x has probability %v, law says %v", r, rp, s, got, want[s])
				}
			}
		}
	}

	// And on hashes as the filter sees them, r=3, r'=1: signature 001 is
	// twice as likely as 000 (2/8 against 1/8). 2^16 draws: each frequency
	// is within 5 binomial standard errors (at most 0.0085).
	const n = 1 << 16
	counts := map[uint64]float64{}
	for i := range uint64(n) {
		counts[g.signature(testHash(i, 1))]++
	}
	for s, want := range map[uint64]float64{0b000: 1. / 8, 0b001: 2. / 8, 0b010: 1. / 8, 0b101: 1. / 8, 0b110: 2. / 8, 0b111: 1. / 8} {
		got := counts[s] / n
		if tol := 5 * math.Sqrt(want*(1-want)/n); math.Abs(got-want) > tol {
			t.Errorf("r=3 r'=1: signature %03b frequency %.4f, want %.4f ± %.4f", s, got, want, tol)
		}
	}
	if counts[0b011] != 0 || counts[0b100] != 0 {
		t.Errorf("impossible signatures 011 (popcount 3 > 2 left to count) or 100 (reduced 1, popcount 0) occurred")
	}
}

// TestSQFEmptyNeverMatches: signature 0 (remainder 0) is a real signature,
// and the empty mark must match no element. Stored codes are never 0 and
// tell signatures apart, and elements whose signature is 0 are stored and
// recognised like any other.
func TestSQFEmptyNeverMatches(t *testing.T) {
	for r := 2; r <= 12; r++ {
		for rp := 1; rp < r; rp++ {
			g := newSQFSig(r, rp)
			codes := map[uint64]uint64{}
			for rem := range uint64(1) << r {
				c, s := g.code(rem), g.signature(rem)
				if c == 0 {
					t.Fatalf("r=%d r'=%d: remainder %b has code 0, the empty mark", r, rp, rem)
				}
				if c>>sqfSigBits(r, rp) != 0 {
					t.Fatalf("r=%d r'=%d: code %#x wider than sigma", r, rp, c)
				}
				if prev, ok := codes[c]; ok && prev != s {
					t.Fatalf("r=%d r'=%d: signatures %#x and %#x share code %#x", r, rp, prev, s, c)
				}
				codes[c] = s
			}
		}
	}
	// Every element here has remainder 0, hence signature 0, and rows of
	// its own in every table (checked): in an empty filter none may match
	// an empty bucket, and each must match its own signature once stored.
	// Narrow and wide rows, one table and three.
	for _, spec := range []string{
		sqfSpec(0, 4096, 1, 2, 1, 0), sqfSpec(0, 4096, 4, 8, 3, 0), sqfSpec(0, 4096, 16, 8, 3, 0),
		sqfSpec(3, 4096, 2, 4, 2, 0), sqfSpec(3, 4096, 16, 8, 3, 0),
	} {
		f, err := New(spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		rowsOf := func(h uint64) []int {
			if s, ok := f.(*SQF); ok {
				return []int{mix.Reduce(h&^s.sig.remMask, s.rows)}
			}
			g := f.(*ISQF)
			var rs []int
			for j := range g.Tables() {
				rs = append(rs, g.row(h, j))
			}
			return rs
		}
		var hs []uint64
		used := map[int]bool{}
	next:
		for i := uint64(0); len(hs) < 200; i++ {
			h := testHash(i, 2) &^ (1<<12 - 1) // remainder 0 for every r <= 12
			for _, row := range rowsOf(h) {
				if used[row] {
					continue next
				}
			}
			for _, row := range rowsOf(h) {
				used[row] = true
			}
			hs = append(hs, h)
		}
		for _, h := range hs {
			if f.Observe(h) {
				t.Fatalf("%s: zero-signature element %#x matched an empty row", spec, h)
			}
		}
		for _, h := range hs {
			if !f.Observe(h) {
				t.Fatalf("%s: zero-signature element %#x not found once stored", spec, h)
			}
		}
	}
}

// sqfRef is a reference model of SQF (QHT paper Sec. 2.4, Stream) and of
// ISQF (Algorithm 1), written from the papers: rows as slices, -1 for an
// empty bucket, loops over buckets, its own signature arithmetic. It draws
// random buckets from its own copy of the filter's random source as the
// filter does: sqf draws one bucket on every call when k > 1 (used only if
// the row is full); isqf draws one for each full row it stores into, in
// table order.
type sqfRef struct {
	tables    [][][]int64 // [table][row][bucket]
	r, rprime int
	everyCall bool
	rng       mix.Wyrand
}

func newSQFRef(tables, rows, k, r, rprime int, everyCall bool, seed uint64) *sqfRef {
	m := &sqfRef{tables: make([][][]int64, tables), r: r, rprime: rprime, everyCall: everyCall, rng: mix.NewWyrand(seed)}
	for i := range m.tables {
		m.tables[i] = make([][]int64, rows)
		for j := range m.tables[i] {
			m.tables[i][j] = slices.Repeat([]int64{-1}, k)
		}
	}
	return m
}

func (m *sqfRef) signature(h uint64) int64 {
	rem := h % (1 << m.r)
	ones := 0
	for b := range m.r {
		ones += int(rem >> b & 1)
	}
	width := 0 // bits for a popcount up to r
	for 1<<width <= m.r {
		width++
	}
	return int64(rem>>(m.r-m.rprime))<<width | int64(ones)
}

func (m *sqfRef) draw(k int) int { return int((m.rng.Uint64() >> 32) * uint64(k) >> 32) }

func (m *sqfRef) observe(h uint64) bool {
	sig := m.signature(h)
	k := len(m.tables[0][0])
	random := 0
	if m.everyCall && k > 1 {
		random = m.draw(k)
	}
	quotient := h >> m.r << m.r
	var rows [][]int64
	for i, table := range m.tables {
		n := mix.Reduce(quotient, len(table))
		if i > 0 {
			n = mix.Reduce(mix.Mix64(quotient+uint64(i)*mix.Golden), len(table))
		}
		rows = append(rows, table[n])
	}
	for _, row := range rows {
		if slices.Contains(row, sig) {
			return true
		}
	}
	for _, row := range rows {
		j := slices.Index(row, -1)
		if j < 0 {
			j = random
			if !m.everyCall && k > 1 {
				j = m.draw(k)
			}
		}
		row[j] = sig
	}
	return false
}

// sqfRowSigs decodes the signatures held in rows [from, from+n) of a table,
// each row sorted: positions within a row differ from the reference's while
// it is not full (see qhtTable).
func sqfRowSigs(t *qhtTable, from, n int) [][]int64 {
	out := make([][]int64, n)
	for i := range out {
		for j := range int(t.k) {
			if c := t.cells.get((from+i)*int(t.k) + j); c != 0 {
				out[i] = append(out[i], int64(c^t.sig.empty))
			}
		}
		slices.Sort(out[i])
	}
	return out
}

func sqfRefRowSigs(rows [][]int64) [][]int64 {
	out := make([][]int64, len(rows))
	for i, row := range rows {
		for _, s := range row {
			if s >= 0 {
				out[i] = append(out[i], s)
			}
		}
		slices.Sort(out[i])
	}
	return out
}

// TestSQFMatchesReferenceModel runs sqf and isqf against the reference
// model: same answers on streams that fill rows, evict and repeat, and the
// same signatures in every row at the end. Shapes cover one-word rows that
// straddle words, wide rows (k*sigma > 64) and 1 to 4 tables.
func TestSQFMatchesReferenceModel(t *testing.T) {
	shapes := []struct{ k, r, rp int }{
		{1, 2, 1}, {3, 2, 1}, {4, 2, 1}, {1, 8, 3}, {4, 8, 3}, {9, 8, 3}, {16, 8, 3}, {20, 6, 3}, {5, 12, 11},
	}
	for _, tables := range []int{0, 1, 2, 4} {
		for _, sh := range shapes {
			const rows = 61 // odd, so rows start at many bit offsets
			spec := sqfSpec(tables, rows, sh.k, sh.r, sh.rp, max(tables, 1)*sh.k*sqfSigBits(sh.r, sh.rp)-1)
			t.Run(spec, func(t *testing.T) {
				f, err := New(spec, 7)
				if err != nil {
					t.Fatal(err)
				}
				var tab *qhtTable
				switch f := f.(type) {
				case *SQF:
					tab = &f.qhtTable
				case *ISQF:
					tab = &f.t
				}
				if tab.rows != max(tables, 1)*rows || f.SizeBits() != max(tables, 1)*rows*sh.k*sqfSigBits(sh.r, sh.rp) {
					t.Fatalf("%d rows, %d bits", tab.rows, f.SizeBits())
				}
				ref := newSQFRef(max(tables, 1), rows, sh.k, sh.r, sh.rp, tables == 0, 7)
				universe := uint64(3 * rows * sh.k)
				x := mix.NewWyrand(99)
				for i := range 20 * rows * sh.k {
					h := testHash(x.Uint64()%universe, 1)
					if got, want := f.Observe(h), ref.observe(h); got != want {
						t.Fatalf("observation %d (h=%#x): got %v, reference %v", i, h, got, want)
					}
				}
				for i, table := range ref.tables {
					got, want := sqfRowSigs(tab, i*rows, rows), sqfRefRowSigs(table)
					for j := range got {
						if !slices.Equal(got[j], want[j]) {
							t.Fatalf("table %d row %d holds %v, reference %v", i, j, got[j], want[j])
						}
					}
				}
			})
		}
	}
}

// sqfDistinctFPR feeds warm distinct elements, then returns the fraction of
// the next n distinct elements reported duplicate: all false positives.
func sqfDistinctFPR(f Filter, warm, n int, salt uint64) float64 {
	fp := 0
	for i := range uint64(warm + n) {
		if f.Observe(testHash(i, salt)) && i >= uint64(warm) {
			fp++
		}
	}
	return float64(fp) / float64(n)
}

// TestSQFSaturatedFPR checks the asymptotic FPR of SQF on uniform streams
// of distinct elements against the exact value from the signature law
// (sqfExactFPR), and shows where the papers' approximation
// k/(2^r' sqrt(pi r)) stands.
func TestSQFSaturatedFPR(t *testing.T) {
	for _, c := range []struct{ k, r, rp int }{
		{1, 2, 1}, // the default: 4 equiprobable signatures, FPR 1/4
		{3, 2, 1}, // the QHT paper's fix of the authors' k=4: 3/4
		{1, 3, 1}, {1, 8, 3}, {4, 8, 3}, {3, 6, 2},
		{8, 10, 2}, // non-uniform law matters: exact 0.370, k*sum p^2 0.393, k/S 0.222
		{16, 8, 3}, // wide rows
	} {
		const rows = 2048
		spec := sqfSpec(0, rows, c.k, c.r, c.rp, 0)
		t.Run(spec, func(t *testing.T) {
			p := sqfValues(sqfProbs(c.r, c.rp))
			want := sqfExactFPR(p, c.k)
			collision := 0.0
			for _, x := range p {
				collision += x * x
			}
			paper := float64(c.k) / (math.Exp2(float64(c.rp)) * math.Sqrt(math.Pi*float64(c.r)))
			// Warm-up: 30 elements per bucket fill every row and mix its
			// chain (a member is replaced after about k/(1-FPR) arrivals).
			const n = 1 << 18
			got := sqfDistinctFPR(mustNew[*SQF](t, spec, 5), 30*rows*c.k, n, 11)
			// Outcomes are Bernoulli(p(A)) for the state A of the row hit;
			// rows are independent, and within a row consecutive outcomes
			// covary through A by at most Var(p(A)), small against
			// FPR(1-FPR) here: over 20 salts the spread of every case was
			// at most 1.35 binomial standard errors. Allow 5.
			tol := 5 * math.Sqrt(want*(1-want)/n)
			t.Logf("FPR %.5f, exact %.5f (tolerance %.5f); k*sum p^2 %.5f, k/S %.5f, paper k/(2^r' sqrt(pi r)) %.5f",
				got, want, tol, float64(c.k)*collision, float64(c.k)/float64(len(p)), paper)
			if math.Abs(got-want) > tol {
				t.Errorf("FPR %.5f, want %.5f ± %.5f", got, want, tol)
			}
			if c.k == 1 {
				// k = 1: the collision probability, 2^-r' C(2d,d)/4^d with
				// d = r - r' (equal popcounts of the d bits the reduced
				// remainder does not see).
				d := c.r - c.rp
				binom := 1.0
				for i := range d {
					binom = binom * float64(2*d-i) / float64(i+1)
				}
				if closed := binom / math.Exp2(float64(c.rp+2*d)); math.Abs(closed-want) > 1e-12 {
					t.Errorf("k=1: exact FPR %v, closed form %v", want, closed)
				}
			}
		})
	}
	// The papers' approximation uses sqrt(pi r) where the popcount's
	// dependence on the reduced remainder makes it sqrt(pi (r - r')): at
	// r=8, r'=3 it says 0.0249, the exact value is 0.0308, and a filter
	// measures the latter, 17 standard errors away.
	p := sqfValues(sqfProbs(8, 3))
	exact, paper := sqfExactFPR(p, 1), 1/(8*math.Sqrt(8*math.Pi))
	if exact/paper < 1.2 || exact/paper > 1.25 {
		t.Errorf("r=8 r'=3: exact %.5f vs paper %.5f: ratio %.3f, expected the paper 19%% low", exact, paper, exact/paper)
	}
}

// TestSQFDegenerateAuthorsSetting: the SQF authors' r=2, r'=1, k=4 (also
// the ISQF paper's) allows 4 signatures, and 4 buckets hold them all: once
// full the filter answers DUPLICATE to every element, FPR = 1, FNR = 0
// (QHT paper Sec. 3, footnote 8).
func TestSQFDegenerateAuthorsSetting(t *testing.T) {
	// 30 elements per bucket: a row misses one of 4 equiprobable
	// signatures among its ~120 arrivals with probability 4(3/4)^120,
	// about 1e-14.
	f := mustNew[*SQF](t, sqfSpec(0, 1024, 4, 2, 1, 0), 3)
	if got := sqfDistinctFPR(f, 30*1024*4, 1<<15, 13); got != 1 {
		t.Errorf("sqf: FPR %v once full, want exactly 1", got)
	}
	// ISQF only nearly: a row stops filling once every element that maps
	// to it is caught by another table, so a few rows never get all 4
	// signatures (measured FPR 0.9985).
	g := mustNew[*ISQF](t, sqfSpec(3, 1024, 4, 2, 1, 0), 3)
	if got := sqfDistinctFPR(g, 30*1024*4, 1<<15, 13); got < 0.99 {
		t.Errorf("isqf: FPR %v once full, want above 0.99", got)
	}
}

// sqfRates runs a uniform stream over a universe of U elements for steps
// arrivals and returns the FNR over the duplicates of its last two thirds.
func sqfRates(f Filter, U, steps int, salt uint64) float64 {
	seen := make([]bool, U)
	x := mix.NewWyrand(salt)
	var fn, dups float64
	for i := range steps {
		e := x.IntN(U)
		dup := f.Observe(testHash(uint64(e), salt))
		if seen[e] && i >= steps/3 {
			dups++
			if !dup {
				fn++
			}
		}
		seen[e] = true
	}
	return fn / dups
}

// sqfSmallUniverseFNR is the exact stationary FNR of a k=1 SQF on a
// uniform stream over elements 0..U-1, given where their hashes fall: a
// row holds the signature of its last arrival (a detected arrival changes
// nothing), so an arrival of e is detected iff the previous arrival in its
// row had e's signature: probability (elements of the row with e's
// signature) / (elements of the row).
func sqfSmallUniverseFNR(f *SQF, U int, salt uint64) float64 {
	type cell struct {
		row  int
		code uint64
	}
	perRow, perSig := map[int]int{}, map[cell]int{}
	key := func(e int) cell {
		h := testHash(uint64(e), salt)
		return cell{mix.Reduce(h&^f.sig.remMask, f.rows), f.sig.code(h)}
	}
	for e := range U {
		c := key(e)
		perRow[c.row]++
		perSig[c]++
	}
	caught := 0.0
	for e := range U {
		c := key(e)
		caught += float64(perSig[c]) / float64(perRow[c.row])
	}
	return 1 - caught/float64(U)
}

// TestSQFSmallUniverseFNR checks the FNR of a k=1 SQF on uniform streams
// over universes of a quarter and twice its capacity against
// sqfSmallUniverseFNR.
func TestSQFSmallUniverseFNR(t *testing.T) {
	const buckets = 1 << 13
	for _, c := range []struct {
		r, rp int
		ratio float64
	}{{8, 4, 0.25}, {8, 4, 2}, {2, 1, 0.25}, {2, 1, 2}} {
		spec := sqfSpec(0, buckets, 1, c.r, c.rp, 0)
		U := int(c.ratio * buckets)
		f := mustNew[*SQF](t, spec, 1)
		want := sqfSmallUniverseFNR(f, U, 7)
		steps := 30*U + 10*buckets
		got := sqfRates(f, U, steps, 7)
		// Given where hashes fall, an outcome depends on the previous
		// arrival in its row and on no other: outcomes of different rows
		// are independent, and in a row only neighbours covary, by at
		// most the variance. So the variance is at most 3 times the
		// binomial one: 5 sqrt(3) standard errors.
		dups := float64(steps) * 2 / 3
		tol := 5 * math.Sqrt(3*want*(1-want)/dups)
		t.Logf("%s U=%d: FNR %.4f, exact %.4f (tolerance %.4f)", spec, U, got, want, tol)
		if math.Abs(got-want) > tol {
			t.Errorf("%s U=%d: FNR %.4f, want %.4f ± %.4f", spec, U, got, want, tol)
		}
	}
}

func TestSQFSpec(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"sqf:mem=64KiB", "sqf:mem=64KiB,buckets=1,r=2,rprime=1"},
		{"SQF:rprime=3,r=8,buckets=4,mem=65536bit", "sqf:mem=8KiB,buckets=4,r=8,rprime=3"},
		{"sqf:mem=3bit", "sqf:mem=3bit,buckets=1,r=2,rprime=1"},
		{"isqf:mem=64KiB", "isqf:mem=64KiB,buckets=1,r=2,rprime=1,tables=3"},
		{"isqf:mem=1000bit,tables=16,r=4,rprime=2", "isqf:mem=125B,buckets=1,r=4,rprime=2,tables=16"},
		{"sqf", "sqf:mem=" + FormatMem(L2CacheBits()) + ",buckets=1,r=2,rprime=1"},
	} {
		f, err := New(c.spec, 1)
		if err != nil {
			t.Fatalf("New(%q): %v", c.spec, err)
		}
		if got := f.String(); got != c.want {
			t.Errorf("New(%q).String() = %q, want %q", c.spec, got, c.want)
		}
		again, err := New(f.String(), 1)
		if err != nil || again.String() != f.String() || again.SizeBits() != f.SizeBits() {
			t.Errorf("%q: rebuilt from its String: %v, %v", c.spec, again, err)
			continue
		}
		for i := range uint64(5000) {
			h := testHash(i%1500, 43)
			if f.Observe(h) != again.Observe(h) {
				t.Fatalf("%q: rebuilt filter answers differently at %d", c.spec, i)
			}
		}
	}
	// Rows = floor(mem/(k*sigma)) per table, SizeBits exact.
	for _, c := range []struct {
		spec             string
		rows, sigma, bit int
	}{
		{"sqf:mem=64KiB", 524288 / 3, 3, 524288 / 3 * 3},
		{"sqf:mem=1000bit,buckets=4,r=8,rprime=3", 1000 / 28, 7, 1000 / 28 * 28},
		{"sqf:mem=3bit", 1, 3, 3},
		{"isqf:mem=64KiB", 524288 / 9, 3, 524288 / 9 * 9},
		{"isqf:mem=1000bit,buckets=2,r=4,rprime=2,tables=4", 1000 / 40, 5, 1000 / 40 * 40},
	} {
		f, err := New(c.spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		var rows, sigma int
		switch f := f.(type) {
		case *SQF:
			rows, sigma = f.Rows(), f.SignatureBits()
		case *ISQF:
			rows, sigma = f.Rows(), f.SignatureBits()
		}
		if rows != c.rows || sigma != c.sigma || f.SizeBits() != c.bit {
			t.Errorf("%s: %d rows, sigma %d, %d bits; want %d, %d, %d", c.spec, rows, sigma, f.SizeBits(), c.rows, c.sigma, c.bit)
		}
	}
	for _, c := range []struct {
		spec string
		err  error
	}{
		{"sqf:r=2,rprime=3", ErrBadParam},  // r' > r
		{"sqf:r=4,rprime=4", ErrBadParam},  // r' = r: the papers ask r' < r
		{"sqf:r=1", ErrBadParam},           // no r' < r possible
		{"sqf:r=33,rprime=3", ErrBadParam}, // beyond the 32-bit remainder limit
		{"sqf:rprime=0", ErrBadParam},
		{"sqf:buckets=0", ErrBadParam},
		{"sqf:buckets=65,r=12,rprime=8", ErrBadParam},
		{"sqf:buckets=5", ErrBadParam}, // k > S = 4 for r=2, r'=1
		{"isqf:buckets=7,r=3,rprime=1", ErrBadParam},
		{"sqf:r=x", ErrBadParam},
		{"isqf:tables=0", ErrBadParam},
		{"isqf:tables=17", ErrBadParam},
		{"isqf:tables=two", ErrBadParam},
		{"isqf:r=8,rprime=9", ErrBadParam},
		{"sqf:mem=2bit", ErrTooSmall},
		{"sqf:mem=27bit,buckets=4,r=8,rprime=3", ErrTooSmall},
		{"isqf:mem=8bit", ErrTooSmall},                         // 3 tables of one 3-bit bucket need 9
		{"isqf:mem=50bit,buckets=4,r=8,tables=4", ErrTooSmall}, // one table's 20-bit row fits, not four
		{"sqf:mem=lots", ErrBadParam},
		{"sqf:tables=2", ErrUnknownParam},
		{"isqf:fpbits=3", ErrUnknownParam},
	} {
		_, err := New(c.spec, 1)
		if !errors.Is(err, c.err) {
			t.Errorf("New(%q) = %v, want %v", c.spec, err, c.err)
		}
	}
	if _, err := New("sqf:mem=12bit,buckets=4,r=2,rprime=1", 1); err != nil {
		t.Errorf("the SQF authors' k=4 setting (k = S) must stay buildable: %v", err)
	}
}

func TestSQFResetAndFillRatio(t *testing.T) {
	for _, spec := range []string{sqfSpec(0, 100, 4, 8, 3, 0), sqfSpec(0, 100, 16, 8, 3, 0), sqfSpec(3, 100, 4, 8, 3, 0)} {
		f, err := New(spec, 77)
		if err != nil {
			t.Fatal(err)
		}
		fill := func() float64 {
			if s, ok := f.(*SQF); ok {
				return s.FillRatio()
			}
			return f.(*ISQF).FillRatio()
		}
		if r := fill(); r != 0 {
			t.Fatalf("%s: new filter fill ratio %v", spec, r)
		}
		answers := make([]bool, 20000)
		for i := range answers {
			answers[i] = f.Observe(testHash(uint64(i), 47))
		}
		if r := fill(); r != 1 {
			t.Fatalf("%s: fill ratio %v after saturation, want 1", spec, r)
		}
		f.Reset()
		if r := fill(); r != 0 {
			t.Fatalf("%s: fill ratio %v after Reset", spec, r)
		}
		for i, want := range answers {
			if got := f.Observe(testHash(uint64(i), 47)); got != want {
				t.Fatalf("%s: after Reset observation %d = %v, new filter said %v", spec, i, got, want)
			}
		}
	}
}

func TestSQFObserveAllocs(t *testing.T) {
	for _, spec := range []string{
		"sqf:mem=64KiB", "sqf:mem=64KiB,buckets=4,r=8,rprime=3", "sqf:mem=64KiB,buckets=16,r=8,rprime=3",
		"isqf:mem=64KiB", "isqf:mem=64KiB,buckets=16,r=8,rprime=3,tables=16",
	} {
		f, err := New(spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		i := uint64(0)
		if n := testing.AllocsPerRun(1000, func() { i++; f.Observe(testHash(i%20000, 53)) }); n != 0 {
			t.Errorf("%s: %v allocs per Observe", spec, n)
		}
	}
}

// BenchmarkSQFObserve measures Observe on precomputed hashes cycled from a
// 1<<16 slice (past the first cycle rows see duplicates and unseen elements
// mixed; at 1 MiB nearly all are found, ISQF mostly in its first table),
// for the defaults and a larger signature with 4 buckets. The "distinct"
// cases remix the hash each cycle so every element is new: SQF costs the
// same, ISQF visits all m rows twice.
func BenchmarkSQFObserve(b *testing.B) {
	const n = 1 << 16
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = testHash(uint64(i), 59)
	}
	for _, mem := range []string{"64KiB", "1MiB"} {
		for _, spec := range []string{
			"sqf:mem=" + mem, "sqf:mem=" + mem + ",buckets=4,r=8,rprime=3",
			"isqf:mem=" + mem, "isqf:mem=" + mem + ",buckets=4,r=8,rprime=3",
		} {
			b.Run(spec, func(b *testing.B) {
				f, err := New(spec, 1)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					f.Observe(hashes[i&(n-1)])
					i++
				}
			})
			b.Run(spec+"/distinct", func(b *testing.B) {
				f, err := New(spec, 1)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				i := uint64(0)
				for b.Loop() {
					f.Observe(hashes[i&(n-1)] ^ (i>>16)*0x9e3779b97f4a7c15)
					i++
				}
			})
		}
	}
}

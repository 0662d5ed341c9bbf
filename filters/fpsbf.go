package filters

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"

	"github.com/flowdedup/flowdedup/mix"
)

// FPSBF is the FingerPrint Stable Bloom Filter of Singh & Batra: m cells of
// d = c+f bits, each a c-bit counter (0..Max, Max = 2^c-1) and an f-bit
// fingerprint cell (FPC). The cells form k sub-tables of m/k cells (the
// paper's "d-left" split); an element has one cell in each. For every
// element it
//
//  1. detects (Algorithm 2): the element is a duplicate iff each of its k
//     counters is non-zero AND each of its k FPCs equals its fingerprint;
//  2. if it is a duplicate, stops: no eviction, no insertion (Algorithm 1,
//     Sec. 4.1 step 3);
//  3. otherwise, with probability xi, runs an eviction round: L uniformly
//     random cells each lose their own random z in [1, Max] (Sec. 4.2 step
//     3), clamped at 0;
//  4. inserts it: sets its k counters to Max and XORs its fingerprint into
//     its k FPCs.
//
// Where the paper is ambiguous or inconsistent, this is what FPSBF does and
// why (see also the reading notes of docs/papers.md):
//
//   - Eviction timing. Algorithm 1 deletes only on the "distinct" branch,
//     when Random(xi) passes a threshold, and Eq. 6 multiplies by xi as a
//     probability: an insertion runs an eviction round with probability xi.
//   - Eviction size. Algorithm 3 says an eviction selects "k cells", but
//     Theorem 1 (p_d = p/m) and Sec. 5 make it L cells, "the number of cells
//     selected for the decrement operation", set from the FP target by
//     Eq. 21. With k cells and xi <= 1 the zero fraction cannot pass 1/2 (at
//     Max=7 not even 25%), so no FP target could be met: FPSBF decrements L.
//   - Choosing L. Eq. 21 is the SBF paper's Eq. 17 (SBFPForFPS), derived for
//     decrements of exactly 1. FP-SBF decrements by z in [1, Max], so a cell
//     set to Max empties after T <= Max decrements with
//     Pr(T > j) = C(Max-1, j) / Max^j, and the stable zero fraction becomes
//     1 - (1-a)(1+a/Max)^(Max-1), a = x/(1+x), x = xi*L*(1/k - 1/m). At
//     Max=1 that is SBF's Eq. 7; for larger Max it has more zeros than
//     Eq. 12, so Eq. 21's L over-evicts: at the defaults it asks L=33 where 9
//     meet fps=0.1, for a counter FP of 0.005. (False positives are not
//     inserted, which sets empty cells a little more often than full ones;
//     FPSBFStableZeros corrects for it, by a relative O(FPR).) L is the
//     smallest integer whose counter-level FP (the paper's F_FP-SBF, Eq. 13)
//     is at most fps. fps is therefore a bound before the fingerprint check,
//     as in the paper's Sec. 5.
//   - FP rate. A non-zero cell's FPC is the XOR of the uniform fingerprints
//     stored since it was last empty, so a fresh element matches it with
//     probability 2^-f: the stable FP rate on distinct elements is
//     ((1-Z) 2^-f)^k (FPSBFStableFPR), the "fixed factor" of Sec. 4.5's
//     text. Eq. 14-15's subtracted term is not used: it has no derivation
//     (it raises 1-1/f, f a bit count, to the number of insertions).
//   - A counter that reaches 0 clears its FPC. The paper says deletion leaves
//     FPCs unaffected; read literally, every FPC would be the XOR of every
//     fingerprint ever stored in it, and once cells have seen a few elements
//     a just-inserted element would match with probability 2^-fk: no
//     duplicate would ever be found. A zero counter means an empty cell
//     (detection step 1 treats it as absent), so the fingerprint leaves with
//     it. A decrement that leaves the counter non-zero keeps the FPC.
//   - Duplicates are not re-inserted (the Filter contract's "records h" holds
//     because h already matches). Re-inserting would XOR the fingerprint out
//     again, making the next occurrence a false negative.
//   - Hashing. The fingerprint is the low f bits of h; the indices come from
//     the other 64-f bits only, by double hashing (Eq. 2): the j-th index is
//     j*(m/k) + mix.Reduce(h1 + j*h2, m/k) with h1 = h without its fingerprint
//     bits and h2 = bloomStep(h1). Multiply-shift replaces "mod m" and makes
//     the paper's prime m/k unnecessary.
//
// XOR accumulation is the paper's design and it costs false negatives: a
// cell shared by two live elements matches neither, so once stable a
// duplicate right after its first occurrence is found only with probability
// about (Z + (1-Z) 2^-f)^k (Z the zero fraction): at the defaults, 17%.
type FPSBF struct {
	cells   packed // cell i: counter in bits [0, c), fingerprint in [c, c+f)
	m       int    // cells, a multiple of k
	sub     int    // m/k, cells per sub-table
	k       int
	c       uint
	f       uint
	cmask   uint64 // Max = 2^c-1: the counter field, and the value a set writes
	fpMask  uint64 // 2^f-1: the hash bits that are the fingerprint
	l       int    // cells decremented per eviction round
	xi      float64
	fps     float64
	memBits int // as requested, for String
	seed    uint64
	rng     mix.Wyrand
}

var _ Filter = (*FPSBF)(nil)

const (
	fpsbfDefaultC   = 3   // Max = 7: Eq. 24 wants Max > 3, Eq. 25 Max > 4
	fpsbfDefaultF   = 5   // Eq. 24 wants f > 3, Eq. 25 f > 4; d = 8, byte cells
	fpsbfDefaultK   = 3   // Eq. 25 (fewest FNs): 2 < k < 5; fewer FNs at 3 than 4
	fpsbfDefaultFPS = 0.1 // the paper gives none; SBF's, so both compare at one bound
	fpsbfDefaultXi  = 1.0 // the paper gives none; 1 evicts on every insertion, as SBF
	fpsbfMaxC       = 8
	fpsbfMaxF       = 32 // keeps at least 32 hash bits for the indices
)

var fpsbfFamily = &Family{
	Name:  "fpsbf",
	Paper: "Singh & Batra (FingerPrint Stable Bloom Filter, FP-SBF)",
	About: "k sub-tables of c-bit counters with f-bit XOR fingerprints; distinct elements set k counters to Max and XOR their fingerprint in; with rate xi, L random cells lose a random z in [1,Max]",
	Params: []Param{memParam,
		{Name: "c", Default: strconv.Itoa(fpsbfDefaultC), Help: "counter bits, 1..8 (Max = 2^c-1; Eq. 24-25 want Max > 4)"},
		{Name: "f", Default: strconv.Itoa(fpsbfDefaultF), Help: "fingerprint bits, 1..32 (Eq. 24-25 want f > 4); FP rate falls by 2^-f per cell"},
		{Name: "k", Default: strconv.Itoa(fpsbfDefaultK), Help: "hash functions = sub-tables (Eq. 25: 2 < k < 5 for fewest false negatives)"},
		{Name: "fps", Default: "0.1", Help: "bound on the counters' stable FP rate (Eq. 13), before fingerprints; sets L, the cells per eviction (Eq. 21, for random decrements)"},
		{Name: "xi", Default: "1", Help: "eviction rate in (0, 1]: probability that an insertion runs an eviction round (L grows as 1/xi)"},
	},
	build: buildFPSBF,
}

func buildFPSBF(p *params, seed uint64) (Filter, error) {
	memBits, err := p.mem()
	if err != nil {
		return nil, err
	}
	c, err := p.int("c", fpsbfDefaultC, 1, fpsbfMaxC)
	if err != nil {
		return nil, err
	}
	f, err := p.int("f", fpsbfDefaultF, 1, fpsbfMaxF)
	if err != nil {
		return nil, err
	}
	k, err := p.int("k", fpsbfDefaultK, 1, sbfMaxK)
	if err != nil {
		return nil, err
	}
	fps, err := p.float("fps", fpsbfDefaultFPS, 0, 1)
	if err != nil {
		return nil, err
	}
	if fps <= 0 || fps >= 1 {
		return nil, p.errorf("fps", "must be in (0, 1)")
	}
	xi, err := p.float("xi", fpsbfDefaultXi, 0, 1)
	if err != nil {
		return nil, err
	}
	if xi <= 0 {
		return nil, p.errorf("xi", "must be in (0, 1]: xi=0 never evicts, and every fingerprint cell fills with XOR noise")
	}
	d := c + f
	sub := memBits / (d * k)
	if sub < 2 {
		// One cell per sub-table: every element has the same k cells.
		return nil, p.tooSmall(memBits, 2*k*d, fmt.Sprintf("k=%d sub-tables of 2 cells of %d bits", k, d))
	}
	m := sub * k
	maxv := 1<<c - 1
	l, ok := fpsbfDeriveL(fps, maxv, f, k, xi, m)
	if !ok {
		need := FPSBFLForFPS(fps, maxv, f, k, xi, m)
		return nil, p.tooSmall(memBits, int(math.Min(need*float64(d), maxMemBits)),
			fmt.Sprintf("the L=%.4g cells per eviction that fps=%g, xi=%g need", need, fps, xi))
	}
	return newFPSBF(memBits, m, k, c, f, l, fps, xi, seed), nil
}

func newFPSBF(memBits, m, k, c, f, l int, fps, xi float64, seed uint64) *FPSBF {
	return &FPSBF{
		cells:   newPacked(m, uint(c+f)),
		m:       m,
		sub:     m / k,
		k:       k,
		c:       uint(c),
		f:       uint(f),
		cmask:   1<<c - 1,
		fpMask:  1<<f - 1,
		l:       l,
		xi:      xi,
		fps:     fps,
		memBits: memBits,
		seed:    seed,
		rng:     mix.NewWyrand(seed),
	}
}

// NewFPSBF returns the FP-SBF that New builds from
// "fpsbf:mem=<memBits>bit,c=<c>,f=<f>,k=<k>,fps=<fps>,xi=<xi>".
func NewFPSBF(memBits, c, f, k int, fps, xi float64, seed uint64) (*FPSBF, error) {
	spec := fmt.Sprintf("fpsbf:mem=%dbit,c=%d,f=%d,k=%d,fps=%s,xi=%s", memBits, c, f, k, fpsbfFloat(fps), fpsbfFloat(xi))
	fl, err := New(spec, seed)
	if err != nil {
		return nil, err
	}
	return fl.(*FPSBF), nil
}

// Observe reports whether h is a duplicate. If it is not, it runs an
// eviction round with probability xi and inserts h; a duplicate changes
// nothing.
func (s *FPSBF) Observe(h uint64) bool {
	if s.query(h) {
		return true
	}
	if s.xi >= 1 || s.rng.Float64() < s.xi {
		s.evict()
	}
	s.insert(h)
	return false
}

// indexHash splits h: the fingerprint is its low f bits; the indices derive
// from the rest only, so the two are independent for a uniform h.
func (s *FPSBF) indexHash(h uint64) (g, step, want uint64) {
	fp := h & s.fpMask
	g = h &^ s.fpMask
	return g, bloomStep(g), fp << s.c
}

// query is Algorithm 2. A cell matches when v^want, the counter with the
// fingerprint field XOR-ed against h's, is in [1, Max]: fingerprint equal
// and counter non-zero. It stops at the first cell that does not match.
func (s *FPSBF) query(h uint64) bool {
	g, step, want := s.indexHash(h)
	base := 0
	for range s.k {
		if (s.cells.get(base+mix.Reduce(g, s.sub))^want)-1 >= s.cmask {
			return false
		}
		g += step
		base += s.sub
	}
	return true
}

// insert is Algorithm 4: counters to Max, fingerprint XOR-ed into the FPCs.
func (s *FPSBF) insert(h uint64) {
	g, step, want := s.indexHash(h)
	base := 0
	for range s.k {
		i := base + mix.Reduce(g, s.sub)
		s.put(i, s.cells.get(i)^want|s.cmask)
		g += step
		base += s.sub
	}
}

// evict is one eviction round (Algorithm 3): L cells drawn uniformly, each
// decremented by its own z uniform in [1, Max]. One draw gives both: the
// high word of r*m is the cell, the low word is uniform given the cell (up
// to m/2^64) and picks z.
func (s *FPSBF) evict() {
	r := s.rng // a local copy stays in a register
	m, maxv, cmask := uint64(s.m), int(s.cmask), s.cmask
	if a := &s.cells; 64%a.width == 0 {
		// Cells never straddle words: the whole decrement inline.
		words, width, mask := a.words, a.width, a.mask
		for range s.l {
			i, lo := bits.Mul64(r.Uint64(), m)
			z := uint64(mix.Reduce(lo, maxv)) + 1
			bit := uint(i) * width
			w, off := bit/64, bit%64
			x := words[w]
			v := x >> off & mask
			nv := v - z
			if v&cmask <= z {
				nv = 0
			}
			words[w] = x&^(mask<<off) | nv<<off
		}
	} else {
		for range s.l {
			i, lo := bits.Mul64(r.Uint64(), m)
			s.decrement(int(i), uint64(mix.Reduce(lo, maxv))+1)
		}
	}
	s.rng = r
}

// decrement lowers cell i's counter by z, clamped at 0. A counter that
// reaches 0 empties the cell, fingerprint included: the invariant "counter 0
// implies fingerprint 0" lets insert always XOR. Whether the counter
// empties is a coin toss, so the choice is a conditional move, not a branch.
func (s *FPSBF) decrement(i int, z uint64) {
	v := s.cells.get(i)
	nv := v - z
	if v&s.cmask <= z {
		nv = 0
	}
	s.put(i, nv)
}

// put writes cell i. Cells within one word (every width that divides 64,
// the default 8 among them) take the short path; packed.set handles cells
// that straddle two words.
func (s *FPSBF) put(i int, v uint64) {
	a := &s.cells
	bit := uint(i) * a.width
	w, off := bit/64, bit%64
	if off+a.width > 64 {
		a.set(i, v)
		return
	}
	a.words[w] = a.words[w]&^(a.mask<<off) | v<<off
}

// SizeBits is m*(c+f), the cells' bits.
func (s *FPSBF) SizeBits() int { return s.m * int(s.c+s.f) }

// Reset empties every cell and reseeds the eviction generator: the filter
// behaves exactly as a new one.
func (s *FPSBF) Reset() {
	s.cells.clear()
	s.rng = mix.NewWyrand(s.seed)
}

// String gives the canonical spec, e.g.
// "fpsbf:mem=64KiB,c=3,f=5,k=3,fps=0.1,xi=1". L is derived from it.
func (s *FPSBF) String() string {
	return fmt.Sprintf("fpsbf:mem=%s,c=%d,f=%d,k=%d,fps=%s,xi=%s",
		FormatMem(s.memBits), s.c, s.f, s.k, fpsbfFloat(s.fps), fpsbfFloat(s.xi))
}

// fpsbfFloat formats v so that ParseFloat gives v back exactly.
func fpsbfFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// Cells is m, the number of cells (k sub-tables of m/k).
func (s *FPSBF) Cells() int { return s.m }

// CounterBits is c.
func (s *FPSBF) CounterBits() int { return int(s.c) }

// FingerprintBits is f.
func (s *FPSBF) FingerprintBits() int { return int(s.f) }

// Max is the value a counter is set to, 2^c-1.
func (s *FPSBF) Max() int { return int(s.cmask) }

// K is the number of hash functions, and of sub-tables.
func (s *FPSBF) K() int { return s.k }

// L is the number of cells an eviction round decrements.
func (s *FPSBF) L() int { return s.l }

// Xi is the probability that an insertion runs an eviction round.
func (s *FPSBF) Xi() float64 { return s.xi }

// FPBound is the counters' stable FP rate on a uniform stream of distinct
// elements (the paper's F_FP-SBF, Eq. 13, for random decrements): at most
// fps by the choice of L. The fingerprints lower the real rate below it.
func (s *FPSBF) FPBound() float64 {
	return FPSBFCounterFPR(s.Max(), int(s.f), s.k, s.xi, s.l, s.m)
}

// StableFPR is the expected stable FP rate on a uniform stream of distinct
// elements, fingerprints included: ((1-Z) 2^-f)^k.
func (s *FPSBF) StableFPR() float64 {
	return FPSBFStableFPR(s.Max(), int(s.f), s.k, s.xi, s.l, s.m)
}

// ZeroFraction is the fraction of cells whose counter is 0. It scans every
// cell.
func (s *FPSBF) ZeroFraction() float64 {
	zeros := 0
	for i := range s.m {
		if s.cells.get(i)&s.cmask == 0 {
			zeros++
		}
	}
	return float64(zeros) / float64(s.m)
}

// fpsbfZerosFromA is E[a^T]: the probability that at least T decrements
// come before the next set, when each next event is a decrement with
// probability a and T is the number of draws of z uniform in [1, Max] that
// empty a counter at Max, Pr(T > j) = C(Max-1, j)/Max^j (the compositions of
// at most Max-1 into j parts). E[a^T] = 1 - (1-a) sum_j a^j Pr(T > j)
// = 1 - (1-a)(1 + a/Max)^(Max-1).
func fpsbfZerosFromA(a float64, maxv int) float64 {
	mx := float64(maxv)
	return 1 - (1-a)*math.Pow(1+a/mx, mx-1)
}

// fpsbfCellZeros is the stationary probability that a counter is 0 when,
// per element, it is first decremented by z uniform in [1, Max] with
// probability qd, then set to Max with probability qs if it was 0 before
// the element and qr if it was not (see fpsbfSolve).
func fpsbfCellZeros(maxv int, qs, qr, qd float64) float64 {
	x := (1 - qr) * qd / qr
	w := fpsbfZerosFromA(x/(1+x), maxv)
	if w <= 0 {
		return 0
	}
	return w / (w + (1-w)*qs/qr)
}

// fpsbfSolve returns the stable zero fraction Z and FP rate of an FP-SBF on
// a uniform stream of distinct elements, for a real-valued L.
//
// Per element, a cell is its element's cell in its sub-table with
// probability k/m. An element the filter calls a duplicate (a false
// positive) changes nothing, which only happens when all its cells are
// non-zero and match; so an empty cell is set with probability q_s = k/m, a
// non-zero one with q_r = q_s(1-phi), phi = 2^-f y^(k-1) the chance the
// element's other cells and fingerprint match (y = (1-Z) 2^-f), and an
// eviction round runs with probability xi(1-FPR), hitting the cell with
// probability L/m, before the set. A cell's life is then a renewal: empty
// for 1/q_s elements on average; non-zero from a set until T decrements
// come between two refreshes, each next event being a decrement with
// probability b = x/(1+x), x = (1-q_r) q_d / q_r, which succeeds with
// probability W = E[b^T] per attempt. Wald's identity gives
// Z = W / (W + (1-W) q_s/q_r). FPR = y^k: a non-zero cell's fingerprint is
// matched by a fresh element's uniform one with probability 2^-f whatever
// its distribution. phi depends on Z: iterate from phi = 0, where Z = W and
// x = xi L (1/k - 1/m), SBF's Eq. 7 term.
func fpsbfSolve(maxv, f, k int, xi, l float64, m int) (zeros, fpr float64) {
	qs := float64(k) / float64(m)
	evict := xi * l / float64(m)
	cell := math.Ldexp(1, -f)
	phi := 0.0
	for range 200 {
		z := fpsbfCellZeros(maxv, qs, qs*(1-phi), evict*(1-fpr))
		y := (1 - z) * cell
		phi = cell * math.Pow(y, float64(k-1))
		next := math.Pow(y, float64(k))
		done := math.Abs(z-zeros) <= 1e-15 && math.Abs(next-fpr) <= 1e-15*next
		zeros, fpr = z, next
		if done {
			break
		}
	}
	return zeros, fpr
}

// FPSBFStableZeros is the expected fraction of zero counters of a stable
// FP-SBF (c-bit counters, Max = 2^c-1; f fingerprint bits; k sub-tables; an
// eviction round of L cells on an insertion with probability xi; m cells) on
// a uniform stream of distinct elements. As f grows it tends to SBF's Eq. 7
// with P = xi*L at Max=1; see fpsbfSolve.
func FPSBFStableZeros(maxv, f, k int, xi float64, l, m int) float64 {
	z, _ := fpsbfSolve(maxv, f, k, xi, float64(l), m)
	return z
}

// FPSBFCounterFPR is the stable FP rate the counters alone give,
// (1 - FPSBFStableZeros)^k: the paper's F_FP-SBF (Eq. 13) for its random
// decrements. At xi=1 and Max > 1 it is below SBFStableFPR(maxv, k, L, m),
// Eq. 13 as printed with unit decrements, since random decrements empty
// cells sooner.
func FPSBFCounterFPR(maxv, f, k int, xi float64, l, m int) float64 {
	return math.Pow(1-FPSBFStableZeros(maxv, f, k, xi, l, m), float64(k))
}

// FPSBFStableFPR is the stable FP rate on distinct elements, fingerprints
// included: ((1 - FPSBFStableZeros) 2^-f)^k.
func FPSBFStableFPR(maxv, f, k int, xi float64, l, m int) float64 {
	_, fpr := fpsbfSolve(maxv, f, k, xi, float64(l), m)
	return fpr
}

// FPSBFLForFPS is the real-valued L (cells per eviction round) at which
// FPSBFCounterFPR equals fps: Eq. 21's role, solved for random decrements.
// It is +Inf when m <= k.
func FPSBFLForFPS(fps float64, maxv, f, k int, xi float64, m int) float64 {
	if m <= k || !(xi > 0) || !(fps > 0 && fps < 1) {
		return math.Inf(1)
	}
	counter := func(l float64) float64 {
		z, _ := fpsbfSolve(maxv, f, k, xi, l, m)
		return math.Pow(1-z, float64(k))
	}
	// The counter FP falls as L grows: bracket, then bisect.
	lo, hi := 0.0, 1.0
	for counter(hi) > fps {
		if lo, hi = hi, 2*hi; hi > maxMemBits {
			return math.Inf(1)
		}
	}
	for range 100 {
		mid := (lo + hi) / 2
		if counter(mid) > fps {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// fpsbfDeriveL returns the smallest integer L whose counter FP rate is at
// most fps, or false when it would exceed m. FPSBFCounterFPR falls as L
// grows, so the searches only correct float error around FPSBFLForFPS.
func fpsbfDeriveL(fps float64, maxv, f, k int, xi float64, m int) (int, bool) {
	x := FPSBFLForFPS(fps, maxv, f, k, xi, m)
	if !(x <= float64(m)) { // also catches NaN and +Inf
		return 0, false
	}
	l := max(int(math.Ceil(x)), 1)
	for l > 1 && FPSBFCounterFPR(maxv, f, k, xi, l-1, m) <= fps {
		l--
	}
	for l <= m && FPSBFCounterFPR(maxv, f, k, xi, l, m) > fps {
		l++
	}
	return l, l <= m
}

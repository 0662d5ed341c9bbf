package filters

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/flowdedup/flowdedup/mix"
)

// SBF is the Stable Bloom Filter of Deng & Rafiei (SIGMOD 2006): m cells of
// d bits, each holding 0..Max with Max = 2^d-1. For every element it
//
//  1. probes the element's K cells: the element is a duplicate iff none is 0;
//  2. decrements P cells by 1 (saturating at 0): one uniformly random cell
//     and the P-1 cells after it, wrapping at the array end (Sec. 5.2: each
//     cell is still picked with probability P/m, so the analysis holds);
//  3. sets the element's K cells to Max.
//
// Steps 2 and 3 run for every element, duplicates included, as the text of
// Sec. 3.2 and the proof of Theorem 1 say; Algorithm 1's indentation, which
// puts them under the "distinct" branch, is wrong (see docs/papers.md).
//
// Once stable, the FP rate on distinct elements is at most FPBound (Eq. 8),
// reached on a uniform stream (Corollaries 3-5). A duplicate at most Max
// elements after its previous occurrence is never a false negative: at most
// Max-1 decrement runs come between (Sec. 3.6 states it for gaps below Max).
//
// The K cell indices come from the one 64-bit hash by double hashing,
// g_i = h + i*step(h) mod 2^64, each mapped to [0, m) by multiply-shift. The
// decrement start comes from the filter's own generator, seeded by New.
//
// Cells of 1 bit (Max=1, the paper's recommended setting) take a bit-level
// path: a decrement run is a masked clear of at most two bit ranges. Cells of
// 2, 4 or 8 bits decrement a word at a time; other widths, a cell at a time.
type SBF struct {
	cells   packed // m cells of d bits; cell i is bits [i*d, i*d+d)
	m       int
	d       int
	max     uint64
	lanes   uint64 // lowest bit of every cell of a word when d is 2, 4 or 8; else 0
	k       int
	p       int
	memBits int // as requested, for String
	seed    uint64
	rng     mix.Wyrand
}

var _ Filter = (*SBF)(nil)

const (
	sbfMaxCellMax = 255 // d <= 8 bits per cell
	sbfMaxK       = 64
	sbfDefaultFPS = 0.1
)

func buildSBF(p *params, seed uint64) (Filter, error) {
	memBits, err := p.mem()
	if err != nil {
		return nil, err
	}
	maxv, err := p.int("max", 1, 1, sbfMaxCellMax)
	if err != nil {
		return nil, err
	}
	if maxv&(maxv+1) != 0 {
		return nil, p.errorf("max", "must be 2^d-1 (1, 3, 7, 15, 31, 63, 127 or 255): other values waste the cell's bits")
	}
	d := bits.Len(uint(maxv))
	k, err := p.int("k", 2, 1, sbfMaxK)
	if err != nil {
		return nil, err
	}
	blocked, err := p.int("blocked", 0, 0, 1)
	if err != nil {
		return nil, err
	}
	m := memBits / d
	if blocked == 1 {
		if memBits < lineBits {
			return nil, p.tooSmall(memBits, lineBits, "one 64-byte block")
		}
		// Eq. 7, 8 and 17 hold within a block, whose m is its cells (see
		// BlockedSBF).
		m = lineBits / d
		if m <= k {
			return nil, p.errorf("k", "a block holds %d cells of %d bits: K must be below that", m, d)
		}
	}
	if m <= k {
		// Eq. 8's P(1/K - 1/m) term is 0 or negative: FP bound 1.
		return nil, p.tooSmall(memBits, (k+1)*d, fmt.Sprintf("more than K=%d cells of %d bits", k, d))
	}
	var pc int
	switch {
	case p.has("p") && p.has("fps"):
		return nil, p.errorf("p", "give p or fps, not both")
	case p.has("p"):
		if pc, err = p.int("p", 0, 0, maxMemBits); err != nil {
			return nil, err
		}
	default:
		fps, err := p.float("fps", sbfDefaultFPS, 0, 1)
		if err != nil {
			return nil, err
		}
		if fps <= 0 || fps >= 1 {
			return nil, p.errorf("fps", "must be in (0, 1)")
		}
		var ok bool
		if pc, ok = sbfDeriveP(fps, maxv, k, m); !ok {
			need := SBFPForFPS(fps, maxv, k, m)
			if blocked == 1 {
				return nil, p.errorf("fps", "needs P=%.4g cells decremented per element (Eq. 17), more than the %d of a block", need, m)
			}
			return nil, p.tooSmall(memBits, int(math.Min(need*float64(d), maxMemBits)),
				fmt.Sprintf("the P=%.4g cells that fps=%g needs (Eq. 17)", need, fps))
		}
	}
	if pc > m {
		if blocked == 1 {
			return nil, p.errorf("p", "more than the %d cells of a block", m)
		}
		return nil, p.tooSmall(memBits, pc*d, fmt.Sprintf("the P=%d cells decremented per element", pc))
	}
	if blocked == 1 {
		return newBlockedSBF(memBits, d, maxv, k, pc, seed), nil
	}
	return newSBF(memBits, m, d, maxv, k, pc, seed), nil
}

func newSBF(memBits, m, d, maxv, k, p int, seed uint64) *SBF {
	var lanes uint64
	if d > 1 && 64%d == 0 {
		lanes = ^uint64(0) / uint64(maxv) // 0x5555..., 0x1111..., 0x0101...
	}
	return &SBF{
		lanes:   lanes,
		cells:   newPacked(m, uint(d)),
		m:       m,
		d:       d,
		max:     uint64(maxv),
		k:       k,
		p:       p,
		memBits: memBits,
		seed:    seed,
		rng:     mix.NewWyrand(seed),
	}
}

// NewSBF returns the SBF that New builds from
// "sbf:mem=<memBits>bit,max=<maxv>,k=<k>,p=<p>".
func NewSBF(memBits, maxv, k, p int, seed uint64) (*SBF, error) {
	f, err := New(fmt.Sprintf("sbf:mem=%dbit,max=%d,k=%d,p=%d", memBits, maxv, k, p), seed)
	if err != nil {
		return nil, err
	}
	return f.(*SBF), nil
}

// Observe reports whether h is a duplicate, then decrements P cells and sets
// h's K cells to Max, whatever the answer.
func (s *SBF) Observe(h uint64) bool {
	if s.d != 1 {
		return s.observeCells(h)
	}
	// Max=1: cells are bits; setting is an OR, decrementing a run is a clear.
	// The probe ANDs the bits instead of branching on them: whether a probed
	// bit is 0 is a coin toss once the filter is stable.
	w := s.cells.words
	step := bloomStep(h)
	all := uint64(1)
	g := h
	for range s.k {
		i := mix.Reduce(g, s.m)
		all &= w[i>>6] >> (i & 63)
		g += step
	}
	if s.p > 0 {
		s.clearRun(s.rng.IntN(s.m))
	}
	g = h
	for range s.k {
		i := mix.Reduce(g, s.m)
		w[i>>6] |= 1 << (i & 63)
		g += step
	}
	return all&1 != 0
}

// observeCells is Observe for cells of d > 1 bits.
func (s *SBF) observeCells(h uint64) bool {
	step := bloomStep(h)
	dup := s.probeCells(h, step)
	if s.p > 0 {
		s.decrement(s.rng.IntN(s.m))
	}
	s.setCells(h, step)
	return dup
}

// probeCells reports whether the K cells of h (h + j*step) are all
// non-zero: Algorithm 1's probe, for cells of d > 1 bits.
func (s *SBF) probeCells(h, step uint64) bool {
	dup := true
	for range s.k {
		if s.cells.get(mix.Reduce(h, s.m)) == 0 {
			dup = false
		}
		h += step
	}
	return dup
}

// setCells sets the K cells of h (h + j*step) to Max, for cells of d > 1
// bits.
func (s *SBF) setCells(h, step uint64) {
	for range s.k {
		s.cells.set(mix.Reduce(h, s.m), s.max)
		h += step
	}
}

// decrement decrements cells start, start+1, ..., start+P-1 (mod m) by one,
// saturating at 0.
func (s *SBF) decrement(start int) {
	switch {
	case s.d == 1:
		s.clearRun(start)
	case s.lanes != 0:
		s.decrementLanes(start)
	default:
		s.decrementRun(start)
	}
}

// clearRun is decrement for 1-bit cells: P <= m consecutive bits, wrapping,
// so at most two bit ranges, each a masked first and last word and whole
// words between.
func (s *SBF) clearRun(start int) {
	end := start + s.p
	if end > s.m {
		sbfClearBits(s.cells.words, 0, end-s.m)
		end = s.m
	}
	sbfClearBits(s.cells.words, start, end)
}

// sbfClearBits clears bits [lo, hi) of w.
func sbfClearBits(w []uint64, lo, hi int) {
	if lo >= hi {
		return
	}
	first, last := lo>>6, (hi-1)>>6
	loMask := ^uint64(0) << (lo & 63)
	hiMask := ^uint64(0) >> (63 - (hi-1)&63)
	if first == last {
		w[first] &^= loMask & hiMask
		return
	}
	w[first] &^= loMask
	clear(w[first+1 : last])
	w[last] &^= hiMask
}

// decrementLanes is decrement for cells of 2, 4 or 8 bits, which never
// straddle a word: the run is one or two bit ranges, handled a word at a
// time.
func (s *SBF) decrementLanes(start int) {
	end := start + s.p
	if end > s.m {
		s.decrementBits(0, (end-s.m)*s.d)
		end = s.m
	}
	s.decrementBits(start*s.d, end*s.d)
}

// decrementBits decrements by one, saturating at 0, every cell within bits
// [lo, hi), cell boundaries, of a filter whose cells divide a word. Within a
// word, OR-folding each cell's bits into its lowest bit flags the non-zero
// cells; subtracting those flags cannot borrow across cells.
func (s *SBF) decrementBits(lo, hi int) { sbfDecrementBits(s.cells.words, lo, hi, s.d, s.lanes) }

// sbfDecrementBits is decrementBits over w, for cells of d bits whose
// lowest bits are lanes.
func sbfDecrementBits(w []uint64, lo, hi, d int, lanes uint64) {
	for lo < hi {
		j := lo >> 6
		next := (j + 1) << 6
		mask := ^uint64(0) << (lo & 63)
		if hi < next {
			mask &= ^uint64(0) >> (64 - hi&63)
		}
		x := w[j]
		nz := x
		for sh := 1; sh < d; sh <<= 1 {
			nz |= nz >> sh
		}
		w[j] = x - nz&lanes&mask
		lo = next
	}
}

// decrementRun is decrement for cells of any width, one cell at a time.
func (s *SBF) decrementRun(start int) {
	c := &s.cells
	i := start
	for range s.p {
		if v := c.get(i); v != 0 {
			c.set(i, v-1)
		}
		if i++; i == s.m {
			i = 0
		}
	}
}

// SizeBits is m*d, the cells' bits.
func (s *SBF) SizeBits() int { return s.m * s.d }

// Reset zeroes every cell and reseeds the decrement generator: the filter
// behaves exactly as a new one.
func (s *SBF) Reset() {
	s.cells.clear()
	s.rng = mix.NewWyrand(s.seed)
}

// String gives the spec with P explicit, e.g. "sbf:mem=64KiB,max=1,k=2,p=5".
func (s *SBF) String() string {
	return fmt.Sprintf("sbf:mem=%s,max=%d,k=%d,p=%d", FormatMem(s.memBits), s.max, s.k, s.p)
}

// Cells is m, the number of cells.
func (s *SBF) Cells() int { return s.m }

// CellBits is d, the bits per cell.
func (s *SBF) CellBits() int { return s.d }

// Max is the value a cell is set to, 2^d-1.
func (s *SBF) Max() int { return int(s.max) }

// K is the number of cells probed and set per element.
func (s *SBF) K() int { return s.k }

// P is the number of cells decremented per element.
func (s *SBF) P() int { return s.p }

// FPBound is Eq. 8 for this filter's Max, K, P and m: the FP rate on distinct
// elements never exceeds it (Corollary 5) and a uniform stream reaches it
// once stable (Corollary 4).
func (s *SBF) FPBound() float64 { return SBFStableFPR(s.Max(), s.k, s.p, s.m) }

// ZeroFraction is the fraction of cells that are 0. It scans every cell.
func (s *SBF) ZeroFraction() float64 {
	zeros := 0
	if s.d == 1 {
		ones := 0
		for _, w := range s.cells.words {
			ones += bits.OnesCount64(w)
		}
		zeros = s.m - ones
	} else {
		for i := range s.m {
			if s.cells.get(i) == 0 {
				zeros++
			}
		}
	}
	return float64(zeros) / float64(s.m)
}

// FillRatio is the fraction of cells that are not 0. It scans every cell.
func (s *SBF) FillRatio() float64 { return 1 - s.ZeroFraction() }

// SBFStablePoint is the expected fraction of zero cells of a stable SBF on a
// uniform stream (Eq. 7 with p = P/m and k = K/m, as in Theorem 3):
// (1 / (1 + 1/(P(1/K - 1/m))))^Max. On other streams it is a lower bound.
func SBFStablePoint(maxv, k, p, m int) float64 {
	x := float64(p) * (1/float64(k) - 1/float64(m))
	if x <= 0 {
		return 0
	}
	return math.Pow(x/(1+x), float64(maxv))
}

// SBFStableFPR is Eq. 8, the FP bound of an SBF: (1 - SBFStablePoint)^K.
func SBFStableFPR(maxv, k, p, m int) float64 {
	return math.Pow(1-SBFStablePoint(maxv, k, p, m), float64(k))
}

// SBFPForFPS is Eq. 17, the real-valued P at which Eq. 8 equals fps:
// 1 / ((1/(1 - fps^(1/K))^(1/Max) - 1) (1/K - 1/m)). It is +Inf when m <= K.
// A filter needs an integer P: New rounds it up (see sbfDeriveP).
func SBFPForFPS(fps float64, maxv, k, m int) float64 {
	if m <= k {
		return math.Inf(1)
	}
	zeros := math.Pow(1-math.Pow(fps, 1/float64(k)), 1/float64(maxv))
	return 1 / ((1/zeros - 1) * (1/float64(k) - 1/float64(m)))
}

// sbfDeriveP returns the smallest integer P whose Eq. 8 bound is at most fps,
// or false when it would exceed m.
//
// Eq. 17 is rounded UP, not to nearest: FPS=0.1, Max=1, K=2 gives P=4.33,
// and the paper's own choice P=4 (Sec. 5.2) has Eq. 8 = (1/3)^2 = 11.1%, above
// the 10% asked for. Rounding up gives P=5 and a bound of 8.2%. Eq. 8 falls
// as P grows, so the search below only corrects float error around Eq. 17.
func sbfDeriveP(fps float64, maxv, k, m int) (int, bool) {
	x := SBFPForFPS(fps, maxv, k, m)
	if !(x <= float64(m)) { // also catches NaN and +Inf
		return 0, false
	}
	p := max(int(math.Ceil(x)), 1)
	for p > 1 && SBFStableFPR(maxv, k, p-1, m) <= fps {
		p--
	}
	for p <= m && SBFStableFPR(maxv, k, p, m) > fps {
		p++
	}
	return p, p <= m
}

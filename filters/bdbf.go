package filters

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/flowdedup/flowdedup/mix"
)

// bdbfDefaultWindow is the QHT paper's benchmark setting (Sec. 6.1):
// "b_DBF, sliding window of 6000 elements".
const (
	bdbfDefaultWindow = 6000
	bdbfMaxWindow     = 1 << 30
	bdbfMaxK          = 16
)

var bdbfFamily = &Family{
	Name:  "bdbf",
	Paper: "Shen & Zhang, J. Comput. Sci. Technol. 23(6) 2008 (block-decaying Bloom filter, b_DBF)",
	About: "Bloom filter of d-bit decaying counters over a sliding window of W arrivals; one block of counters decays per arrival",
	Params: []Param{memParam,
		{Name: "window", Default: "6000", Help: "sliding window W in arrivals, 1..2^30: a duplicate at most W arrivals after its previous occurrence is always detected, older ones are forgotten"},
	},
	build: buildBDBF,
}

// BDBF is a block-decaying Bloom filter over a sliding window of the last W
// arrivals, as this package reads Shen & Zhang (J. Comput. Sci. Technol.
// 23(6), 2008; the QHT paper only cites it, and this is a reconstruction
// from that citation, not a transcription of their text).
//
// The decaying Bloom filter (DBF) is a counting Bloom filter whose counters
// hold remaining lifetimes: an arriving element sets its k counters to the
// window length and every arrival decrements every non-zero counter, so a
// counter is non-zero exactly while some element that set it is among the
// last W arrivals, and 0 always means absent (the QHT paper's footnote 9).
// That costs m decrements per arrival; the block variant amortises them.
// Our reading:
//
//   - The m counters of d bits are cut into P blocks of s consecutive
//     counters (s a power of two). Arrival t decays only block t mod P, by
//     P at once, so each counter is decremented by P every P arrivals: the
//     DBF's decay, batched per block.
//   - A counter's stored value v is its lifetime counted from its block's
//     last decay; e = (t - block) mod P arrivals have passed since, so it is
//     alive iff v > e. Lifetimes are thus exact: the filter answers exactly
//     as the per-arrival DBF (TestBDBFMatchesNaiveDBF), with no slack
//     beyond W as a decay by whole blocks of time would add.
//   - Observe at arrival t decays block t mod P, reports a duplicate iff
//     all k counters are alive, and sets each to W + 1 + e. A duplicate at
//     most W arrivals after its previous occurrence is always detected (no
//     false negative in the window); once more than W arrivals have passed,
//     the element's own counters are dead and it is reported again only as
//     a false positive of the other elements in the window: the sliding-
//     window FP definition the QHT paper notes for b_DBF (footnote 13).
//
// Sizes: values go up to W + P, so P <= 2^d - 1 - W blocks, and s is the
// smallest power of two that needs no more. m = floor(mem/d) and k =
// round(ln 2 * m/W), the Bloom optimum for W elements in the window, whose
// FPR with W distinct elements alive is about (1-e^(-kW/m))^k; k is clamped
// to 1..16, where that FPR is already below 2^-16. d starts at bits(2W),
// one bit more than a DBF counter needs, which allows P >= W and so
// s <= 2m/W; it is widened one bit at a time while s > k, so that an
// arrival never decays more counters than it sets (each bit halves s for a
// few percent fewer counters; on a tight budget s <= 2m/W is about 3k
// already, so d grows by two bits at most there). An Observe thus costs
// O(k): k counter updates and at most k decays. (Shen & Zhang state
// amortised O(sqrt(G/W)) time for G bits; we do not claim their exact
// scheme.) For 64KiB and W = 6000: d = 14, m = 37449, k = 4, s = 4; for
// 1MiB: d = 16, m = 524288, k = 16, s = 16. SizeBits is m*d, the counters;
// the arrival clock (t mod P) is not counted, as the DBF counts only its
// counters.
type BDBF struct {
	cells   packed // m counters of d bits
	m       int
	k       int
	window  int
	blocks  int  // P
	shift   uint // log2(s): counter i is in block i >> shift
	cursor  int  // block decayed at the current arrival: t mod P
	memBits int  // as requested, for String
}

var _ Filter = (*BDBF)(nil)

func buildBDBF(p *params, _ uint64) (Filter, error) {
	memBits, err := p.mem()
	if err != nil {
		return nil, err
	}
	w, err := p.int("window", bdbfDefaultWindow, 1, bdbfMaxWindow)
	if err != nil {
		return nil, err
	}
	if d := bits.Len(uint(2 * w)); memBits < d {
		return nil, p.tooSmall(memBits, d, fmt.Sprintf("one %d-bit counter for window=%d", d, w))
	}
	return newBDBF(memBits, w), nil
}

// bdbfShape is a counter width d and what follows from it (see BDBF).
type bdbfShape struct {
	d, m, k, shift, blocks int
}

func bdbfShapeFor(memBits, w, d int) bdbfShape {
	m := memBits / d
	k := int(math.Round(math.Ln2 * float64(m) / float64(w)))
	k = max(1, min(k, bdbfMaxK))
	maxBlocks := int(min(int64(1)<<d-1-int64(w), math.MaxInt)) // d <= 32: int64 on 32-bit platforms
	shift := 0
	for (m+1<<shift-1)>>shift > maxBlocks {
		shift++
	}
	return bdbfShape{d: d, m: m, k: k, shift: shift, blocks: (m + 1<<shift - 1) >> shift}
}

func newBDBF(memBits, w int) *BDBF {
	// Widen counters from bits(2W) until an arrival decays at most k
	// counters: each bit more halves the decay work for a few percent fewer
	// counters.
	sh := bdbfShapeFor(memBits, w, bits.Len(uint(2*w)))
	for sh.d < 32 && 1<<sh.shift > sh.k && memBits >= sh.d+1 {
		sh = bdbfShapeFor(memBits, w, sh.d+1)
	}
	return &BDBF{
		cells:   newPacked(sh.m, uint(sh.d)),
		m:       sh.m,
		k:       sh.k,
		window:  w,
		blocks:  sh.blocks,
		shift:   uint(sh.shift),
		memBits: memBits,
	}
}

// Observe decays this arrival's block, reports whether h's k counters are
// all alive, and renews them for W more arrivals.
func (f *BDBF) Observe(h uint64) bool {
	cur := f.cursor
	f.decay(cur)
	step := bloomStep(h)
	renew := uint64(f.window + 1)
	alive := true
	g := h
	for range f.k {
		i := mix.Reduce(g, f.m)
		e := cur - i>>f.shift
		if e < 0 {
			e += f.blocks
		}
		// A counter the element hit twice reads its new value the second
		// time, but the first read already decided.
		alive = alive && f.cells.get(i) > uint64(e)
		f.cells.set(i, renew+uint64(e))
		g += step
	}
	if cur++; cur == f.blocks {
		cur = 0
	}
	f.cursor = cur
	return alive
}

// decay subtracts P, saturating at 0, from every counter of block j.
func (f *BDBF) decay(j int) {
	p := uint64(f.blocks)
	lo := j << f.shift
	hi := min(lo+1<<f.shift, f.m)
	for i := lo; i < hi; i++ {
		if v := f.cells.get(i); v != 0 {
			f.cells.set(i, max(v, p)-p)
		}
	}
}

// SizeBits is m*d, the counters.
func (f *BDBF) SizeBits() int { return f.m * int(f.cells.width) }

// Reset zeroes every counter and restarts the arrival clock.
func (f *BDBF) Reset() {
	f.cells.clear()
	f.cursor = 0
}

// String gives the canonical spec, e.g. "bdbf:mem=64KiB,window=6000".
func (f *BDBF) String() string {
	return fmt.Sprintf("bdbf:mem=%s,window=%d", FormatMem(f.memBits), f.window)
}

// Window is W, in arrivals.
func (f *BDBF) Window() int { return f.window }

// K is the number of counters per element.
func (f *BDBF) K() int { return f.k }

// Counters is m, the number of counters.
func (f *BDBF) Counters() int { return f.m }

// CounterBits is d, the bits of a counter.
func (f *BDBF) CounterBits() int { return int(f.cells.width) }

// BlockSize is s, the counters decayed per arrival.
func (f *BDBF) BlockSize() int { return 1 << f.shift }

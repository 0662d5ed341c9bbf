package filters

import (
	"fmt"
	"math/bits"

	"github.com/flowdedup/flowdedup/mix"
)

// BlockedSBF is a Stable Bloom Filter (Deng & Rafiei, SIGMOD 2006) in the
// blocked layout of Putze, Sanders & Singler (WEA 2007), sbf:blocked=1:
// the hash picks one block of 512 bits, a 64-byte cache line, of
// c = 512/d cells of d bits, and everything the element does happens
// there. For every element it
//
//  1. probes the element's K cells in its block: a duplicate iff none is 0;
//  2. decrements P cells of the same block by 1 (saturating at 0): one
//     uniformly random cell of the block and the P-1 after it, wrapping
//     within the block;
//  3. sets the element's K cells to Max.
//
// So an element costs one cache miss, where SBF's K cells and decrement
// run cost K+1.
//
// Decrementing in the element's own block, rather than anywhere, keeps the
// paper's stable point, per block: a block changes only when an element
// maps to it, and then each of its cells is set with probability about K/c
// and decremented with probability P/c, as SBF's cells are with K/m and
// P/m per element. The limit of Theorem 2 does not depend on how often the
// steps come, so every block that receives elements tends to Eq. 7 with
// m = c, whatever its share of the stream, and Eq. 8 with m = c bounds the
// FP rate (FPBound), up to the chance that two of an element's K cells
// coincide among the c of a block, which moves the rates by less than 1%
// at c >= 170 (tested). P from fps is Eq. 17 with m = c: it differs from
// SBF's only by the 1/c term (Max=1, K=2: fps=0.1 gives P=5 and fps=0.01
// P=19 either way, Eq. 17 being 18.07 at c = 512 and just above 18 at any
// finite m).
// What changes is how fast a key is forgotten on a skewed stream: the
// decrements follow the elements, so a key whose block also holds a
// frequent key is forgotten sooner, and one in a quiet block later; on a
// uniform stream a cell is decremented P/m times per element on average,
// as in SBF.
//
// Cells of 1 bit (Max=1, the default) take a bit-level path: a decrement
// run is at most two masked bit ranges. Cells of 2, 4 or 8 bits decrement a word at a time; other widths
// (c = floor(512/d) cells, the last bits of a block unused) a cell at a
// time.
type BlockedSBF struct {
	words   []uint64 // blocks lines, 64-byte aligned
	blocks  int
	cells   int // per block: c = 512/d
	d       int
	max     uint64
	lanes   uint64 // lowest bit of every cell of a word when d is 2, 4 or 8; else 0
	k       int
	p       int
	memBits int // as requested, for String
	seed    uint64
	rng     mix.Wyrand
}

var _ Filter = (*BlockedSBF)(nil)

func newBlockedSBF(memBits, d, maxv, k, p int, seed uint64) *BlockedSBF {
	var lanes uint64
	if d > 1 && 64%d == 0 {
		lanes = ^uint64(0) / uint64(maxv)
	}
	blocks := memBits / lineBits
	return &BlockedSBF{
		words:   alignedLines(blocks),
		blocks:  blocks,
		cells:   lineBits / d,
		d:       d,
		max:     uint64(maxv),
		lanes:   lanes,
		k:       k,
		p:       p,
		memBits: memBits,
		seed:    seed,
		rng:     mix.NewWyrand(seed),
	}
}

// Observe reports whether h is a duplicate, then decrements P cells of h's
// block and sets h's K cells to Max, whatever the answer.
func (s *BlockedSBF) Observe(h uint64) bool {
	blk := blockOf(s.words, h, s.blocks)
	if s.d != 1 {
		return s.observeCells(blk, h)
	}
	// The probe ANDs the bits instead of branching on them, as SBF's does.
	all := uint64(1)
	first := newBlockCells(h)
	c := first
	for j := range s.k {
		var i int
		i, c = c.next(j, lineBits)
		all &= blk[i>>6&(lineWords-1)] >> (i & 63)
	}
	if s.p > 0 {
		start := s.rng.IntN(lineBits)
		if s.p <= 64 {
			// The run is within two words of the block, the second one
			// after the first, word 0 after word 7: the wrap at the
			// block's end. (A shift by 64 gives 0.)
			w, off := start>>6, uint(start&63)
			run := ^uint64(0) >> (64 - s.p)
			blk[w&(lineWords-1)] &^= run << off
			blk[(w+1)&(lineWords-1)] &^= run >> (64 - off)
		} else {
			end := start + s.p
			if end > lineBits {
				sbfClearBits(blk[:], 0, end-lineBits)
				end = lineBits
			}
			sbfClearBits(blk[:], start, end)
		}
	}
	c = first // the same cells again
	for j := range s.k {
		var i int
		i, c = c.next(j, lineBits)
		blk[i>>6&(lineWords-1)] |= 1 << (i & 63)
	}
	return all&1 != 0
}

// observeCells is Observe for cells of d > 1 bits.
func (s *BlockedSBF) observeCells(blk *line, h uint64) bool {
	dup := true
	first := newBlockCells(h)
	c := first
	for j := range s.k {
		var i int
		i, c = c.next(j, s.cells)
		if s.get(blk, i) == 0 {
			dup = false
		}
	}
	if s.p > 0 {
		s.decrement(blk, s.rng.IntN(s.cells))
	}
	c = first // the same cells again
	for j := range s.k {
		var i int
		i, c = c.next(j, s.cells)
		s.set(blk, i, s.max)
	}
	return dup
}

// get returns cell i of blk; a cell may straddle two words of the block,
// never two blocks.
func (s *BlockedSBF) get(blk *line, i int) uint64 {
	bit := uint(i * s.d)
	w, off := bit>>6&(lineWords-1), bit&63
	v := blk[w] >> off
	if off+uint(s.d) > 64 {
		v |= blk[(w+1)&(lineWords-1)] << (64 - off)
	}
	return v & s.max
}

// set sets cell i of blk to v (v <= Max).
func (s *BlockedSBF) set(blk *line, i int, v uint64) {
	bit := uint(i * s.d)
	w, off := bit>>6&(lineWords-1), bit&63
	blk[w] = blk[w]&^(s.max<<off) | v<<off
	if off+uint(s.d) > 64 {
		hi := off + uint(s.d) - 64
		blk[(w+1)&(lineWords-1)] = blk[(w+1)&(lineWords-1)]&^(s.max>>(uint(s.d)-hi)) | v>>(64-off)
	}
}

// decrement decrements cells start, ..., start+P-1 of blk by one,
// saturating at 0, wrapping at the block's last cell.
func (s *BlockedSBF) decrement(blk *line, start int) {
	end := start + s.p
	if s.lanes != 0 {
		if end > s.cells {
			sbfDecrementBits(blk[:], 0, (end-s.cells)*s.d, s.d, s.lanes)
			end = s.cells
		}
		sbfDecrementBits(blk[:], start*s.d, end*s.d, s.d, s.lanes)
		return
	}
	i := start
	for range s.p {
		if v := s.get(blk, i); v != 0 {
			s.set(blk, i, v-1)
		}
		if i++; i == s.cells {
			i = 0
		}
	}
}

// SizeBits is the bits of its blocks: mem rounded down to whole 512-bit
// blocks (with cells of 3, 5, 6 or 7 bits, a few bits of each block hold
// no cell).
func (s *BlockedSBF) SizeBits() int { return s.blocks * lineBits }

// Reset zeroes every cell and reseeds the decrement generator: the filter
// behaves exactly as a new one.
func (s *BlockedSBF) Reset() {
	clear(s.words)
	s.rng = mix.NewWyrand(s.seed)
}

// String gives the spec with P explicit, e.g.
// "sbf:mem=64KiB,max=1,k=2,p=5,blocked=1".
func (s *BlockedSBF) String() string {
	return fmt.Sprintf("sbf:mem=%s,max=%d,k=%d,p=%d,blocked=1", FormatMem(s.memBits), s.max, s.k, s.p)
}

// Blocks is the number of 512-bit blocks.
func (s *BlockedSBF) Blocks() int { return s.blocks }

// BlockCells is c, the cells of one block: the m of Eq. 7, 8 and 17.
func (s *BlockedSBF) BlockCells() int { return s.cells }

// CellBits is d, the bits per cell.
func (s *BlockedSBF) CellBits() int { return s.d }

// Max is the value a cell is set to, 2^d-1.
func (s *BlockedSBF) Max() int { return int(s.max) }

// K is the number of cells probed and set per element.
func (s *BlockedSBF) K() int { return s.k }

// P is the number of cells of its block decremented per element.
func (s *BlockedSBF) P() int { return s.p }

// FPBound is Eq. 8 for this filter's Max, K, P and the c cells of a block:
// the stable FP rate of every block that elements reach, on a uniform
// stream, and a bound on any stream.
func (s *BlockedSBF) FPBound() float64 { return SBFStableFPR(s.Max(), s.k, s.p, s.cells) }

// ZeroFraction is the fraction of cells that are 0. It scans every cell.
func (s *BlockedSBF) ZeroFraction() float64 {
	zeros := 0
	if s.d == 1 {
		ones := 0
		for _, w := range s.words {
			ones += bits.OnesCount64(w)
		}
		zeros = s.blocks*s.cells - ones
	} else {
		for b := range s.blocks {
			blk := (*line)(s.words[b*lineWords : (b+1)*lineWords])
			for i := range s.cells {
				if s.get(blk, i) == 0 {
					zeros++
				}
			}
		}
	}
	return float64(zeros) / float64(s.blocks*s.cells)
}

var _ BatchObserver = (*BlockedSBF)(nil)

// ObserveBatch is Observe over hashes in order, with the block of each
// hash of a stretch requested before the stretch is observed (see
// BatchObserver): the probes, the decrement run and the sets of an element
// are all in that one line.
func (s *BlockedSBF) ObserveBatch(hashes []uint64, dup []bool) {
	var buf lineBuf
	for st := range stretches(hashes, dup, s.SizeBits()) {
		prefetchBlocks(st.ahead, s.words, s.blocks, &buf)
		for i, h := range st.hashes {
			st.dup[i] = s.Observe(h)
		}
	}
}

package filters

import (
	"unsafe"

	"github.com/flowdedup/flowdedup/mix"
)

// The blocked filters (bloom:blocked=1, sbf:blocked=1) keep all the cells
// of a key in one block of lineBits bits, one 64-byte cache line, after
// Putze, Sanders & Singler, "Cache-, Hash- and Space-Efficient Bloom
// Filters" (WEA 2007): the hash picks the block, and the key's cells are
// drawn within it. A key then costs one cache miss, not one per cell,
// for a somewhat higher false-positive rate at the same memory.
const (
	lineBits  = 512
	lineWords = lineBits / 64
)

// line is one block of a blocked filter.
type line = [lineWords]uint64

// alignedLines returns n zeroed blocks, the first on a 64-byte boundary,
// so that every block is one cache line. The heap does not move objects,
// so the alignment holds for the slice's life.
func alignedLines(n int) []uint64 {
	w := make([]uint64, n*lineWords+lineWords-1)
	skip := int((-uintptr(unsafe.Pointer(&w[0])) & 63) / 8)
	return w[skip : skip+n*lineWords : skip+n*lineWords]
}

// blockOf returns the block of words that h maps to, out of blocks.
func blockOf(words []uint64, h uint64, blocks int) *line {
	i := mix.Reduce(h, blocks) * lineWords
	return (*line)(words[i : i+lineWords])
}

// blockCells draws the cells of a key within its block: 16 bits of an
// independent remix of the hash per cell, mapped to [0, cells) by
// multiply-shift (exact for the 512 one-bit cells of a line). The block
// comes from the high bits of h (mix.Reduce), the cells from Mix64(h), a
// bijection of all its bits, so the cells do not depend on the block.
// Every fourth cell the next 64 bits are Mix64 of the previous remix plus
// the golden ratio.
type blockCells struct{ seed, x uint64 }

func newBlockCells(h uint64) blockCells {
	x := mix.Mix64(h)
	return blockCells{seed: x, x: x}
}

// next returns the j-th cell of the key, for j = 0, 1, ... in turn, and
// the draw of the cells after it. (A value, not a pointer receiver: the
// compiler keeps it in registers.)
func (c blockCells) next(j, cells int) (int, blockCells) {
	if j&3 == 0 && j > 0 {
		c.seed = mix.Mix64(c.seed + mix.Golden)
		c.x = c.seed
	}
	i := int((c.x & 0xffff) * uint64(cells) >> 16)
	c.x >>= 16
	return i, c
}

// prefetchBlocks queues, for one stretch of a batch, the block of each
// hash.
func prefetchBlocks(hs []uint64, words []uint64, blocks int, buf *lineBuf) {
	n := 0
	for _, h := range hs {
		n = buf.add(n, unsafe.Pointer(blockOf(words, h, blocks)))
	}
	buf.flush(n)
}

package filters

// packed is an array of n fixed-width unsigned cells (1..64 bits each)
// stored back to back in 64-bit words; a cell may straddle two words. It is
// the flat state behind filters whose papers count bits per cell.
type packed struct {
	words []uint64
	n     int
	width uint
	mask  uint64
}

func newPacked(n int, width uint) packed {
	if width == 0 || width > 64 {
		panic("filters: packed cell width out of range")
	}
	total := n * int(width)
	return packed{
		words: make([]uint64, (total+63)/64+1), // +1: a straddling read of the last cell never needs a bounds branch
		n:     n,
		width: width,
		mask:  ^uint64(0) >> (64 - width),
	}
}

func (a *packed) get(i int) uint64 {
	bit := uint(i) * a.width
	w, off := bit/64, bit%64
	v := a.words[w] >> off
	if off+a.width > 64 {
		v |= a.words[w+1] << (64 - off)
	}
	return v & a.mask
}

func (a *packed) set(i int, v uint64) {
	v &= a.mask
	bit := uint(i) * a.width
	w, off := bit/64, bit%64
	a.words[w] = a.words[w]&^(a.mask<<off) | v<<off
	if off+a.width > 64 {
		hiBits := off + a.width - 64
		a.words[w+1] = a.words[w+1]&^(a.mask>>(a.width-hiBits)) | v>>(64-off)
	}
}

func (a *packed) clear() { clear(a.words) }

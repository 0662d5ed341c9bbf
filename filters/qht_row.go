package filters

// Row matching for the QHT family: a row's buckets are s-bit fields packed
// side by side in a uint64 (bucket 0 in the lowest bits), and all of them are
// compared at once with SWAR arithmetic instead of a loop over buckets.

// qhtLane describes n s-bit fields (n*s <= 64) held in the low bits of a
// word: a whole row when k*s <= 64, else one chunk of a wider row.
type qhtLane struct {
	bits uint   // n*s
	mask uint64 // the n*s low bits
	lsbs uint64 // lowest bit of each field: fp*lsbs broadcasts fp to every field
	his  uint64 // highest bit of each field
	lows uint64 // every bit of every field but its highest
}

func newQHTLane(n, s uint) qhtLane {
	if n == 0 || s == 0 || n*s > 64 {
		panic("filters: qht lane out of range")
	}
	var l qhtLane
	l.bits = n * s
	l.mask = ^uint64(0) >> (64 - l.bits)
	for i := uint(0); i < n; i++ {
		l.lsbs |= 1 << (i * s)
	}
	l.his = l.lsbs << (s - 1)
	l.lows = l.mask &^ l.his
	return l
}

// zeros returns a word with the highest bit of each zero field of v set, and
// no other bit. It is exact, unlike the cheaper "has a zero byte" trick that
// may flag a field above a zero one: (v&lows)+lows cannot carry out of a
// field (at most 2^s - 2), so a field's top bit in the sum says whether its
// low bits are non-zero, and or-ing v adds its own top bit.
func (l *qhtLane) zeros(v uint64) uint64 {
	return ^((v & l.lows) + l.lows | v | l.lows) & l.his
}

// holds reports whether some field of v equals fp (fp < 2^s).
func (l *qhtLane) holds(v, fp uint64) bool {
	return l.zeros(v^fp*l.lsbs) != 0
}

// qhtLoad returns the n bits of words starting at bit, which may straddle two
// words: an unaligned read done with two loads and a funnel shift. words must
// have a word past the last bit read (packed keeps one).
func qhtLoad(words []uint64, bit uint64, mask uint64) uint64 {
	w, off := bit>>6, uint(bit&63)
	_ = words[w+1]
	// <<1<<(63-off) is <<(64-off) without the shift-by-64 fixup Go needs.
	return (words[w]>>off | words[w+1]<<1<<((63-off)&63)) & mask
}

// qhtStore writes v (already within mask) to the bits that qhtLoad reads.
// When the field does not straddle, the second word is rewritten unchanged.
func qhtStore(words []uint64, bit uint64, mask, v uint64) {
	w, off := bit>>6, uint(bit&63)
	_ = words[w+1]
	words[w] = words[w]&^(mask<<off) | v<<off
	words[w+1] = words[w+1]&^(mask>>1>>((63-off)&63)) | v>>1>>((63-off)&63)
}

// qhtFlip xors diff into the bits that qhtLoad(words, bit, ...) reads: with
// diff = old ^ new it writes a row back without masking, and when nothing
// changed it rewrites both words as they were.
func qhtFlip(words []uint64, bit uint64, diff uint64) {
	w, off := bit>>6, uint(bit&63)
	_ = words[w+1]
	words[w] ^= diff << off
	words[w+1] ^= diff >> 1 >> ((63 - off) & 63)
}

package simd

// byteLanes has the lowest bit of every byte of a word set.
const byteLanes = 0x0101010101010101

// DecrementBytes decrements every byte of w by one, saturating at 0: the
// decrement of a run of 8-bit cells (an SBF with Max=255 decrements P of
// them, 1341 at its default FP rate, for every element).
func DecrementBytes(w []uint64) {
	if Vector() {
		decrementBytesVector(w)
		return
	}
	decrementBytesScalar(w)
}

// decrementBytesScalar is DecrementBytes a word at a time (SWAR: OR-folding
// each byte into its lowest bit flags the non-zero bytes, and subtracting
// the flags cannot borrow across bytes): the twin every build has.
func decrementBytesScalar(w []uint64) {
	for i, x := range w {
		nz := x | x>>1
		nz |= nz >> 2
		nz |= nz >> 4
		w[i] = x - nz&byteLanes
	}
}

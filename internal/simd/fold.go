package simd

import "math/bits"

// avalancheMul is the multiplier of XXH3's avalanche.
const avalancheMul = 0x165667919e3779f9

// Fold9to16 sets dst[i] to the end of XXH3-64's path for inputs of 9 to
// 16 bytes (Yann Collet, xxHash, "XXH3 algorithm") for an input of n
// bytes, whose first and last 8 bytes, keyed by the seed, are lo[i] and
// hi[i]:
//
//	acc := n + bswap64(lo) + hi + fold(lo × hi)   // fold: the 128-bit product's halves xored
//	acc ^= acc >> 37
//	acc *= 0x165667919e3779f9
//	dst[i] = acc ^ acc>>32
//
// dst may be lo or hi. It panics if lo and hi differ in length or dst is
// shorter, before it writes anything.
func Fold9to16(dst, lo, hi []uint64, n uint64) {
	if len(lo) != len(hi) || len(dst) < len(lo) {
		panic("simd: Fold9to16: lo and hi differ in length, or dst is shorter")
	}
	if Vector() {
		fold9to16Vector(dst, lo, hi, n)
		return
	}
	fold9to16Scalar(dst, lo, hi, n)
}

// fold9to16Scalar is Fold9to16 one word at a time: the twin every build
// has.
func fold9to16Scalar(dst, lo, hi []uint64, n uint64) {
	dst = dst[:len(lo)]
	hi = hi[:len(lo)]
	for i, l := range lo {
		h := hi[i]
		ph, pl := bits.Mul64(l, h)
		acc := n + bits.ReverseBytes64(l) + h + (ph ^ pl)
		acc ^= acc >> 37
		acc *= avalancheMul
		dst[i] = acc ^ acc>>32
	}
}

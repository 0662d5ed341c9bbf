package simd

import "math/bits"

// rrmxmxMul is the multiplier of XXH3's rrmxmx finaliser.
const rrmxmxMul = 0x9fb21c651e98df25

// RRMXMX sets dst[i] to XXH3's rrmxmx finaliser of x[i] for an input of n
// bytes: the last step of XXH3-64's path for inputs of 4 to 8 bytes
// (Yann Collet, xxHash, "XXH3 algorithm"), whose x is the input's first
// and last 4 bytes combined and keyed by the seed:
//
//	x ^= rotl(x, 49) ^ rotl(x, 24)
//	x *= 0x9fb21c651e98df25
//	x ^= x>>35 + n
//	x *= 0x9fb21c651e98df25
//	dst[i] = x ^ x>>28
//
// dst may be x itself. It panics if dst is shorter than x, before it
// writes anything.
func RRMXMX(dst, x []uint64, n uint64) {
	if len(dst) < len(x) {
		panic("simd: RRMXMX: dst is shorter than x")
	}
	if Vector() {
		rrmxmxVector(dst, x, n)
		return
	}
	rrmxmxScalar(dst, x, n)
}

// rrmxmxScalar is RRMXMX one word at a time: the twin every build has.
func rrmxmxScalar(dst, x []uint64, n uint64) {
	dst = dst[:len(x)]
	for i, v := range x {
		v ^= bits.RotateLeft64(v, 49) ^ bits.RotateLeft64(v, 24)
		v *= rrmxmxMul
		v ^= v>>35 + n
		v *= rrmxmxMul
		dst[i] = v ^ v>>28
	}
}

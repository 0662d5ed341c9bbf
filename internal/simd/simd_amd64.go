//go:build goexperiment.simd && amd64

package simd

import "simd/archsimd"

// haveVector is whether the CPU has what the vector kernels use: AVX-512
// (F, DQ for VPMULLQ, VL and BW, which archsimd's AVX512 check covers).
var haveVector = archsimd.X86.AVX512()

// vectorBuild is whether this is the GOEXPERIMENT=simd amd64 build.
const vectorBuild = true

// rrmxmxVector is RRMXMX eight words at a time (VPROLQ, VPMULLQ), the
// tail by the scalar twin. The caller has checked haveVector.
func rrmxmxVector(dst, x []uint64, n uint64) {
	dst = dst[:len(x)]
	mul := archsimd.BroadcastUint64x8(rrmxmxMul)
	nv := archsimd.BroadcastUint64x8(n)
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := archsimd.LoadUint64x8Slice(x[i : i+8])
		v = v.Xor(v.RotateAllLeft(49).Xor(v.RotateAllLeft(24)))
		v = v.Mul(mul)
		v = v.Xor(v.ShiftAllRight(35).Add(nv))
		v = v.Mul(mul)
		v = v.Xor(v.ShiftAllRight(28))
		v.StoreSlice(dst[i : i+8])
	}
	rrmxmxScalar(dst[i:], x[i:], n)
}

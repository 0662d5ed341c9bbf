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

// bswap64Index is VPSHUFB's index of a byte swap of every 64-bit lane.
var bswap64Index = func() (ix [64]int8) {
	for i := range ix {
		ix[i] = int8(i&^7 | (7 - i&7))
	}
	return ix
}()

// fold9to16Vector is Fold9to16 eight words at a time, the tail by the
// scalar twin. The 64×64-bit product is four VPMULLQ of 32-bit halves
// (AVX-512 has no widening 64-bit multiply), its middle carries added
// explicitly.
func fold9to16Vector(dst, lo, hi []uint64, n uint64) {
	dst = dst[:len(lo)]
	hi = hi[:len(lo)]
	m32 := archsimd.BroadcastUint64x8(0xffffffff)
	nv := archsimd.BroadcastUint64x8(n)
	mul := archsimd.BroadcastUint64x8(avalancheMul)
	swap := archsimd.LoadInt8x64(&bswap64Index)
	i := 0
	for ; i+8 <= len(lo); i += 8 {
		a := archsimd.LoadUint64x8Slice(lo[i : i+8])
		b := archsimd.LoadUint64x8Slice(hi[i : i+8])
		aL, aH := a.And(m32), a.ShiftAllRight(32)
		bL, bH := b.And(m32), b.ShiftAllRight(32)
		ll := aL.Mul(bL)
		lh := aL.Mul(bH)
		hl := aH.Mul(bL)
		hh := aH.Mul(bH)
		mid := ll.ShiftAllRight(32).Add(lh.And(m32)).Add(hl.And(m32))
		pHi := hh.Add(lh.ShiftAllRight(32)).Add(hl.ShiftAllRight(32)).Add(mid.ShiftAllRight(32))
		pLo := a.Mul(b)
		acc := nv.Add(a.AsUint8x64().PermuteOrZeroGrouped(swap).AsUint64x8()).Add(b).Add(pHi.Xor(pLo))
		acc = acc.Xor(acc.ShiftAllRight(37))
		acc = acc.Mul(mul)
		acc = acc.Xor(acc.ShiftAllRight(32))
		acc.StoreSlice(dst[i : i+8])
	}
	fold9to16Scalar(dst[i:], lo[i:], hi[i:], n)
}

// decrementBytesVector is DecrementBytes 64 bytes at a time (VPSUBUSB),
// the tail by the scalar twin.
func decrementBytesVector(w []uint64) {
	one := archsimd.BroadcastUint8x64(1)
	i := 0
	for ; i+8 <= len(w); i += 8 {
		v := archsimd.LoadUint64x8Slice(w[i : i+8]).AsUint8x64()
		v.SubSaturated(one).AsUint64x8().StoreSlice(w[i : i+8])
	}
	decrementBytesScalar(w[i:])
}

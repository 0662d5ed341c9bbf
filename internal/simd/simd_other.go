//go:build !(goexperiment.simd && amd64)

package simd

// haveVector is false: this build has no vector path (it is not
// GOEXPERIMENT=simd on amd64).
const haveVector = false

// vectorBuild is whether this is the GOEXPERIMENT=simd amd64 build.
const vectorBuild = false

func rrmxmxVector(dst, x []uint64, n uint64) { rrmxmxScalar(dst, x, n) }

func fold9to16Vector(dst, lo, hi []uint64, n uint64) { fold9to16Scalar(dst, lo, hi, n) }

func decrementBytesVector(w []uint64) { decrementBytesScalar(w) }

// Package simd holds the vector kernels of flowdedup's batch paths and
// their scalar twins.
//
// Every kernel is a function over slices with one answer, bit for bit,
// whichever path computes it. Two builds exist:
//
//   - GOEXPERIMENT=simd on amd64 (simd_amd64.go): the kernels use Go's
//     simd/archsimd (AVX-512) when the CPU has it, checked once at start
//     with archsimd.X86, and the scalar twin otherwise;
//   - every other build and architecture (simd_other.go), the release
//     build included: the scalar twin only.
//
// The tests compare each kernel with its scalar twin on random and edge
// inputs, and the scalar twins with an independent reference (the xxh3
// library for the hash kernels). The benchmarks come in pairs,
// BenchmarkX/scalar and BenchmarkX/vector; docs/decisions/no-simd.md
// records which kernels were kept and the figures behind it.
//
// Kernels never allocate, and use no unsafe code.
package simd

import "sync/atomic"

// off turns the vector paths off (tests and benchmarks compare the two
// paths through the callers' batch functions): see SetVector.
var off atomic.Bool

// Vector reports whether the kernels take their vector path: the build has
// one, the CPU has the features it needs, and SetVector has not turned it
// off.
func Vector() bool { return haveVector && !off.Load() }

// Available reports whether this build and CPU have the vector path,
// whatever SetVector says.
func Available() bool { return haveVector }

// SetVector turns the vector paths on (the default, where available) or off,
// and returns the previous setting, for tests and benchmarks that compare a
// batch function's answers and time with and without the kernels. It is
// safe to call concurrently with the kernels: each call of a kernel takes
// one path.
func SetVector(on bool) (was bool) { return !off.Swap(!on) }

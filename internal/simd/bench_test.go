package simd

import (
	"math/rand/v2"
	"testing"
)

// benchBatch is the pipeline's batch (pipeline.BatchSize): the kernels'
// benchmarks time one batch per op and report ns per word as well.
const benchBatch = 256

// benchPair runs the scalar and the vector function of a kernel as
// sub-benchmarks "scalar" and "vector", one batch of words an op; vector
// skips on a build or CPU without the vector path.
func benchPair(b *testing.B, scalar, vector func()) { benchPairN(b, benchBatch, scalar, vector) }

// benchPairN is benchPair for n words an op.
func benchPairN(b *testing.B, n int, scalar, vector func()) {
	run := func(b *testing.B, f func()) {
		b.ReportAllocs()
		for b.Loop() {
			f()
		}
		b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/float64(n), "ns/word")
	}
	b.Run("scalar", func(b *testing.B) { run(b, scalar) })
	b.Run("vector", func(b *testing.B) {
		if !Available() {
			b.Skip("no vector path in this build or on this CPU (GOEXPERIMENT=simd on amd64 with AVX-512)")
		}
		run(b, vector)
	})
}

func BenchmarkRRMXMX(b *testing.B) {
	x := randomWords(rand.New(rand.NewPCG(7, 8)), benchBatch)
	dst := make([]uint64, benchBatch)
	benchPair(b, func() { rrmxmxScalar(dst, x, 5) }, func() { rrmxmxVector(dst, x, 5) })
}

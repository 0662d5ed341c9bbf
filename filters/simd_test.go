package filters

import (
	"fmt"
	"slices"
	"testing"

	"github.com/flowdedup/flowdedup/internal/simd"
	"github.com/flowdedup/flowdedup/mix"
)

// TestSBFBatchBytesKernel checks that an SBF of 8-bit cells answers and
// ends in the same state through ObserveAll (observeBytes: the decrement
// run's whole words by simd.DecrementBytes), with the vector kernels on
// and off, as one Observe at a time, batch after batch, on runs that wrap at the
// array's end, start and end inside a word or on its edge, and span
// many words; and that cells of other widths are untouched by the switch.
func TestSBFBatchBytesKernel(t *testing.T) {
	specs := []string{
		"sbf:mem=1MiB,max=255", // P=1341, the default FP rate
		"sbf:mem=4KiB,max=255,k=2,p=1341",
		"sbf:mem=4KiB,max=255,k=3,p=4000", // nearly the whole array
		"sbf:mem=4KiB,max=255,k=2,p=7",    // within a word or two
		"sbf:mem=4KiB,max=255,k=2,p=64",
		"sbf:mem=4KiB,max=255,k=2,p=8",
		"sbf:mem=4KiB,max=255,k=2,p=4096", // every cell
		"sbf:mem=4KiB,max=255,k=2,p=0",
		"sbf:mem=4KiB,max=15,k=2,p=300",
		"sbf:mem=4KiB,max=1,k=2,p=300",
	}
	was := simd.SetVector(true)
	defer simd.SetVector(was)
	r := mix.NewWyrand(77)
	for _, spec := range specs {
		for _, vec := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/vector=%v", spec, vec), func(t *testing.T) {
				simd.SetVector(vec)
				one, err := New(spec, 5)
				if err != nil {
					t.Fatal(err)
				}
				batch, _ := New(spec, 5)
				// Hashes drawn from a small universe, so that repeats (and
				// duplicates) come often; batches of every length to 300.
				universe := make([]uint64, 3000)
				for i := range universe {
					universe[i] = r.Uint64()
				}
				for round := range 60 {
					hs := make([]uint64, round*5)
					for i := range hs {
						hs[i] = universe[r.IntN(len(universe))]
					}
					want := make([]bool, len(hs))
					for i, h := range hs {
						want[i] = one.Observe(h)
					}
					got := make([]bool, len(hs))
					ObserveAll(batch, hs, got)
					if !slices.Equal(got, want) {
						t.Fatalf("round %d: ObserveAll's answers differ from Observe's", round)
					}
					a, b := one.(*SBF), batch.(*SBF)
					if !slices.Equal(a.cells.words, b.cells.words) || a.rng != b.rng {
						t.Fatalf("round %d: states differ after the batch", round)
					}
				}
			})
		}
	}
}

// BenchmarkSBFBytesBatch is ObserveAll on an SBF of 8-bit cells at its
// default FP rate (P=1341 cells decremented per element) with the vector
// kernels off (scalar: DecrementBytes's SWAR twin) and on (vector), and,
// for reference, one Observe at a time (observe: Observe's own decrement,
// what the batch path did before), 256 hashes a batch, each from a new
// filter given the same hashes.
func BenchmarkSBFBytesBatch(b *testing.B) {
	for _, mem := range []string{"64KiB", "1MiB"} {
		spec := fmt.Sprintf("sbf:mem=%s,max=255", mem)
		b.Run(mem, func(b *testing.B) {
			for _, mode := range []string{"observe", "scalar", "vector"} {
				vec := mode == "vector"
				b.Run(mode, func(b *testing.B) {
					if vec && !simd.Available() {
						b.Skip("no vector path in this build or on this CPU (GOEXPERIMENT=simd on amd64 with AVX-512)")
					}
					was := simd.SetVector(vec)
					defer simd.SetVector(was)
					f, err := New(spec, 1)
					if err != nil {
						b.Fatal(err)
					}
					hs := benchHashes()
					for _, h := range hs[:1<<16] {
						f.Observe(h)
					}
					var dup [benchBatch]bool
					i := 1 << 16
					b.ReportAllocs()
					s := f.(*SBF)
					for b.Loop() {
						batch := hs[i : i+benchBatch]
						if mode == "observe" {
							for j, h := range batch {
								dup[j] = s.Observe(h)
							}
						} else {
							ObserveAll(f, batch, dup[:])
						}
						i = (i + benchBatch) & (len(hs) - 1)
					}
					b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/benchBatch, "ns/key")
				})
			}
		})
	}
}

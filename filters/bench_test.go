package filters

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/flowdedup/flowdedup/mix"
)

// benchHashes are precomputed random hashes: the benchmarks time Observe,
// not hashing or the RNG. 4M distinct hashes cycle (read sequentially, so
// the prefetcher hides their own cost): at 64 MiB of state they touch cells
// all over the array, so cache misses are measured, and no filter sees the
// same hash twice within one pass of its state's capacity.
var benchHashes = sync.OnceValue(func() []uint64 {
	r := mix.NewWyrand(42)
	hs := make([]uint64, 1<<22)
	for i := range hs {
		hs[i] = r.Uint64()
	}
	return hs
})

// benchFilters are the filters the benchmarks measure at each size: every
// registered family but exact at its default parameters, each followed by
// its blocked layout when it has one ("bloom:blocked=1"), so that the two
// are measured side by side. name is the spec without mem.
func benchFilters() []string {
	var names []string
	for _, f := range Families() {
		if f.Name == "exact" {
			continue // unbounded; not a streaming filter
		}
		names = append(names, f.Name)
		for _, p := range f.Params {
			if p.Name == "blocked" {
				names = append(names, f.Name+":blocked=1")
			}
		}
	}
	return names
}

// benchSpec is the spec of name (a family, or a family with parameters)
// at mem.
func benchSpec(name, mem string) string {
	fam, params, ok := strings.Cut(name, ":")
	if !ok {
		return name + ":mem=" + mem
	}
	return fam + ":mem=" + mem + "," + params
}

// BenchmarkObserve measures every registered filter (default parameters) at
// three state sizes: 64 KiB and 1 MiB fit in L2 on common servers, 64 MiB
// does not fit in any cache here.
func BenchmarkObserve(b *testing.B) {
	for _, mem := range []string{"64KiB", "1MiB", "64MiB"} {
		for _, name := range benchFilters() {
			spec := benchSpec(name, mem)
			b.Run(fmt.Sprintf("%s/%s", name, mem), func(b *testing.B) {
				benchObserve(b, spec)
			})
		}
	}
	// The settings the README quotes.
	for _, spec := range []string{"sbf:mem=1MiB,max=1,k=2,p=4", "qht:mem=1MiB,buckets=4,fpbits=8", "qqhtd:mem=1MiB,buckets=4,fpbits=8"} {
		b.Run(spec, func(b *testing.B) { benchObserve(b, spec) })
	}
}

func benchObserve(b *testing.B, spec string) {
	f, hs := benchFilter(b, spec)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		f.Observe(hs[i&(len(hs)-1)])
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mops/s")
}

// benchFilter builds spec and warms it with the first 2^20 benchmark
// hashes: state populated, pages touched.
func benchFilter(b *testing.B, spec string) (Filter, []uint64) {
	f, err := New(spec, 1)
	if err != nil {
		b.Fatal(err)
	}
	hs := benchHashes()
	for _, h := range hs[:1<<20] {
		f.Observe(h)
	}
	return f, hs
}

// benchBatch is the pipeline's batch size (pipeline.BatchSize).
const benchBatch = 256

// BenchmarkObserveBatch compares, on BenchmarkObserve's stream, one
// Observe at a time ("one") with ObserveAll ("batch"), 256 hashes (the
// pipeline's batch) per iteration, run back to back for each filter and
// size so that the two are measured under the same load. The families with
// a BatchObserver request the lines of a batch's hashes before observing
// them, once the state is larger than the L2 cache; the others loop. ns/key
// is per hash (comparable with BenchmarkObserve's ns/op); allocs/op is per
// batch. exact is measured holding the 4M hashes of the stream, a 64 MiB
// table, where every hash is a duplicate. The blocked layouts
// (bloom:blocked=1, sbf:blocked=1) touch one line per key; their 64 MiB
// batch figures are the ones to hold against BenchmarkRandomLines.
func BenchmarkObserveBatch(b *testing.B) {
	for _, mem := range []string{"64KiB", "1MiB", "64MiB"} {
		for _, name := range benchFilters() {
			spec := benchSpec(name, mem)
			b.Run(fmt.Sprintf("%s/%s", name, mem), func(b *testing.B) {
				benchObserveBatch(b, spec, 1<<20)
			})
		}
	}
	b.Run("exact/64MiB", func(b *testing.B) { benchObserveBatch(b, "exact", 1<<22) })
}

// benchObserveBatch times "one" and then "batch" on one filter built from
// spec, each from the same start: the filter reset and given the first
// warm hashes of the stream, then the stream from there. One filter, not
// one for each: on the virtual machine this was measured on, a second
// 64 MiB filter built after the first ran up to twice as slow as the
// first, whichever path timed it (where its fresh memory landed, not the
// path). Reset and the same warm hashes make the two starts identical,
// random choices included.
func benchObserveBatch(b *testing.B, spec string, warm int) {
	hs := benchHashes()
	prefetchAbove() // read the L2 size now, not in the timed loop
	f, err := New(spec, 1)
	if err != nil {
		b.Fatal(err)
	}
	var dup [benchBatch]bool
	run := func(b *testing.B, observe func([]uint64)) {
		f.Reset()
		for j := range warm {
			f.Observe(hs[j&(len(hs)-1)])
		}
		i := warm & (len(hs) - 1) &^ (benchBatch - 1)
		b.ReportAllocs()
		for b.Loop() {
			observe(hs[i : i+benchBatch])
			i = (i + benchBatch) & (len(hs) - 1)
		}
		keys := float64(b.N) * benchBatch
		b.ReportMetric(b.Elapsed().Seconds()*1e9/keys, "ns/key")
	}
	b.Run("one", func(b *testing.B) {
		run(b, func(batch []uint64) {
			for i, h := range batch {
				dup[i] = f.Observe(h)
			}
		})
	})
	b.Run("batch", func(b *testing.B) {
		run(b, func(batch []uint64) { ObserveAll(f, batch, dup[:]) })
	})
}

// BenchmarkRandomLines is the memory floor under the 64 MiB figures, and
// the measurement behind the batch path's use of PREFETCHT0: per key, one
// random word of 64 MiB is read and written back (as a Bloom filter sets a
// bit), 256 keys a batch. "one" goes key after key, as Observe does;
// "prefetch" requests the lines a stretch ahead as the batch path does
// (stretches, lineBuf, prefetch); "load" does the same with plain loads
// (prefetchLoad, the fallback of other architectures). A filter that
// touches L random lines per key cannot observe faster than L times the
// "prefetch" figure.
func BenchmarkRandomLines(b *testing.B) {
	words := make([]uint64, 8<<20) // 64 MiB
	for i := range words {
		words[i] = uint64(i)
	}
	hs := benchHashes()
	var dup [benchBatch]bool
	for _, mode := range []string{"one", "prefetch", "load"} {
		b.Run(mode+"/64MiB", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				batch := hs[i : i+benchBatch]
				i = (i + benchBatch) & (len(hs) - 1)
				if mode == "one" {
					for _, h := range batch {
						words[mix.Reduce(h, len(words))] ^= h
					}
					continue
				}
				for s := range stretches(batch, dup[:], math.MaxInt) {
					var buf lineBuf
					n := 0
					for _, h := range s.ahead {
						n = buf.word(n, words, mix.Reduce(h, len(words)))
					}
					if mode == "prefetch" {
						buf.flush(n)
					} else {
						prefetchLoad(buf[:n])
					}
					for _, h := range s.hashes {
						words[mix.Reduce(h, len(words))] ^= h
					}
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e9/(float64(b.N)*benchBatch), "ns/line")
		})
	}
}

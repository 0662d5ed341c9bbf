package filters

import (
	"fmt"
	"sync"
	"testing"

	"github.com/flowdedup/flowdedup/internal/mix"
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

// BenchmarkObserve measures every registered filter (default parameters) at
// three state sizes: 64 KiB and 1 MiB fit in L2 on common servers, 64 MiB
// does not fit in any cache here.
func BenchmarkObserve(b *testing.B) {
	for _, mem := range []string{"64KiB", "1MiB", "64MiB"} {
		for _, f := range Families() {
			if f.Name == "exact" {
				continue // unbounded; not a streaming filter
			}
			spec := f.Name + ":mem=" + mem
			b.Run(fmt.Sprintf("%s/%s", f.Name, mem), func(b *testing.B) {
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
	f, err := New(spec, 1)
	if err != nil {
		b.Fatal(err)
	}
	hs := benchHashes()
	for _, h := range hs[:1<<20] { // warm: state populated, pages touched
		f.Observe(h)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		f.Observe(hs[i&(len(hs)-1)])
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mops/s")
}

package filters

import (
	"testing"

	"github.com/flowdedup/flowdedup/mix"
)

// Reset makes each baseline answer as one fresh from New with the same
// seed, element for element: state cleared, random source (FPBuffering's
// coin, the cuckoo filter's kicks) rewound, A2's insertion count restarted.
// The stream repeats often and runs the cuckoo table past saturation, A2
// through swaps and b_DBF past its window. (Which buffer is active1 after
// Reset, and where b_DBF's decay cursor starts, cannot change an answer:
// both buffers are empty, and the lifetimes are exact for any phase.)
func TestBaselinesResetReplays(t *testing.T) {
	for _, spec := range []string{
		"fpbuffer:entries=300,q=0.2",
		"cuckoo:mem=1KiB,buckets=2,fpbits=6", // 64 buckets: saturated
		"a2:mem=2KiB",                        // capacity 1300: swaps
		"bdbf:mem=4KiB,window=500",
	} {
		f, err := New(spec, 5)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := New(spec, 5)
		if err != nil {
			t.Fatal(err)
		}
		r := mix.NewWyrand(6)
		hs := make([]uint64, 5000)
		for i := range hs {
			hs[i] = mix.Mix64(uint64(r.IntN(2000)))
			f.Observe(hs[i])
		}
		f.Reset()
		for i, h := range hs {
			if got, want := f.Observe(h), fresh.Observe(h); got != want {
				t.Fatalf("%s: step %d after Reset: %v, a fresh filter says %v", spec, i, got, want)
			}
		}
	}
}

// BenchmarkBaselinesObserve times the four baselines at two sizes that fit
// in L2, each warmed past saturation first (the cuckoo filter's steady
// state is the relocation that gives up after 500 kicks, the A2's includes
// its swaps, the b_DBF's its decay), on precomputed distinct hashes.
func BenchmarkBaselinesObserve(b *testing.B) {
	for _, mem := range []string{"64KiB", "1MiB"} {
		for _, name := range []string{"fpbuffer", "cuckoo", "a2", "bdbf"} {
			spec := name + ":mem=" + mem
			b.Run(name+"/"+mem, func(b *testing.B) {
				f, err := New(spec, 1)
				if err != nil {
					b.Fatal(err)
				}
				hs := benchHashes()
				// Two elements per 3 bits of state (at most the 4M hashes)
				// fill every one of them: the cuckoo's 3-bit slots twice
				// over, A2's buffers and b_DBF's window many times.
				warm := min(len(hs), 2*f.SizeBits()/3)
				for _, h := range hs[:warm] {
					f.Observe(h)
				}
				b.ReportAllocs()
				i := warm
				for b.Loop() {
					f.Observe(hs[i&(len(hs)-1)])
					i++
				}
			})
		}
	}
}

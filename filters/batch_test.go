package filters

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// batchSpecs cover every family and the shapes its code branches on: row
// widths below, at and above a word (straddling words or not), cell widths
// that divide 64 or not, decrement runs within a word, across many and
// wrapping at the end, every RSBF phase, tables that fill up and relocate.
// Memories are small so that the stream fills the filters and reaches
// their full-state paths (replacements, evictions, kicks, swaps).
var batchSpecs = []string{
	"qht:mem=2KiB", "qht:mem=2KiB,buckets=3,fpbits=3", "qht:mem=2KiB,buckets=1,fpbits=1",
	"qht:mem=4KiB,buckets=4,fpbits=8", "qht:mem=4KiB,buckets=7,fpbits=9",
	"qht:mem=4KiB,buckets=5,fpbits=13", "qht:mem=8KiB,buckets=16,fpbits=8",
	"qht:mem=64KiB,buckets=64,fpbits=32", "qht:mem=3001bit,buckets=1,fpbits=32",
	"qhtd:mem=2KiB", "qhtd:mem=4KiB,buckets=4,fpbits=8", "qhtd:mem=4KiB,buckets=7,fpbits=9",
	"qhtd:mem=8KiB,buckets=16,fpbits=8",
	"qqhtd:mem=2KiB", "qqhtd:mem=4KiB,buckets=4,fpbits=8", "qqhtd:mem=4KiB,buckets=5,fpbits=13",
	"qqhtd:mem=8KiB,buckets=16,fpbits=8",
	"sqf:mem=2KiB", "sqf:mem=4KiB,buckets=4,r=8,rprime=3", "sqf:mem=4KiB,buckets=8,r=16,rprime=4",
	"sqf:mem=8KiB,buckets=3,r=32,rprime=31",
	"isqf:mem=2KiB", "isqf:mem=4KiB,tables=1", "isqf:mem=8KiB,buckets=4,r=8,rprime=3,tables=5",
	"isqf:mem=16KiB,buckets=8,r=16,rprime=4,tables=16",
	"bloom:mem=2KiB", "bloom:mem=2KiB,k=1", "bloom:mem=64KiB,k=7", "bloom:mem=1001bit,k=3",
	"bloom:mem=2KiB,blocked=1", "bloom:mem=2KiB,k=1,blocked=1", "bloom:mem=1001bit,k=9,blocked=1",
	"bloom:mem=4KiB,k=64,blocked=1",
	"sbf:mem=2KiB,blocked=1", "sbf:mem=2KiB,max=1,k=1,p=1,blocked=1", "sbf:mem=2KiB,max=1,k=5,p=0,blocked=1",
	"sbf:mem=2KiB,max=1,k=2,p=500,blocked=1", "sbf:mem=1000bit,max=1,k=3,p=512,blocked=1",
	"sbf:mem=2KiB,max=3,k=2,p=4,blocked=1", "sbf:mem=4KiB,max=3,k=3,p=200,blocked=1",
	"sbf:mem=4KiB,max=7,k=2,p=9,blocked=1", "sbf:mem=4KiB,max=7,k=5,p=170,blocked=1",
	"sbf:mem=4KiB,max=15,k=2,p=20,blocked=1", "sbf:mem=8KiB,max=255,k=4,p=40,blocked=1",
	"sbf:mem=4KiB,max=31,k=9,p=3,blocked=1", "sbf:mem=2KiB,max=7,k=2,fps=0.2,blocked=1", "sbf:mem=2KiB,max=127,k=2,p=73,blocked=1",
	"sbf:mem=2KiB", "sbf:mem=2KiB,max=1,k=1,p=1", "sbf:mem=2KiB,max=1,k=2,p=0",
	"sbf:mem=2KiB,max=1,k=2,p=700", "sbf:mem=1000bit,max=1,k=3,p=999",
	"sbf:mem=2KiB,max=3,k=2,p=4", "sbf:mem=4KiB,max=3,k=3,p=300", "sbf:mem=4KiB,max=7,k=2,p=9",
	"sbf:mem=4KiB,max=7,k=5,p=200", "sbf:mem=4KiB,max=15,k=2,p=20", "sbf:mem=8KiB,max=255,k=4,p=40",
	"sbf:mem=2KiB,max=127,k=2,fps=0.2",
	"fpsbf:mem=2KiB", "fpsbf:mem=4KiB,c=1,f=1,k=1", "fpsbf:mem=4KiB,c=8,f=32,k=3",
	"fpsbf:mem=4KiB,c=3,f=6,k=5,xi=0.5", "fpsbf:mem=8KiB,c=2,f=11,k=2,fps=0.3,xi=0.25",
	"rsbf:mem=1KiB", "rsbf:mem=1KiB,k=2,pstar=0.5", "rsbf:mem=300bit,k=1,pstar=0.9",
	"rsbf:mem=2KiB,k=5,pstar=0",
	"bsbf:mem=2KiB", "bsbf:mem=2KiB,k=1", "bsbf:mem=4KiB,k=5", "bsbf:mem=999bit,k=3",
	"bsbfsd:mem=2KiB", "bsbfsd:mem=4KiB,k=4",
	"rlbsbf:mem=2KiB", "rlbsbf:mem=4KiB,k=1", "rlbsbf:mem=4KiB,k=6",
	"lru:entries=1", "lru:entries=2", "lru:entries=100", "lru:mem=2KiB", "lru:entries=5000",
	"fpbuffer:entries=3", "fpbuffer:mem=2KiB", "fpbuffer:mem=2KiB,q=0", "fpbuffer:entries=100,q=0.9",
	"cuckoo:mem=2KiB", "cuckoo:mem=4KiB,buckets=4,fpbits=16", "cuckoo:mem=4KiB,buckets=2,fpbits=12",
	"cuckoo:mem=8KiB,buckets=64,fpbits=32", "cuckoo:mem=3bit",
	"a2:mem=2KiB", "a2:mem=4KiB,fpr=0.5", "a2:mem=8KiB,fpr=0.01",
	"bdbf:mem=2KiB", "bdbf:mem=4KiB,window=1", "bdbf:mem=8KiB,window=100", "bdbf:mem=64KiB,window=6000",
	"exact",
}

// withoutBatchPath are the families whose Observe is as fast alone as
// with lines requested ahead (see batch.go), so they have no BatchObserver
// and ObserveAll loops over them.
var withoutBatchPath = map[string]bool{"a2": true}

// batchStream returns n hashes with duplicates at every distance: a third
// repeat one of the last 40 (most of them in the same batch, some right
// after their first occurrence), a sixth come from a set of 500 that recur
// across batches, and the rest are new; a few are the values filters treat
// specially (0, all ones, a low word of zeros).
func batchStream(n int, seed uint64) []uint64 {
	r := rand.New(rand.NewPCG(seed, 0x6261746368))
	recurring := make([]uint64, 500)
	for i := range recurring {
		recurring[i] = r.Uint64()
	}
	hs := make([]uint64, n)
	for i := range hs {
		switch x := r.IntN(100); {
		case x < 33 && i > 0:
			hs[i] = hs[max(0, i-1-r.IntN(40))]
		case x < 50:
			hs[i] = recurring[r.IntN(len(recurring))]
		case x < 51:
			hs[i] = []uint64{0, ^uint64(0), 1 << 40, 0xffffffff00000000}[r.IntN(4)]
		default:
			hs[i] = r.Uint64()
		}
	}
	return hs
}

// batchSizes splits n hashes into batches: first the sizes around the
// stretch length and the pipeline's batch (0 included), then random sizes
// in 1..512.
func batchSizes(n int, seed uint64) []int {
	fixed := []int{0, 1, 2, 3, batchAhead - 1, batchAhead, batchAhead + 1, 2*batchAhead - 1,
		2 * batchAhead, 2*batchAhead + 1, 3*batchAhead + 5, 100, 255, 256, 257, 511, 512}
	r := rand.New(rand.NewPCG(seed, 0x73697a6573))
	var sizes []int
	for total, i := 0, 0; total < n; i++ {
		sz := 1 + r.IntN(512)
		if i < len(fixed) {
			sz = fixed[i]
		}
		sz = min(sz, n-total)
		sizes = append(sizes, sz)
		total += sz
	}
	return sizes
}

// alwaysPrefetch makes the batch path request lines ahead whatever the
// filter's size, so that the small filters of the tests run it, and
// restores the L2 threshold when the test ends.
func alwaysPrefetch(t *testing.T) {
	old := prefetchAbove
	prefetchAbove = func() int { return 0 }
	t.Cleanup(func() { prefetchAbove = old })
}

// TestObserveBatchEqualsObserve is the batch path's contract: for every
// family and parameter shape, ObserveAll (ObserveBatch for every family but
// those in withoutBatchPath) over a stream cut into batches of 0 to 512
// hashes gives the answers of Observe one at a time, hash for hash, and
// leaves the filter in the same state, field for field (reflect.DeepEqual
// walks the state words, counters, queues, tables and the random
// generator), after every batch. The filters are small, so they are run
// both as they are (below the L2 size, one plain loop) and with lines
// requested ahead.
func TestObserveBatchEqualsObserve(t *testing.T) {
	t.Run("plain", testObserveBatchEqualsObserve)
	t.Run("prefetch", func(t *testing.T) {
		alwaysPrefetch(t)
		testObserveBatchEqualsObserve(t)
	})
}

func testObserveBatchEqualsObserve(t *testing.T) {
	const n = 30000
	covered := map[string]bool{}
	for si, spec := range batchSpecs {
		one, err := New(spec, uint64(si)+1)
		if err != nil {
			t.Fatalf("New(%q): %v", spec, err)
		}
		many, _ := New(spec, uint64(si)+1)
		name := strings.SplitN(spec, ":", 2)[0]
		covered[name] = true
		if _, ok := many.(BatchObserver); ok == withoutBatchPath[name] {
			t.Errorf("%s: %T implements BatchObserver: %v; want %v", spec, many, ok, !ok)
		}
		n := n
		if name == "cuckoo" {
			// A cuckoo filter here is full within its first 2731
			// distinct hashes (the largest, 4KiB of 12-bit
			// fingerprints, has 2730 slots), and from then on every
			// unseen hash costs Fan et al.'s 500 kicks, three
			// quarters of this test's CPU at 30000. 10000 hashes,
			// about 5000 of them unseen, still run each one
			// thousands of hashes past full.
			n = 10000
		}
		hs := batchStream(n, uint64(si))
		dup := make([]bool, 512)
		at, dups := 0, 0
		for bi, sz := range batchSizes(n, uint64(si)) {
			batch := hs[at : at+sz]
			ObserveAll(many, batch, dup)
			for i, h := range batch {
				if want := one.Observe(h); dup[i] != want {
					t.Fatalf("%s: batch %d (size %d), hash %d (stream %d): ObserveAll says dup=%v, Observe says %v",
						spec, bi, sz, i, at+i, dup[i], want)
				}
				if dup[i] {
					dups++
				}
			}
			// Every batch's states compared, or in -short mode (make
			// test-32bit under qemu-arm, where comparing the states is
			// most of the test's 15 minutes) every 16th and the last.
			if (!testing.Short() || bi%16 == 0 || at+sz == n) && !reflect.DeepEqual(one, many) {
				t.Fatalf("%s: after batch %d (size %d, stream %d..%d) the states differ", spec, bi, sz, at, at+sz)
			}
			at += sz
		}
		// The stream must exercise both answers, or the comparison proves
		// little.
		if dups == 0 || dups == n {
			t.Errorf("%s: %d of %d hashes were duplicates: the stream does not test both answers", spec, dups, n)
		}
	}
	for _, f := range Families() {
		if !covered[f.Name] {
			t.Errorf("family %s has no spec in batchSpecs", f.Name)
		}
	}
}

// A hash repeated within a batch is a duplicate the second time, as it is
// one at a time: the batch path observes in order, not from a snapshot.
func TestObserveBatchSeesEarlierHashesOfTheBatch(t *testing.T) {
	alwaysPrefetch(t)
	h := testHash(1, 99)
	for _, spec := range testSpecs("64KiB") {
		f, err := New(spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		hs := []uint64{h, h, testHash(2, 99), h}
		dup := make([]bool, len(hs))
		ObserveAll(f, hs, dup)
		if dup[0] || !dup[1] || !dup[3] {
			t.Errorf("%s: dup = %v for h, h, other, h; want false, true, ?, true", spec, dup)
		}
	}
}

// The batch path, and ObserveAll's loop, allocate nothing (exact grows, so
// it is left out).
func TestObserveBatchNoAllocs(t *testing.T) {
	alwaysPrefetch(t)
	hs := batchStream(512, 3)
	dup := make([]bool, len(hs))
	for _, spec := range batchSpecs {
		if spec == "exact" {
			continue
		}
		f, err := New(spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		if a := testing.AllocsPerRun(20, func() { ObserveAll(f, hs, dup) }); a != 0 {
			t.Errorf("%s: ObserveAll of %d hashes allocates %v times", spec, len(hs), a)
		}
	}
}

// plainFilter hides a filter's batch path: only Filter's methods.
type plainFilter struct{ Filter }

// batchSpy records how ObserveAll calls it.
type batchSpy struct {
	Filter
	observes, batches int
}

func (s *batchSpy) Observe(h uint64) bool { s.observes++; return s.Filter.Observe(h) }

func (s *batchSpy) ObserveBatch(hs []uint64, dup []bool) {
	s.batches++
	s.Filter.(BatchObserver).ObserveBatch(hs, dup)
}

func TestObserveAll(t *testing.T) {
	alwaysPrefetch(t)
	hs := batchStream(1000, 5)
	for _, spec := range []string{"qht:mem=2KiB", "sbf:mem=2KiB", "lru:entries=50"} {
		ref, _ := New(spec, 7)
		want := make([]bool, len(hs))
		for i, h := range hs {
			want[i] = ref.Observe(h)
		}

		// Without a batch path: one Observe at a time.
		inner, _ := New(spec, 7)
		plain := &batchSpy{Filter: plainFilter{inner}}
		got := make([]bool, len(hs))
		ObserveAll(plainFilter{plain}, hs, got)
		if !reflect.DeepEqual(got, want) || plain.observes != len(hs) {
			t.Errorf("%s without a batch path: %d Observes, answers equal: %v; want %d, true",
				spec, plain.observes, reflect.DeepEqual(got, want), len(hs))
		}

		// With one: a single ObserveBatch, no Observe through the filter's
		// interface.
		inner, _ = New(spec, 7)
		spy := &batchSpy{Filter: inner}
		clear(got)
		ObserveAll(spy, hs, got)
		if !reflect.DeepEqual(got, want) || spy.batches != 1 || spy.observes != 0 {
			t.Errorf("%s with a batch path: %d ObserveBatch, %d Observe, answers equal: %v; want 1, 0, true",
				spec, spy.batches, spy.observes, reflect.DeepEqual(got, want))
		}
		if !reflect.DeepEqual(inner, ref) {
			t.Errorf("%s: state after ObserveAll differs from Observe's", spec)
		}
	}
}

// A dup slice shorter than the hashes is a programming error: both paths
// panic, and before observing anything.
func TestObserveAllShortDupPanics(t *testing.T) {
	for _, spec := range []string{"qht:mem=2KiB", "exact"} {
		for _, wrap := range []bool{false, true} {
			f, _ := New(spec, 1)
			fresh, _ := New(spec, 1)
			var g Filter = f
			if wrap {
				g = plainFilter{f}
			}
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s (batch path hidden: %v): no panic for a short dup", spec, wrap)
					}
				}()
				ObserveAll(g, []uint64{1, 2, 3}, make([]bool, 2))
			}()
			if !reflect.DeepEqual(f, fresh) {
				t.Errorf("%s (batch path hidden: %v): observed hashes before panicking", spec, wrap)
			}
		}
	}
}

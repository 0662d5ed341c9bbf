package filters

import (
	"sync"
	"unsafe"
)

// BatchObserver is implemented by filters that observe a batch of hashes
// faster than one at a time once their state is larger than the CPU's
// caches: ObserveBatch works out the cells that a stretch of the batch will
// read or write and requests those cache lines before it observes the
// hashes, so that many cache misses are in flight together instead of one
// after the other. (A state that fits in the L2 cache is observed with a
// plain loop: requesting its lines would only add work.)
//
// ObserveBatch(hashes, dup) is exactly
//
//	for i, h := range hashes { dup[i] = f.Observe(h) }
//
// in answers and in the state it leaves behind, random choices included: a
// hash seen earlier in the same batch is a duplicate as it would be one at
// a time, and the filter's generator is drawn in the same order. Only the
// time differs. It panics if dup is shorter than hashes, before it observes
// anything.
//
// The caller owns both slices: ObserveBatch reads hashes, writes
// dup[:len(hashes)], and keeps neither after it returns. It allocates
// nothing.
//
// Use ObserveAll to take the batch path when a filter has one.
type BatchObserver interface {
	ObserveBatch(hashes []uint64, dup []bool)
}

// ObserveAll observes hashes with f in order and sets dup[i] to whether
// hashes[i] was reported a duplicate: through f's BatchObserver when it has
// one, else one Observe at a time. The answers and f's state afterwards are
// the same either way. It panics if dup is shorter than hashes, before it
// observes anything. The caller owns both slices.
func ObserveAll(f Filter, hashes []uint64, dup []bool) {
	if b, ok := f.(BatchObserver); ok {
		b.ObserveBatch(hashes, dup)
		return
	}
	checkBatch(hashes, dup)
	for i, h := range hashes {
		dup[i] = f.Observe(h)
	}
}

func checkBatch(hashes []uint64, dup []bool) {
	if len(dup) < len(hashes) {
		panic("filters: ObserveBatch: dup is shorter than hashes")
	}
}

// batchAhead is how many hashes the batch path requests lines for before it
// observes them: it requests the lines of hashes [i+batchAhead, i+2*batchAhead)
// and then observes [i, i+batchAhead), so each request has a stretch of
// observing to complete in. At 64 MiB (qht, bloom, sbf, a2, fpsbf),
// stretches of 4, 8, 16 and 32 hashes requested one, two or four stretches
// ahead measured within noise of one another, and 16 one ahead was never
// worse: the misses in flight are bounded by the CPU's fill buffers, not by
// how far ahead they are asked for.
const batchAhead = 16

// prefetchAbove is the state size in bits above which the batch path
// requests lines ahead: this CPU's L2 cache. A state that fits in L2 hits
// it anyway, and requesting its lines only added work (up to 50% more time
// per key for an SBF at 1 and 2 MiB, with a 2 MiB L2); at 4 MiB the two
// measured alike, and from 8 MiB on requesting lines ahead won (qht 39 ->
// 19 ns per key, sbf 50 -> 35). Tests set it to 0 to run the prefetching
// path on small filters.
var prefetchAbove = sync.OnceValue(L2CacheBits)

// stretch is one step of a batch path: observe hashes into dup, after
// requesting the lines of ahead, the hashes observed next.
type stretch struct {
	hashes []uint64
	dup    []bool
	ahead  []uint64
}

// stretches walks a batch for a BatchObserver, batchAhead hashes at a time:
//
//	for s := range stretches(hashes, dup, stateBits) {
//		f.prefetchLines(s.ahead) // request the lines of the next stretch
//		for i, h := range s.hashes {
//			s.dup[i] = f.Observe(h)
//		}
//	}
//
// so each stretch's lines are requested one stretch before it is observed,
// and their misses overlap the observing of the stretch before. The first
// step's ahead is the first two stretches. Observing with Observe, in
// order, makes the answers and the state those of Observe by construction:
// requesting a line changes nothing but the cache. It panics if dup is
// shorter than hashes, before it yields anything.
//
// stateBits is the size of the filter's state. When it is not above
// prefetchAbove, there is one step: the whole batch, nothing ahead.
func stretches(hashes []uint64, dup []bool, stateBits int) func(func(stretch) bool) {
	checkBatch(hashes, dup)
	return func(yield func(stretch) bool) {
		if stateBits <= prefetchAbove() {
			yield(stretch{hashes: hashes, dup: dup})
			return
		}
		n := len(hashes)
		ahead := hashes[:min(2*batchAhead, n)]
		for i := 0; i < n; i += batchAhead {
			end := min(i+batchAhead, n)
			if !yield(stretch{hashes: hashes[i:end], dup: dup[i:end], ahead: ahead}) {
				return
			}
			ahead = hashes[min(end+batchAhead, n):min(end+2*batchAhead, n)]
		}
	}
}

// lineBuf collects the addresses of the cache lines that a stretch of
// hashes will touch, for one call of prefetch. Its callers keep the count
// in a local variable and thread it through add, word and the others
// (n = buf.add(n, p)), so it stays in a register: a count in memory would
// put a store-to-load round trip on every line. Lines past its capacity,
// 16 per hash of a stretch, are not requested: Observe then waits for
// them as it would without the batch path. The pointers are into the
// filter's state, so they keep it alive and never dangle.
type lineBuf [16 * batchAhead]unsafe.Pointer

// add queues the line holding *p after the n queued, and returns the new
// count.
func (b *lineBuf) add(n int, p unsafe.Pointer) int {
	if n < len(b) {
		b[n] = p
		n++
	}
	return n
}

// word queues the line holding w[i].
func (b *lineBuf) word(n int, w []uint64, i int) int { return b.add(n, unsafe.Pointer(&w[i])) }

// pair queues the lines holding w[i] and w[i+1]: the second only when it
// starts a new line.
func (b *lineBuf) pair(n int, w []uint64, i int) int {
	p := unsafe.Pointer(&w[i])
	n = b.add(n, p)
	if uintptr(p)&63 == 56 {
		n = b.word(n, w, i+1)
	}
	return n
}

// maxRunLines bounds the lines words queues for one run of words: a run
// longer than that (an SBF decrementing thousands of cells) is streamed
// through by the hardware prefetcher once its first lines are in.
const maxRunLines = 4

// words queues the lines holding w[lo], ..., w[hi] (lo <= hi), at most
// maxRunLines of them.
func (b *lineBuf) words(n int, w []uint64, lo, hi int) int {
	_ = w[hi]
	for range maxRunLines {
		p := unsafe.Pointer(&w[lo])
		n = b.add(n, p)
		lo += (64 - int(uintptr(p)&63)) / 8 // the first word of the next line
		if lo > hi {
			break
		}
	}
	return n
}

// cell queues the words of cell i of a.
func (b *lineBuf) cell(n int, a *packed, i int) int {
	bit := i * int(a.width)
	w := bit >> 6
	if int(a.width) > 64-bit&63 {
		return b.pair(n, a.words, w)
	}
	return b.word(n, a.words, w)
}

// flush requests the first n queued lines.
func (b *lineBuf) flush(n int) { prefetch(b[:n]) }

package pipeline

import (
	"sync/atomic"

	"github.com/flowdedup/flowdedup/flow"
)

// slotKind says what a ring slot carries.
type slotKind uint8

const (
	slotData   slotKind = iota // a batch of keys of one window
	slotMarker                 // the producer closes a window, or moves its low window
	slotCounts                 // a parse goroutine's counts of a window (to worker 0)
	slotTurn                   // a parse goroutine is done with a run of frames: read the next one's ring
)

// slot is one ring slot: a batch of keys or a marker. The producer fills
// it in place (the keys never move between the parser and the worker's
// filter) and the worker reads it in place; the ring's indexes say who
// owns it.
//
// The arrays are laid out by field (hashes together, keys together) because
// the worker's inner loop reads only the hashes; keys and times are read
// for the few unseen ones.
type slot struct {
	kind   slotKind
	window int64      // data: the window of every key; marker: the window closed, or winNone
	n      int        // data: keys in the batch
	hashes []uint64   // data: Key.Hash(Seed) of keys[i]
	keys   []flow.Key // data
	times  []int64    // data: packet time, Unix ns
	obs    []uint32   // data: capture.Packet.ObserverID of keys[i]

	// marker: the producer's counts for the window it closes, and its new
	// low window: it sends nothing for windows before next (winDone: its
	// input ended).
	next   int64
	counts counts
}

// cacheLinePad keeps the producer's and the consumer's fields off each
// other's cache lines. 128 bytes, not 64: x86 prefetches cache lines in
// pairs, so two fields 64 bytes apart still interfere.
type cacheLinePad [128]byte

// ring is a single-producer single-consumer queue of batches: one per
// (producer, worker) pair, so neither end ever contends with a third party.
//
// The producer reserves the slot at tail, fills it and publishes it by
// advancing tail; the consumer reads the slot at head and releases it by
// advancing head. Each index is written by one side only, with one atomic
// store per batch; each side keeps a cached copy of the other side's index
// and rereads it only when the cache says the ring is full (producer) or
// empty (consumer), so in steady state a batch costs one store on each side
// and an occasional load of the other's cache line.
type ring struct {
	_         cacheLinePad
	tail      atomic.Uint64 // written by the producer: slots published so far
	headCache uint64        // producer's last view of head
	_         cacheLinePad
	head      atomic.Uint64 // written by the consumer: slots released so far
	tailCache uint64        // consumer's last view of tail
	_         cacheLinePad
	slots     []slot // len is a power of two; read-only after newRing
	mask      uint64
}

// newRing returns a ring of nbatches slots (rounded up to a power of two)
// of batchSize keys each. All of its memory is allocated here.
func newRing(nbatches, batchSize int) *ring {
	n := 1
	for n < nbatches {
		n <<= 1
	}
	r := &ring{slots: make([]slot, n), mask: uint64(n - 1)}
	hashes := make([]uint64, n*batchSize)
	keys := make([]flow.Key, n*batchSize)
	times := make([]int64, n*batchSize)
	obs := make([]uint32, n*batchSize)
	for i := range r.slots {
		lo, hi := i*batchSize, (i+1)*batchSize
		r.slots[i] = slot{hashes: hashes[lo:hi:hi], keys: keys[lo:hi:hi], times: times[lo:hi:hi], obs: obs[lo:hi:hi]}
	}
	return r
}

// reserve returns the slot at tail for the producer to fill, or nil when
// the ring is full. Repeated calls return the same slot until publish.
// Producer only.
func (r *ring) reserve() *slot {
	t := r.tail.Load() // our own index: a plain load on amd64 and arm64
	if t-r.headCache > r.mask {
		r.headCache = r.head.Load()
		if t-r.headCache > r.mask {
			return nil
		}
	}
	return &r.slots[t&r.mask]
}

// publish hands the reserved slot to the consumer. Producer only.
func (r *ring) publish() { r.tail.Store(r.tail.Load() + 1) }

// peek returns the slot at head, or nil when the ring is empty. Consumer
// only.
func (r *ring) peek() *slot {
	h := r.head.Load()
	if h == r.tailCache {
		r.tailCache = r.tail.Load()
		if h == r.tailCache {
			return nil
		}
	}
	return &r.slots[h&r.mask]
}

// release hands the slot at head back to the producer. Consumer only.
func (r *ring) release() { r.head.Store(r.head.Load() + 1) }

// ready reports whether the consumer has a slot to read, without touching
// the consumer's cache: for parking decisions. Consumer only.
func (r *ring) ready() bool { return r.tail.Load() != r.head.Load() }

// len returns the number of published, unreleased slots. Any goroutine may
// call it; the two loads are not a snapshot, so the result is clamped.
func (r *ring) len() int {
	h := r.head.Load()
	t := r.tail.Load()
	if t < h {
		return 0
	}
	return int(min(t-h, r.mask+1))
}

// cap returns the number of slots.
func (r *ring) cap() int { return len(r.slots) }

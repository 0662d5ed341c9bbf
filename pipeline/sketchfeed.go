package pipeline

import (
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/sketch"
)

// recentBits sets the size of a sketch feed's cache of recent keys: 2^14
// entries, 128 KiB a window slot, which stays in L2 beside the filter. On
// BenchmarkPipeline's uniform 16384 flows (the worst case for a cache: real
// traffic repeats its heavy flows far more) it cut the CPU time the sketch
// adds per key from 21 ns to 8 (2^12 entries: to 16; a loaded 2-core VM).
const recentBits = 14

// sketchFeed is a window slot's distinct-count sketch and a cache of the
// keys it was given recently, so that the repeats of a flow, most of the
// packets of real traffic, skip the sketch's hash and register update (an
// HLL is idempotent: inserting a key again changes nothing).
//
// The cache is direct-mapped and keyed by the flow hash the worker already
// has, which is exact up to 64-bit collisions of that hash: a key is
// skipped only if a key with the same 64-bit flow hash (bit 0 aside) was
// inserted in the window, which for distinct keys has probability 2^-63 a
// pair, as for the filters. So the estimate still does not inherit the
// filters' errors: unlike a filter, the cache forgets (an evicted key is
// inserted again, harmlessly) but never mistakes.
type sketchFeed struct {
	hll    *sketch.HLL
	recent *[1 << recentBits]uint64 // flow hash | 1 of a key inserted in the window, by the hash's top bits; 0: none
}

func newSketchFeed(proto *sketch.HLL) sketchFeed {
	recent := new([1 << recentBits]uint64)
	// Written once now, so that the lookups (a read, then a write) do not
	// fault twice a page (see the filters' Reset in New).
	clear(recent[:])
	return sketchFeed{hll: proto.Clone(), recent: recent}
}

// add inserts the keys of a batch, whose flow hashes are hashes.
func (f *sketchFeed) add(keys []flow.Key, hashes []uint64) {
	recent, hll := f.recent, f.hll
	for i, h := range hashes {
		e := &recent[h>>(64-recentBits)]
		if *e == h|1 {
			continue
		}
		*e = h | 1
		hll.Insert(&keys[i])
	}
}

// take returns the sketch of the window, which the caller now owns, and
// starts the feed afresh with empty, an empty sketch.
func (f *sketchFeed) take(empty *sketch.HLL) *sketch.HLL {
	full := f.hll
	f.hll = empty
	clear(f.recent[:])
	return full
}

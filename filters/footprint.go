package filters

import (
	"fmt"
	"math/bits"
	"strings"
	"unsafe"
)

// Footprint returns, without allocating it, an upper bound of the bytes
// New(spec, seed) allocates for the filter's state, so that a caller can
// refuse a spec the machine cannot hold before it asks for the memory.
// bounded is false for a filter whose state grows with the keys it sees
// (exact); its footprint is then 0. Errors are New's for a spec's name,
// parameter names, mem= and entries=; other values are checked by New.
//
// Every family but the LRU buffers allocates at most its mem= (most
// exactly that; cuckoo rounds its table down to a power of two). lru and
// fpbuffer count 64 bits per entry as the SBF paper does, but hold each
// entry with its list links (16 bytes) and an index of 2 to 4 int32 slots
// per entry: 24 to 32 bytes, 3 to 4 times what they count. Every filter
// also has a few fixed parts (its struct, a random source, small tables: at
// most 9KiB measured), counted as footprintFixed.
func Footprint(spec string) (bytes int64, bounded bool, err error) {
	sp, err := ParseSpec(spec)
	if err != nil {
		return 0, false, err
	}
	fam, ok := lookup(sp.Name)
	if !ok {
		return 0, false, fmt.Errorf("filters: %q: %w %q (known: %s)", spec, ErrUnknownFilter, sp.Name, strings.Join(Names(), ", "))
	}
	if !fam.knows("mem") {
		return 0, false, nil // exact
	}
	p := &params{spec: spec, vals: sp.Params, used: map[string]bool{}}
	if fam.knows("entries") {
		entries, err := p.int("entries", 0, 1, 1<<31-1)
		if err != nil {
			return 0, false, err
		}
		if !p.has("entries") {
			memBits, err := p.mem()
			if err != nil {
				return 0, false, err
			}
			entries = max(1, memBits/lruBitsPerEntry)
		}
		return lruBytes(entries) + footprintFixed, true, nil
	}
	memBits, err := p.mem()
	if err != nil {
		return 0, false, err
	}
	return (int64(memBits)+7)/8 + footprintFixed, true, nil
}

// footprintFixed bounds the parts of a filter that do not grow with mem=.
const footprintFixed = 16 << 10

// lruBytes is what NewLRU(entries, _) allocates: the entries and the index
// table of the next power of two at or above twice as many int32 slots.
func lruBytes(entries int) int64 {
	tableLen := max(2, 1<<bits.Len(uint(2*entries-1)))
	return int64(entries)*int64(unsafe.Sizeof(lruEntry{})) + int64(tableLen)*int64(unsafe.Sizeof(int32(0)))
}

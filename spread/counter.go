package spread

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"unsafe"
)

// MaxCounters bounds the counters of one Counter (New): 2^24, about
// 1.5 GiB; flowdedup's --spread-memory stays far below.
const MaxCounters = 1 << 24

// ErrCounters is wrapped by New's error for a count of counters out of
// range.
var ErrCounters = errors.New("spread: counters out of range")

// counter is one of a Counter's M counters.
type counter struct {
	item   netip.Addr
	count  uint64 // D
	err    uint64 // E: the count of the counter this item took over
	hash   uint32 // of item, for the hash table's deletions
	bucket int32  // the bucket of count
	slot   int32  // item's slot in the hash table
}

// bucket is a run of counters of equal count: c[start:end].
type bucket struct {
	count      uint64
	start, end int32
}

// BytesPerCounter is the memory of one counter: the counter itself, its
// share of the buckets, and up to four slots of the hash table (which
// has between 2 and 4 slots per counter, a power of two).
const BytesPerCounter = int(unsafe.Sizeof(counter{})) + int(unsafe.Sizeof(bucket{})) + 4 + 4*4

// An Entry is one counted item: its Count D and Error E, such that the
// true count is between D-E and D.
type Entry struct {
	Item  netip.Addr
	Count uint64
	Error uint64
}

// A Counter is a Space-Saving summary of M counters (see the package
// documentation). Add takes an item in O(1) without allocating; Top gives
// the items of largest count. The zero Counter is not usable: make one
// with New. A Counter is not safe for concurrent use.
type Counter struct {
	c       []counter // len M; c[:n] used, sorted by count, largest first
	n       int32
	buckets []bucket // len M: at most one per counter
	free    []int32  // ids of unused buckets, a stack
	table   []int32  // counter index, or -1: empty
	mask    uint32
	seed    uint64
	total   uint64
}

// New returns a Counter of m counters, 1 ≤ m ≤ MaxCounters, hashing under
// seed (take a random one: addresses are chosen by whoever sends the
// packets, and a known seed lets them be chosen to collide).
func New(m int, seed uint64) (*Counter, error) {
	if m < 1 || m > MaxCounters {
		return nil, fmt.Errorf("%w: %d counters, want 1 to %d", ErrCounters, m, MaxCounters)
	}
	size := 1 << bits.Len(uint(2*m-1)) // the power of two ≥ 2m
	c := &Counter{
		c:       make([]counter, m),
		buckets: make([]bucket, m),
		free:    make([]int32, 0, m),
		table:   make([]int32, size),
		mask:    uint32(size - 1),
		seed:    seed,
	}
	c.Reset()
	return c, nil
}

// Reset empties the counter, keeping its memory.
func (s *Counter) Reset() {
	for i := range s.table {
		s.table[i] = -1
	}
	s.free = s.free[:0]
	for i := len(s.buckets) - 1; i >= 0; i-- {
		s.free = append(s.free, int32(i))
	}
	s.n, s.total = 0, 0
}

// M returns the number of counters.
func (s *Counter) M() int { return len(s.c) }

// Len returns the number of items counted (at most M).
func (s *Counter) Len() int { return int(s.n) }

// Total returns the number of items added since New or Reset: the n of
// the guarantee, E ≤ n/M.
func (s *Counter) Total() uint64 { return s.total }

// MinCount returns the smallest count held when all M counters are taken
// (the most an item without a counter can have appeared), else 0.
func (s *Counter) MinCount() uint64 {
	if int(s.n) < len(s.c) {
		return 0
	}
	return s.c[s.n-1].count
}

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func (s *Counter) hash(a netip.Addr) uint32 {
	b := a.As16()
	hi := uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
	lo := uint64(b[8])<<56 | uint64(b[9])<<48 | uint64(b[10])<<40 | uint64(b[11])<<32 |
		uint64(b[12])<<24 | uint64(b[13])<<16 | uint64(b[14])<<8 | uint64(b[15])
	if a.Is4() {
		lo ^= 4 // ::ffff:a.b.c.d and a.b.c.d are different items
	}
	return uint32(mix(mix(hi^s.seed)^lo) >> 32)
}

// lookup returns the slot of a in the table, or the empty slot where it
// would go. The table always has an empty slot (it has 2M or more), so
// the probe ends.
func (s *Counter) lookup(a netip.Addr, h uint32) (int32, bool) {
	for i := h & s.mask; ; i = (i + 1) & s.mask {
		e := s.table[i]
		if e < 0 {
			return int32(i), false
		}
		if s.c[e].hash == h && s.c[e].item == a {
			return int32(i), true
		}
	}
}

// unslot empties slot i, shifting back the entries after it that would
// no longer be found (linear probing's deletion).
func (s *Counter) unslot(i uint32) {
	for j := (i + 1) & s.mask; ; j = (j + 1) & s.mask {
		e := s.table[j]
		if e < 0 {
			break
		}
		home := s.c[e].hash & s.mask
		// The entry stays when its home is cyclically in (i, j].
		if (i < j && i < home && home <= j) || (i > j && (i < home || home <= j)) {
			continue
		}
		s.table[i] = e
		s.c[e].slot = int32(i)
		i = j
	}
	s.table[i] = -1
}

func (s *Counter) newBucket(count uint64, at int32) int32 {
	b := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.buckets[b] = bucket{count: count, start: at, end: at + 1}
	return b
}

// Add counts one appearance of a. It does not allocate.
func (s *Counter) Add(a netip.Addr) {
	s.total++
	h := s.hash(a)
	slot, ok := s.lookup(a, h)
	if ok {
		s.incr(s.table[slot])
		return
	}
	if int(s.n) < len(s.c) {
		i := s.n
		s.n++
		s.c[i] = counter{item: a, count: 1, hash: h, slot: slot}
		s.table[slot] = i
		if i > 0 && s.c[i-1].count == 1 {
			b := s.c[i-1].bucket
			s.buckets[b].end++
			s.c[i].bucket = b
		} else {
			s.c[i].bucket = s.newBucket(1, i)
		}
		return
	}
	// Every counter is taken: a takes the last, of the smallest count.
	i := s.n - 1
	last := &s.c[i]
	s.unslot(uint32(last.slot))
	slot, _ = s.lookup(a, h) // the deletion may have moved the empty slot
	last.item, last.hash, last.err, last.slot = a, h, last.count, slot
	s.table[slot] = i
	s.incr(i)
}

// incr adds one to the count of counter i: it swaps places with the first
// counter of its bucket, leaves that bucket, and joins the bucket of the
// next count (the one before it in c) or a new one.
func (s *Counter) incr(i int32) {
	b := s.c[i].bucket
	bk := &s.buckets[b]
	first := bk.start
	if first != i {
		s.c[i], s.c[first] = s.c[first], s.c[i]
		s.table[s.c[i].slot] = i
		s.table[s.c[first].slot] = first
	}
	bk.start++
	v := bk.count + 1
	if bk.start == bk.end {
		s.free = append(s.free, b) // within its capacity: M buckets in all
	}
	if first > 0 && s.buckets[s.c[first-1].bucket].count == v {
		pb := s.c[first-1].bucket
		s.buckets[pb].end++
		s.c[first].bucket = pb
	} else {
		s.c[first].bucket = s.newBucket(v, first)
	}
	s.c[first].count = v
}

// Top appends to dst the k items of largest count (fewer when fewer are
// counted), largest first, items of equal count in address order
// (netip.Addr.Compare), and returns it. Of several items of the same count
// at the k-th place, those first in address order are given, so that the
// answer does not depend on the order of the stream. Top sorts the
// counters of equal count in place: it does not allocate beyond dst.
func (s *Counter) Top(dst []Entry, k int) []Entry {
	k = min(k, int(s.n))
	for at := int32(0); at < int32(k); {
		bk := s.buckets[s.c[at].bucket]
		run := s.c[bk.start:bk.end]
		slices.SortFunc(run, func(x, y counter) int { return x.item.Compare(y.item) })
		for j := bk.start; j < bk.end; j++ {
			s.table[s.c[j].slot] = j
		}
		at = bk.end
	}
	for i := range k {
		c := &s.c[i]
		dst = append(dst, Entry{Item: c.item, Count: c.count, Error: c.err})
	}
	return dst
}

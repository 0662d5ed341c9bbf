package filters

import (
	"fmt"
	"math/bits"

	"github.com/flowdedup/flowdedup/mix"
)

// LRU is the buffering baseline of Broder et al. as the SBF paper runs it:
// an exact buffer of the most recently seen distinct hashes, evicting the
// least recently used when full. It never reports a false positive (up to
// 64-bit hash collisions); its false negatives are duplicates whose previous
// occurrence was evicted. Memory is counted as the SBF paper counts it, 64
// bits per entry; the index and list links it needs are not counted.
//
// State is flat: entries live in one array, linked into a recency list by
// int32 indices, and are found through an open-addressing table with linear
// probing and backward-shift deletion, so Observe never allocates.
type LRU struct {
	memBits int // as requested, for String; 0 when sized by entries
	cap     int
	ents    []lruEntry
	head    int32 // most recent
	tail    int32 // least recent
	n       int
	slots   []int32 // table of entry index+1; 0 = empty
	shift   uint    // 64 - log2(len(slots))
}

// lruEntry keeps a key and its list links together: one cache line per
// entry touched, not three.
type lruEntry struct {
	key        uint64
	prev, next int32
}

var _ Filter = (*LRU)(nil)

const lruBitsPerEntry = 64

func buildLRU(p *params, _ uint64) (Filter, error) {
	entries, err := p.int("entries", 0, 1, 1<<31-1)
	if err != nil {
		return nil, err
	}
	memBits := 0
	if !p.has("entries") {
		if memBits, err = p.mem(); err != nil {
			return nil, err
		}
		entries = memBits / lruBitsPerEntry
		if entries < 1 {
			return nil, p.tooSmall(memBits, lruBitsPerEntry, "one LRU entry")
		}
	}
	return NewLRU(entries, memBits), nil
}

// NewLRU returns an LRU buffer of the given number of entries. memBits is
// only remembered for String (0: the spec names entries).
func NewLRU(entries, memBits int) *LRU {
	tableLen := 1 << bits.Len(uint(2*entries-1)) // load factor <= 1/2
	if tableLen < 2 {
		tableLen = 2
	}
	l := &LRU{
		memBits: memBits,
		cap:     entries,
		ents:    make([]lruEntry, entries),
		slots:   make([]int32, tableLen),
		shift:   uint(64 - bits.TrailingZeros(uint(tableLen))),
	}
	l.Reset()
	return l
}

func (l *LRU) home(h uint64) int {
	// Fibonacci hashing: the high bits of a multiply, independent of how the
	// caller's hash bits were already used.
	return int((h * mix.Golden) >> l.shift)
}

// Observe reports whether h is in the buffer, then makes it the most recent
// entry, evicting the least recent one if the buffer is full.
func (l *LRU) Observe(h uint64) bool {
	mask := len(l.slots) - 1
	i := l.home(h)
	for {
		s := l.slots[i]
		if s == 0 {
			break
		}
		if e := s - 1; l.ents[e].key == h {
			l.unlink(e)
			l.pushFront(e)
			return true
		}
		i = (i + 1) & mask
	}
	var e int32
	if l.n < l.cap {
		e = int32(l.n)
		l.n++
	} else {
		e = l.tail
		l.unlink(e)
		l.deleteSlot(l.ents[e].key, e)
		// The slot found above may have moved during the backward shift.
		i = l.home(h)
		for l.slots[i] != 0 {
			i = (i + 1) & mask
		}
	}
	l.ents[e].key = h
	l.slots[i] = e + 1
	l.pushFront(e)
	return false
}

// deleteSlot removes entry e (with key h) from the table, shifting later
// members of its probe run back so lookups never stop early at a hole.
func (l *LRU) deleteSlot(h uint64, e int32) {
	mask := len(l.slots) - 1
	i := l.home(h)
	for l.slots[i] != e+1 {
		i = (i + 1) & mask
	}
	for {
		l.slots[i] = 0
		j := i
		for {
			j = (j + 1) & mask
			s := l.slots[j]
			if s == 0 {
				return
			}
			// Move slot j into the hole at i unless its home lies cyclically in (i, j].
			home := l.home(l.ents[s-1].key)
			if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
				l.slots[i] = s
				i = j
				break
			}
		}
	}
}

func (l *LRU) unlink(e int32) {
	p, n := l.ents[e].prev, l.ents[e].next
	if p >= 0 {
		l.ents[p].next = n
	} else {
		l.head = n
	}
	if n >= 0 {
		l.ents[n].prev = p
	} else {
		l.tail = p
	}
}

func (l *LRU) pushFront(e int32) {
	l.ents[e].prev = -1
	l.ents[e].next = l.head
	if l.head >= 0 {
		l.ents[l.head].prev = e
	}
	l.head = e
	if l.tail < 0 {
		l.tail = e
	}
}

// Len is the number of entries buffered.
func (l *LRU) Len() int { return l.n }

func (l *LRU) SizeBits() int { return l.cap * lruBitsPerEntry }

func (l *LRU) Reset() {
	clear(l.slots)
	l.n = 0
	l.head, l.tail = -1, -1
}

func (l *LRU) String() string {
	if l.memBits > 0 {
		return "lru:mem=" + FormatMem(l.memBits)
	}
	return fmt.Sprintf("lru:entries=%d", l.cap)
}

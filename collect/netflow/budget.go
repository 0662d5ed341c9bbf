package netflow

import (
	"sync/atomic"
	"unsafe"
)

// Budget bounds the memory of the templates of every Session that shares
// it (Limits.Budget): a collector's UDP exporters and TCP connections
// together. The Sessions sharing a Budget must be used by one goroutine
// at a time (a collector decodes every message in one goroutine); Used
// and Evicted may be read from any.
//
// A template's cost is what the Session keeps of it: the template record
// as received, its compiled fields, and a fixed overhead for the
// structure and its place in the maps and CLOCKs (templateOverhead). A
// new template that does not fit evicts others first: the Session's own
// (by its CLOCK) when it holds more than its share of the budget (the
// budget divided by the Sessions holding templates), else the first
// template of any Session that a CLOCK over all of them finds unused
// since it last passed. A flood of templates from one exporter thus
// evicts its own, and templates in use survive one of never-used ones.
type Budget struct {
	max      int64
	used     atomic.Int64
	evicted  atomic.Uint64
	sessions int         // Sessions holding templates
	ring     []*template // every template of the Sessions, for the CLOCK
	hand     int
}

// DefaultTemplateMemory is the budget a collector gives its templates
// when not told otherwise, small enough for a small router: about 45,000
// templates of 30 fields (370 bytes each, as counted), 1,000 exporters of
// 45 templates. A flood of templates then holds collect's memory at
// about 95 MB (the evicted ones are garbage until the next collection).
const DefaultTemplateMemory = 16 << 20

// NewBudget returns a budget of max bytes (at least 64 KiB).
func NewBudget(bytes int64) *Budget {
	return &Budget{max: max(bytes, 64<<10)}
}

// Used returns the bytes of the templates held now.
func (b *Budget) Used() int64 { return b.used.Load() }

// Max returns the budget in bytes.
func (b *Budget) Max() int64 { return b.max }

// Evicted returns the templates evicted to stay within the budget (and
// the new ones not kept because nothing could be evicted).
func (b *Budget) Evicted() uint64 { return b.evicted.Load() }

// templateOverhead is what a template costs besides its fields and
// record: the structure, its map entry, and its slots in the Session's
// CLOCK and the Budget's.
const templateOverhead = int64(unsafe.Sizeof(template{})) + 64

// cost returns what t costs, by the capacity of its slices (what is
// allocated).
func (t *template) cost() int64 {
	return templateOverhead + int64(cap(t.fields))*int64(unsafe.Sizeof(field{})) + int64(cap(t.raw))
}

// charge sets t's cost to c, in s and in s's budget.
func (s *Session) charge(t *template, c int64) {
	d := c - t.size
	if d == 0 {
		return
	}
	before := s.bytes
	t.size = c
	s.bytes += d
	b := s.lim.Budget
	if b == nil {
		return
	}
	b.used.Add(d)
	switch {
	case before == 0 && s.bytes != 0:
		b.sessions++
	case before != 0 && s.bytes == 0:
		b.sessions--
	}
}

// enroll puts t, a template new to s, in the budget's CLOCK.
func (b *Budget) enroll(t *template) {
	t.ring = len(b.ring)
	b.ring = append(b.ring, t)
}

// unenroll takes t out of the budget's CLOCK.
func (b *Budget) unenroll(t *template) {
	i, last := t.ring, len(b.ring)-1
	if i < 0 || i > last || b.ring[i] != t {
		return
	}
	b.ring[i] = b.ring[last]
	b.ring[i].ring = i
	b.ring[last] = nil
	b.ring = b.ring[:last]
	t.ring = -1
}

// room evicts templates until need more bytes fit in the budget of s
// (none: true), never keep. It returns false when they cannot.
func (s *Session) room(need int64, keep *template) bool {
	b := s.lim.Budget
	if b == nil {
		return true
	}
	// Each eviction removes a template: at most as many as there are.
	for range len(b.ring) + 1 {
		if b.used.Load()+need <= b.max {
			return true
		}
		share := b.max / int64(max(b.sessions, 1))
		if s.bytes+need > share && s.evictTemplate(keep) {
			b.evicted.Add(1)
			continue
		}
		if !b.evictOne(keep) {
			return false
		}
		b.evicted.Add(1)
	}
	return b.used.Load()+need <= b.max
}

// evictOne drops the first template the CLOCK over every Session's
// templates finds unused since its hand last passed, never keep; false
// when there is none but keep.
func (b *Budget) evictOne(keep *template) bool {
	for range 2*len(b.ring) + 1 {
		if len(b.ring) == 0 {
			return false
		}
		if b.hand >= len(b.ring) {
			b.hand = 0
		}
		t := b.ring[b.hand]
		if t == keep {
			b.hand++
			continue
		}
		if t.used {
			t.used = false
			b.hand++
			continue
		}
		t.owner.drop(t) // moves the ring's last template to the hand
		return true
	}
	return false
}

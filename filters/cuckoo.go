package filters

import (
	"fmt"
	"math/bits"

	"github.com/flowdedup/flowdedup/mix"
)

// The QHT paper's benchmark setting (Sec. 6.1): "cells containing 1 element
// of 3 bits each", for an asymptotic FPR near 2b/S = 2/7 (its Table 4
// measures 28.2-28.6%).
const (
	cuckooDefaultBuckets = 1
	cuckooDefaultFPBits  = 3
	cuckooMaxBuckets     = 64
	cuckooMaxFPBits      = 32
	// cuckooMaxKicks is MaxNumKicks of Fan et al.'s Algorithm 1 (500 in
	// their implementation and evaluation).
	cuckooMaxKicks = 500
)

var cuckooFamily = &Family{
	Name:  "cuckoo",
	Paper: "Fan, Andersen, Kaminsky & Mitzenmacher, CoNEXT 2014, as the QHT paper adapts it to streams (footnote 4)",
	About: "2^j buckets of b f-bit fingerprints, partial-key cuckoo hashing; an insertion whose relocations give up drops the fingerprint in hand",
	Params: []Param{memParam,
		{Name: "buckets", Default: "1", Help: "fingerprints per bucket b, 1..64 and at most 2^f-1 (QHT's benchmark: 1)"},
		{Name: "fpbits", Default: "3", Help: "fingerprint bits f, 1..32 (S = 2^f - 1 usable values, 0 marks an empty slot; saturated FPR about 2b/S)"},
	},
	build: buildCuckoo,
}

// Cuckoo is a cuckoo filter (Fan et al.) adapted to unbounded streams as the
// QHT paper does (its footnote 4): "failure is emitted after some number of
// relocations; we just discard the failure".
//
// State: a power of two n of buckets, each of b slots holding an f-bit
// fingerprint, packed back to back: n*b*f bits and nothing else. Bucket
// count: n is the largest power of two with n*b*f <= mem, because partial-key
// cuckoo hashing finds the alternate bucket as i XOR hash(fp), which must
// stay in range; so SizeBits is n*b*f, between half of mem and mem.
//
// A hash gives its first bucket i1 from its high bits and its fingerprint
// from its low f bits; fingerprint 0 marks an empty slot, so a zero
// fingerprint is re-derived until non-zero (QHT's option (3), Sec. 3.2): S =
// 2^f-1 values. The alternate bucket is i2 = i1 XOR alt(fp), alt a mix of fp
// masked to n-1 and made non-zero (when n >= 2) so an element always has two
// distinct buckets; XOR makes the map an involution, so a fingerprint can
// be moved to its other bucket without knowing the element.
//
// Observe (Fan et al.'s Lookup then Insert): a fingerprint found in i1 or i2
// is a duplicate and nothing changes. Otherwise it goes into an empty slot
// of i1, else of i2; else a random one of i1, i2 is chosen and, up to
// MaxNumKicks = 500 times, a random slot's fingerprint is swapped with the
// one in hand, which moves to its own alternate bucket. When the kicks run
// out the fingerprint in hand (usually an older element's; rarely, when the
// chain comes back through its bucket, the new one) is dropped: the stream
// adaptation. A dropped fingerprint makes a later duplicate of its element a
// false negative; before the table nears its load threshold nothing is
// dropped and there are no false negatives. Measured first drops: at load
// 0.97 for b=4, f=16, 0.88 for b=2, f=12, but 0.33 for the default b=1, f=3,
// whose 7 fingerprints give a bucket only 7 alternates.
//
// Saturated FPR: once every bucket is full, an unseen element is a false
// positive when one of the 2b fingerprints of its two buckets equals its
// own. With fingerprints uniform over S values that is at most 2b/S (union
// bound, reached when the 2b are distinct, which the insert-if-absent rule
// favours) and at least 1-(1-1/S)^2b (independent fingerprints). Saturated,
// every unseen element costs the full 500 kicks (about 2-3 us here; the
// QHT paper's Table 3 measures 2.46 us for its cuckoo filter).
type Cuckoo struct {
	cells   packed // n*b cells of f bits; cells.words is the whole state
	n       int    // buckets, a power of two
	b       int
	f       uint
	fpMask  uint64
	idxMask uint64 // n-1
	shift   uint   // 64 - log2(n): i1 is h >> shift
	dropped uint64

	rng     mix.Wyrand
	seed    uint64
	memBits int // as requested, for String
}

var _ Filter = (*Cuckoo)(nil)

func buildCuckoo(p *params, seed uint64) (Filter, error) {
	memBits, err := p.mem()
	if err != nil {
		return nil, err
	}
	b, err := p.int("buckets", cuckooDefaultBuckets, 1, cuckooMaxBuckets)
	if err != nil {
		return nil, err
	}
	f, err := p.int("fpbits", cuckooDefaultFPBits, 1, cuckooMaxFPBits)
	if err != nil {
		return nil, err
	}
	// As QHT's k <= S: a bucket of distinct fingerprints cannot use more
	// than S slots.
	if err := p.fingerprintSlots(b, f); err != nil {
		return nil, err
	}
	if memBits < b*f {
		return nil, p.tooSmall(memBits, b*f, fmt.Sprintf("one bucket of %d fingerprints of %d bits", b, f))
	}
	return newCuckoo(memBits, b, f, seed), nil
}

func newCuckoo(memBits, b, f int, seed uint64) *Cuckoo {
	lg := bits.Len(uint(memBits/(b*f))) - 1
	n := 1 << lg
	return &Cuckoo{
		cells:   newPacked(n*b, uint(f)),
		n:       n,
		b:       b,
		f:       uint(f),
		fpMask:  1<<uint(f) - 1,
		idxMask: uint64(n - 1),
		shift:   uint(64 - lg),
		rng:     mix.NewWyrand(seed),
		seed:    seed,
		memBits: memBits,
	}
}

// alt is what partial-key cuckoo hashing XORs into a bucket index to find a
// fingerprint's other bucket: a mix of fp (so that small fingerprints still
// spread over the whole table), never 0 unless there is a single bucket.
func (c *Cuckoo) alt(fp uint64) int {
	a := mix.Mix64(fp) & c.idxMask
	if a == 0 {
		a = c.idxMask & 1
	}
	return int(a)
}

// holds reports whether bucket i holds fp.
func (c *Cuckoo) holds(i int, fp uint64) bool {
	base := i * c.b
	for j := range c.b {
		if c.cells.get(base+j) == fp {
			return true
		}
	}
	return false
}

// put stores fp in an empty slot of bucket i, if there is one.
func (c *Cuckoo) put(i int, fp uint64) bool {
	base := i * c.b
	for j := range c.b {
		if c.cells.get(base+j) == 0 {
			c.cells.set(base+j, fp)
			return true
		}
	}
	return false
}

// Observe reports whether h's fingerprint is in one of its two buckets, and
// inserts it if not.
func (c *Cuckoo) Observe(h uint64) bool {
	fp := nonZeroFingerprint(h, c.fpMask)
	i1 := int(h >> c.shift) // shift 64 (one bucket) gives 0
	i2 := i1 ^ c.alt(fp)
	if c.holds(i1, fp) || c.holds(i2, fp) {
		return true
	}
	if c.put(i1, fp) || c.put(i2, fp) {
		return false
	}
	c.relocate(i1, i2, fp)
	return false
}

// relocate is the kick loop of Fan et al.'s Insert, entered with both of
// fp's buckets full. Out of line: it runs only once the table is near full.
//
//go:noinline
func (c *Cuckoo) relocate(i1, i2 int, fp uint64) {
	r := c.rng.Uint64()
	i := i1
	if r&1 != 0 {
		i = i2
	}
	for range cuckooMaxKicks {
		slot := i*c.b + c.randomSlot()
		old := c.cells.get(slot)
		c.cells.set(slot, fp)
		fp = old
		i ^= c.alt(fp)
		if c.put(i, fp) {
			return
		}
	}
	c.dropped++ // the stream adaptation: forget fp instead of failing
}

// randomSlot draws a slot in [0, b) by a 32-bit multiply-shift (bias at most
// b/2^32).
func (c *Cuckoo) randomSlot() int {
	return int((c.rng.Uint64() >> 32) * uint64(c.b) >> 32)
}

// SizeBits is n*b*f: every slot of every bucket, nothing else.
func (c *Cuckoo) SizeBits() int { return c.n * c.b * int(c.f) }

// Reset empties every slot and rewinds the random source.
func (c *Cuckoo) Reset() {
	c.cells.clear()
	c.dropped = 0
	c.rng = mix.NewWyrand(c.seed)
}

// String gives the canonical spec, e.g. "cuckoo:mem=64KiB,buckets=1,fpbits=3".
func (c *Cuckoo) String() string {
	return fmt.Sprintf("cuckoo:mem=%s,buckets=%d,fpbits=%d", FormatMem(c.memBits), c.b, c.f)
}

// Buckets is n, the number of buckets (a power of two).
func (c *Cuckoo) Buckets() int { return c.n }

// Slots is b, the fingerprints per bucket.
func (c *Cuckoo) Slots() int { return c.b }

// FPBits is f, the bits of a fingerprint.
func (c *Cuckoo) FPBits() int { return int(c.f) }

// Dropped counts the fingerprints dropped because relocation gave up since
// New or Reset: each is an element the filter forgot.
func (c *Cuckoo) Dropped() uint64 { return c.dropped }

// Load is the fraction of slots in use. It scans the whole state.
func (c *Cuckoo) Load() float64 {
	used := 0
	for i := range c.n * c.b {
		if c.cells.get(i) != 0 {
			used++
		}
	}
	return float64(used) / float64(c.n*c.b)
}

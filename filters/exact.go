package filters

import "github.com/flowdedup/flowdedup/mix"

// Exact is the ground truth: a set of every hash observed. It errs only on
// 64-bit hash collisions (for n keys, about n^2/2^65). Its memory grows with
// the number of distinct hashes: it is for evaluation and small captures, not
// for line rate. Observe allocates only when the table doubles (amortised
// O(1/n) allocations per insert), never on a hash already seen.
type Exact struct {
	slots   []uint64 // 0 marks an empty slot; hash 0 is tracked by hasZero
	n       int
	hasZero bool
}

var _ Filter = (*Exact)(nil)

func buildExact(_ *params, _ uint64) (Filter, error) { return NewExact(), nil }

// NewExact returns an empty exact set.
func NewExact() *Exact { return &Exact{slots: make([]uint64, 1024)} }

func (x *Exact) Observe(h uint64) bool {
	if h == 0 {
		seen := x.hasZero
		x.hasZero = true
		return seen
	}
	mask := len(x.slots) - 1
	i := int(h*mix.Golden>>32) & mask
	for {
		switch x.slots[i] {
		case h:
			return true
		case 0:
			x.slots[i] = h
			x.n++
			if 4*x.n > 3*len(x.slots) {
				x.grow()
			}
			return false
		}
		i = (i + 1) & mask
	}
}

func (x *Exact) grow() {
	old := x.slots
	x.slots = make([]uint64, 2*len(old))
	mask := len(x.slots) - 1
	for _, h := range old {
		if h == 0 {
			continue
		}
		i := int(h*mix.Golden>>32) & mask
		for x.slots[i] != 0 {
			i = (i + 1) & mask
		}
		x.slots[i] = h
	}
}

// Len is the number of distinct hashes observed.
func (x *Exact) Len() int {
	if x.hasZero {
		return x.n + 1
	}
	return x.n
}

// SizeBits counts 64 bits per distinct hash held.
func (x *Exact) SizeBits() int { return 64 * x.Len() }

func (x *Exact) Reset() {
	x.slots = make([]uint64, 1024)
	x.n = 0
	x.hasZero = false
}

func (x *Exact) String() string { return "exact" }

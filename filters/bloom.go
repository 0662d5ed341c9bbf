package filters

import (
	"fmt"
	"math/bits"

	"github.com/flowdedup/flowdedup/mix"
)

// Bloom is a plain Bloom filter of m bits and k hash functions: the baseline
// that fills up and never forgets. Observe tests, then sets, the element's k
// bits, so its FP rate after n distinct elements is about (1 - e^(-kn/m))^k
// and it never reports a false negative.
//
// Bit indices come from the hash by the same double hashing as SBF's, so a
// Bloom filter and an SBF with Max=1, P=0 over the same bits answer alike
// (the SBF paper's Sec. 5.2 view of BF as a special case of SBF).
type Bloom struct {
	words   []uint64
	m       int // bits
	k       int
	memBits int // as requested, for String
}

var _ Filter = (*Bloom)(nil)

func buildBloom(p *params, _ uint64) (Filter, error) {
	memBits, err := p.mem()
	if err != nil {
		return nil, err
	}
	k, err := p.int("k", 2, 1, sbfMaxK)
	if err != nil {
		return nil, err
	}
	blocked, err := p.int("blocked", 0, 0, 1)
	if err != nil {
		return nil, err
	}
	if blocked == 1 {
		return newBlockedBloom(p, memBits, k)
	}
	if memBits <= k {
		return nil, p.tooSmall(memBits, k+1, fmt.Sprintf("more than k=%d bits", k))
	}
	return &Bloom{
		words:   make([]uint64, (memBits+63)/64),
		m:       memBits,
		k:       k,
		memBits: memBits,
	}, nil
}

// NewBloom returns the Bloom filter that New builds from
// "bloom:mem=<memBits>bit,k=<k>".
func NewBloom(memBits, k int) (*Bloom, error) {
	f, err := New(fmt.Sprintf("bloom:mem=%dbit,k=%d", memBits, k), 0)
	if err != nil {
		return nil, err
	}
	return f.(*Bloom), nil
}

// bloomStep is the double-hashing increment for h: the i-th index of h is
// mix.Reduce(h + i*bloomStep(h), m). Mix64 makes it independent of h's bits, and
// the low bit keeps it non-zero (mix.Mix64(0) is 0), so the k indices of a hash
// are never all forced equal.
func bloomStep(h uint64) uint64 { return mix.Mix64(h) | 1 }

// Observe reports whether all of h's k bits were set, and sets them.
func (b *Bloom) Observe(h uint64) bool {
	// Branch-free: whether a bit was set is a coin toss on a filling filter.
	w := b.words
	step := bloomStep(h)
	all := uint64(1)
	g := h
	for range b.k {
		i := mix.Reduce(g, b.m)
		old := w[i>>6]
		all &= old >> (i & 63)
		w[i>>6] = old | 1<<(i&63)
		g += step
	}
	return all&1 != 0
}

// SizeBits is m, the filter's bits.
func (b *Bloom) SizeBits() int { return b.m }

// Reset clears every bit.
func (b *Bloom) Reset() { clear(b.words) }

// String gives the canonical spec, e.g. "bloom:mem=64KiB,k=2".
func (b *Bloom) String() string {
	return fmt.Sprintf("bloom:mem=%s,k=%d", FormatMem(b.memBits), b.k)
}

// K is the number of hash functions.
func (b *Bloom) K() int { return b.k }

// FillRatio is the fraction of bits set. It scans every word.
func (b *Bloom) FillRatio() float64 {
	ones := 0
	for _, w := range b.words {
		ones += bits.OnesCount64(w)
	}
	return float64(ones) / float64(b.m)
}

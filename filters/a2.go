package filters

import (
	"fmt"
	"math"
	"strconv"

	"github.com/flowdedup/flowdedup/mix"
)

// a2DefaultFPR is the QHT paper's benchmark setting (Sec. 6.1): "A2 Filter,
// targeted FPR of 0.1".
const (
	a2DefaultFPR = 0.1
	a2MaxK       = 32
)

var a2Family = &Family{
	Name:  "a2",
	Paper: "Yoon, IEEE TKDE 22(1) 2010 (Aging Bloom filter with two active buffers)",
	About: "two Bloom filters of mem/2 bits queried together; insertions go to active1, which replaces active2 (cleared) once it holds n elements",
	Params: []Param{memParam,
		{Name: "fpr", Default: "0.1", Help: "target FPR in (0, 1) of the pair when both are full: sets the hash count k and the capacity n of a buffer"},
	},
	build: buildA2,
}

// A2 is Yoon's aging Bloom filter with two active buffers (IEEE TKDE 2010),
// as this package reads it: the QHT paper only cites it, and this is written
// from that citation, not from Yoon's text (docs/papers.md has the
// reference).
//
// Two Bloom filters of m = mem/2 bits and k hash functions, active1 and
// active2, both queried; n counts the elements inserted into active1.
//
//	Observe(x): if x in active1: duplicate, nothing changes.
//	            else insert x into active1 (n++): a miss in active1 that hits
//	            active2 is copied forward, which is what makes both buffers
//	            "active" and keeps recently seen elements alive, LRU-like;
//	            if n reached the capacity: clear active2, swap the two
//	            (active2 <- active1, active1 <- the cleared one), n = 0.
//	            Duplicate iff x was in active2.
//
// Capacity: a buffer of m bits and k hashes that has taken the bits of n*
// distinct elements answers a false positive with probability about
// p(n*) = (1 - e^(-kn*/m))^k, and two such buffers at most 1 - (1-p)^2. For a
// target fpr the per-buffer bound is p = 1 - sqrt(1 - fpr), reached at
// n* = -(m/k) ln(1 - v), v = p^(1/k). But the count n is of insertions, and
// a distinct element that active1 falsely holds is not inserted though its
// bits are (already) in it: when the count reaches n, active1 holds the
// bits of n plus its false positives. Expected false positives while n*
// elements arrive are the integral of p(i), (m/k)(-ln(1-v) - sum_{i<=k}
// v^i/i), so the capacity is their difference,
//
//	n = floor((m/k) * sum_{i=1..k} v^i/i),
//
// for the k in 1..32 that makes n largest (the usual optimum k ~ log2(1/p)).
// With mem = 64KiB and fpr = 0.1: p = 0.0513, k = 4, n = 41811 insertions
// (n* = 42347). This correction is ours (about 1% of n at fpr = 0.1, 5% at
// 0.3); we do not know whether Yoon's count makes it. On a stream of
// distinct elements active2 is full and active1 fills from empty in each
// period, so the pair's FPR reaches fpr only at the end of a period and
// averages less (0.063 with these numbers).
//
// No false negative for a duplicate whose previous occurrence is fewer than
// n Observes back: an element inserted as the j-th of active1 stays in
// active1 or active2 through the next (n-j)+n >= n insertions, and each
// Observe inserts at most one element.
//
// Both buffers use the same k indices of a hash (Bloom's double hashing), so
// one index computation serves both. SizeBits is 2m; the counter n is not
// counted, as in the paper. A swap clears m bits in one Observe: a latency
// spike of m/64 word stores every n insertions.
type A2 struct {
	words    []uint64 // buffer 0 then buffer 1, wpb words each
	wpb      int
	m        int // bits per buffer
	k        int
	capacity int
	n        int // elements inserted into active1
	active   int // word offset of active1: 0 or wpb
	fpr      float64
	memBits  int // as requested, for String
}

var _ Filter = (*A2)(nil)

func buildA2(p *params, _ uint64) (Filter, error) {
	memBits, err := p.mem()
	if err != nil {
		return nil, err
	}
	fpr, err := p.float("fpr", a2DefaultFPR, 0, 1)
	if err != nil {
		return nil, err
	}
	if fpr <= 0 || fpr >= 1 {
		return nil, p.errorf("fpr", "must be strictly between 0 and 1")
	}
	m := memBits / 2
	k, capacity := a2Capacity(m, fpr)
	if capacity < 1 {
		return nil, fmt.Errorf("filters: %q: %w: two buffers of %d bits cannot hold one element at fpr=%g", p.spec, ErrTooSmall, m, fpr)
	}
	wpb := (m + 63) / 64
	return &A2{
		words:    make([]uint64, 2*wpb),
		wpb:      wpb,
		m:        m,
		k:        k,
		capacity: capacity,
		fpr:      fpr,
		memBits:  memBits,
	}, nil
}

// a2Capacity returns the hash count k and the capacity n, in insertions, of
// a buffer of m bits such that two full buffers answer a false positive with
// probability at most fpr (see A2).
func a2Capacity(m int, fpr float64) (k, n int) {
	p := 1 - math.Sqrt(1-fpr) // per buffer: 1 - (1-p)^2 = fpr
	bestK, bestN := 1, 0
	for k := 1; k <= a2MaxK; k++ {
		v := math.Pow(p, 1/float64(k))
		sum, vi := 0.0, 1.0
		for i := 1; i <= k; i++ {
			vi *= v
			sum += vi / float64(i)
		}
		if nk := int(float64(m) / float64(k) * sum); nk > bestN {
			bestK, bestN = k, nk
		}
	}
	return bestK, bestN
}

// Observe reports whether h is in either buffer, and inserts it into
// active1 unless it is there already. One pass sets active1's bits while
// testing both: setting the bits of an element active1 holds changes
// nothing.
func (a *A2) Observe(h uint64) bool {
	w := a.words
	a1, a2 := a.active, a.wpb-a.active
	step := bloomStep(h)
	in1, in2 := uint64(1), uint64(1)
	g := h
	for range a.k {
		i := mix.Reduce(g, a.m)
		wi, bit := i>>6, uint(i&63)
		old := w[a1+wi]
		in1 &= old >> bit
		in2 &= w[a2+wi] >> bit
		w[a1+wi] = old | 1<<bit
		g += step
	}
	if in1&1 != 0 {
		return true
	}
	a.n++
	if a.n == a.capacity {
		clear(w[a2 : a2+a.wpb])
		a.active = a2
		a.n = 0
	}
	return in2&1 != 0
}

// SizeBits is 2m: the two buffers.
func (a *A2) SizeBits() int { return 2 * a.m }

// Reset clears both buffers.
func (a *A2) Reset() {
	clear(a.words)
	a.n = 0
	a.active = 0
}

// String gives the canonical spec, e.g. "a2:mem=64KiB,fpr=0.1".
func (a *A2) String() string {
	return fmt.Sprintf("a2:mem=%s,fpr=%s", FormatMem(a.memBits), strconv.FormatFloat(a.fpr, 'g', -1, 64))
}

// K is the number of hash functions of each buffer.
func (a *A2) K() int { return a.k }

// Capacity is n, the elements active1 takes before the buffers swap.
func (a *A2) Capacity() int { return a.capacity }

// BufferBits is m, the bits of one buffer.
func (a *A2) BufferBits() int { return a.m }

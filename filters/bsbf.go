package filters

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"

	"github.com/flowdedup/flowdedup/mix"
)

// The four sampling Bloom filters of Bera, Dutta, Narang & Bhattacherjee
// ("Advanced Bloom Filter Based Algorithms for Efficient Approximate Data
// De-Duplication in Streams"): RSBF (Sec. 3), BSBF (Sec. 4), BSBFSD
// (Sec. 4.2) and RLBSBF (Sec. 5). They share one structure, SamplingBF, and
// differ only in when an element is inserted and which bits an insertion
// resets.

var rsbfFamily = &Family{
	Name:  "rsbf",
	Paper: "Bera, Dutta, Narang & Bhattacherjee, Sec. 3 (Reservoir Sampling based Bloom Filter)",
	About: "k Bloom filters of mem/k bits, one hash each; the first s elements are inserted, then a distinct one with probability s/i " +
		"(one random bit reset per filter), and every distinct one once s/i <= pstar (a set bit moved to each of its zero bits)",
	Params: []Param{memParam,
		{Name: "k", Default: "", Help: "Bloom filters k, 1..64 (give k or fpr, not both; the paper's Tables 4-9 use k=2)"},
		{Name: "fpr", Default: "0.1", Help: "threshold FPR_t in (0, 1): k = round((1 + ln(fpr)/ln(1-1/e))/2), Eq. 6.1 averaged with 1 (Sec. 6.1); 0.1 gives k=3"},
		{Name: "pstar", Default: "0.03", Help: "p* in [0, 1]: once s/i <= p*, every distinct element is inserted (0: never, pure reservoir sampling)"},
	},
	build: func(p *params, seed uint64) (Filter, error) { return buildSampling(p, seed, ruleRSBF) },
}

var bsbfFamily = &Family{
	Name:  "bsbf",
	Paper: "Bera, Dutta, Narang & Bhattacherjee, Sec. 4 (Biased Sampling based Bloom Filter)",
	About: "k Bloom filters of mem/k bits, one hash each; every element reported distinct is inserted after one random bit of each filter is reset",
	Params: []Param{memParam,
		{Name: "k", Default: "2", Help: "Bloom filters k, 1..64 (2: the paper's choice, Sec. 6.1 Table 1; k=1 fills up on distinct streams)"},
	},
	build: func(p *params, seed uint64) (Filter, error) { return buildSampling(p, seed, ruleBSBF) },
}

var bsbfsdFamily = &Family{
	Name:  "bsbfsd",
	Paper: "Bera, Dutta, Narang & Bhattacherjee, Sec. 4.2 (BSBF with Single Deletion)",
	About: "BSBF that resets one random bit of one random filter per insertion (fills up on long distinct streams)",
	Params: []Param{memParam,
		{Name: "k", Default: "2", Help: "Bloom filters k, 1..64 (2: the paper's choice, Sec. 6.1 Table 2)"},
	},
	build: func(p *params, seed uint64) (Filter, error) { return buildSampling(p, seed, ruleBSBFSD) },
}

var rlbsbfFamily = &Family{
	Name:  "rlbsbf",
	Paper: "Bera, Dutta, Narang & Bhattacherjee, Sec. 5 (Randomized Load Balanced BSBF)",
	About: "BSBF in which each filter resets a random bit with probability load/s per insertion (load: its set bits)",
	Params: []Param{memParam,
		{Name: "k", Default: "2", Help: "Bloom filters k, 1..64 (2: the paper's choice, Sec. 6.1 Table 3)"},
	},
	build: func(p *params, seed uint64) (Filter, error) { return buildSampling(p, seed, ruleRLBSBF) },
}

// samplingRule is what distinguishes the four filters: when an element is
// inserted, and which bits each insertion resets.
type samplingRule uint8

const (
	ruleRSBF samplingRule = iota
	ruleBSBF
	ruleBSBFSD
	ruleRLBSBF
)

var samplingNames = [...]string{ruleRSBF: "rsbf", ruleBSBF: "bsbf", ruleBSBFSD: "bsbfsd", ruleRLBSBF: "rlbsbf"}

const (
	samplingMaxK       = 64
	samplingDefaultK   = 2
	rsbfDefaultFPR     = 0.1
	rsbfDefaultPStar   = 0.03
	rsbfSetBitAttempts = 64
)

// SamplingBF is RSBF, BSBF, BSBFSD or RLBSBF: k Bloom filters of s =
// floor(M/k) bits each, one hash function each. An element is a duplicate
// iff its bit is set in all k filters (Algorithm 1; Algorithms 2-4 print
// DISTINCT and DUPLICATE swapped, see docs/papers.md). Only an element
// reported distinct ever changes a bit (inserting one whose k bits are all
// set changes nothing), and every rule resets bits before it sets the
// element's own, so an element just inserted is reported duplicate if it
// comes again at once:
//
//   - BSBF: every distinct element is inserted after one random bit of each
//     filter is reset.
//   - BSBFSD: the same with one random bit of one random filter.
//   - RLBSBF: each filter resets a random bit with probability L/s, L its
//     load (set bits) before the insertion.
//   - RSBF: with i the element's position in the stream (duplicates
//     included, as "the current length of the stream"), the first s elements
//     are inserted with no reset; then, while s/i > p*, a distinct element is
//     inserted with probability s/i, resetting one random bit per filter;
//     once s/i <= p*, every distinct element is inserted and, for each of its
//     bits that is 0, one set bit of that filter is reset first, so the load
//     of every filter stays constant from then on.
//
// Which bit is reset, read from the paper: BSBF, BSBFSD, RLBSBF and RSBF
// before p* reset a uniformly random position, which may already be 0 (Sec. 4
// says so: "the chosen bit for deletion might have already been set to 0";
// the RSBF and BSBFSD deletions are "the same"). RSBF after p* resets a bit
// "which is set to 1" (Algorithm 1): a uniformly random set bit, found by
// rejection (up to 64 uniform draws); when all of them miss, which happens
// with probability (1-L/s)^64, the first set bit at or after one more random
// position (cyclically) is taken instead. If the filter has no set bit, none
// is reset.
//
// Algorithm 1 words RSBF's sampled insertion as "insert e ... then randomly
// reset one bit", but its analysis (Eq. 3.11) and BSBF's "same" deletion
// reset first; reset-then-set is used for all four.
//
// The k bit positions come from the one 64-bit hash by double hashing, as
// Bloom's: filter f uses mix.Reduce(h + f*step(h), s). Random choices come from
// the filter's own generator, in a fixed order (the tests' reference model
// mirrors it). Every filter's load is a running count, updated on each bit
// that changes and never recounted, so RLBSBF's L/s costs nothing.
//
// On a stream of distinct elements (most flows of a trace), the fill q of
// each filter settles where 1-q = (1-q^k)c(q), c the chance an insertion
// clears a set bit: BSBF (c=q) at q=0.618 for k=2 (FPR q^2 = 0.382), RLBSBF
// (c=q^2) at 0.755 (FPR 0.570), RSBF frozen near BSBF's value once past p*.
// BSBFSD (c=q/k), and BSBF with k=1, have no such point below 1: they fill
// up and end up reporting nearly every element a duplicate. The paper's
// Lemma 1 predicts fill 1 for BSBF too; bsbf_test.go shows why it does not.
//
// Each filter starts on a word boundary; the at most 63 padding bits per
// filter are always 0 and not counted by SizeBits, which is k*s as the paper
// counts it.
type SamplingBF struct {
	words  []uint64 // filter f is words[f*wpf : (f+1)*wpf], bits [0, s) of it
	load   []int    // set bits of each filter
	s      int      // bits per filter
	k      int
	stride int // bits from one filter's start to the next: 64*wpf
	rule   samplingRule

	memBits int // as requested, for String
	seed    uint64
	rng     mix.Wyrand

	// RSBF only.
	n      uint64 // elements seen, i; stops counting once phase3 is reached
	phase3 uint64 // first i with s/i <= p*; MaxUint64 when p* = 0
	pstar  float64
}

var _ Filter = (*SamplingBF)(nil)

func buildSampling(p *params, seed uint64, rule samplingRule) (Filter, error) {
	memBits, err := p.mem()
	if err != nil {
		return nil, err
	}
	var k int
	pstar := 0.0
	if rule == ruleRSBF {
		if k, err = rsbfParseK(p); err != nil {
			return nil, err
		}
		if pstar, err = p.float("pstar", rsbfDefaultPStar, 0, 1); err != nil {
			return nil, err
		}
	} else if k, err = p.int("k", samplingDefaultK, 1, samplingMaxK); err != nil {
		return nil, err
	}
	if memBits < k {
		return nil, p.tooSmall(memBits, k, fmt.Sprintf("k=%d filters of at least 1 bit", k))
	}
	return newSampling(rule, memBits, k, pstar, seed), nil
}

// rsbfParseK reads RSBF's k: given, or derived from fpr by RSBFK.
func rsbfParseK(p *params) (int, error) {
	if p.has("k") && p.has("fpr") {
		return 0, p.errorf("k", "give k or fpr, not both")
	}
	if p.has("k") {
		return p.int("k", 0, 1, samplingMaxK)
	}
	fpr, err := p.float("fpr", rsbfDefaultFPR, 0, 1)
	if err != nil {
		return 0, err
	}
	if fpr <= 0 || fpr >= 1 {
		return 0, p.errorf("fpr", "must be in (0, 1)")
	}
	k := RSBFK(fpr)
	if k > samplingMaxK {
		return 0, p.errorf("fpr", "gives k=%d filters, more than %d", k, samplingMaxK)
	}
	return k, nil
}

// RSBFK is RSBF's number of filters for a threshold FPR (Sec. 6.1): Eq. 6.1,
// k = ln(FPR_t)/ln(1-1/e) (the k at which (1-1/e)^k, the FP rate once the
// first s elements have filled each filter to 1-1/e, equals FPR_t),
// averaged with 1 because FNR is lowest at k=1, then rounded to the nearest
// integer, at least 1. FPR_t=0.1 gives (1+5.02)/2 = 3.01, so k=3.
func RSBFK(fpr float64) int {
	x := (1 + math.Log(fpr)/math.Log(1-1/math.E)) / 2
	if !(x < samplingMaxK+1) { // also NaN
		return samplingMaxK + 1
	}
	return max(1, int(math.Round(x)))
}

func newSampling(rule samplingRule, memBits, k int, pstar float64, seed uint64) *SamplingBF {
	s := memBits / k
	wpf := (s + 63) / 64
	b := &SamplingBF{
		words:   make([]uint64, k*wpf),
		load:    make([]int, k),
		s:       s,
		k:       k,
		stride:  64 * wpf,
		rule:    rule,
		pstar:   pstar,
		phase3:  math.MaxUint64,
		memBits: memBits,
		seed:    seed,
		rng:     mix.NewWyrand(seed),
	}
	if rule == ruleRSBF {
		b.phase3 = rsbfPhase3Start(s, pstar)
	}
	return b
}

// rsbfPhase3Start is the first i with s/i <= p*, evaluated as written; it is
// never before s+1 (the first s elements are inserted whatever p* says), and
// MaxUint64 when p* = 0 or the point is beyond any stream.
func rsbfPhase3Start(s int, pstar float64) uint64 {
	fs := float64(s)
	x := math.Ceil(fs / pstar)
	if pstar <= 0 || !(x < 1<<62) {
		return math.MaxUint64
	}
	i := uint64(max(x, 1))
	// Correct float rounding of s/p* either way.
	for i > 1 && fs/float64(i-1) <= pstar {
		i--
	}
	for fs/float64(i) > pstar {
		i++
	}
	return max(i, uint64(s)+1)
}

// pos is the bit index in words of h's bit in filter f, for the f-th value
// g = h + f*step(h) of the double hashing.
func (b *SamplingBF) pos(f int, g uint64) int { return f*b.stride + mix.Reduce(g, b.s) }

func (b *SamplingBF) isSet(i int) bool { return b.words[i>>6]>>(i&63)&1 != 0 }

// set sets bit i of filter f and counts it if it was 0.
func (b *SamplingBF) set(f, i int) {
	w := &b.words[i>>6]
	b.load[f] += int(^*w >> (i & 63) & 1)
	*w |= 1 << (i & 63)
}

// clear resets bit i of filter f and uncounts it if it was 1.
func (b *SamplingBF) clear(f, i int) {
	w := &b.words[i>>6]
	b.load[f] -= int(*w >> (i & 63) & 1)
	*w &^= 1 << (i & 63)
}

// resetRandom resets a uniformly random position of filter f (maybe a 0).
func (b *SamplingBF) resetRandom(f int) { b.clear(f, f*b.stride+b.rng.IntN(b.s)) }

// insert sets h's k bits; step is bloomStep(h).
func (b *SamplingBF) insert(h, step uint64) {
	g := h
	for f := range b.k {
		b.set(f, b.pos(f, g))
		g += step
	}
}

// Observe reports whether all of h's k bits are set, then inserts h or not
// and resets bits as the filter's rule says.
func (b *SamplingBF) Observe(h uint64) bool {
	// Branch-free probe: each bit is a coin toss once the filter is stable.
	step := bloomStep(h)
	all := uint64(1)
	g := h
	for f := range b.k {
		i := b.pos(f, g)
		all &= b.words[i>>6] >> (i & 63)
		g += step
	}
	dup := all&1 != 0
	if b.rule == ruleRSBF {
		b.observeRSBF(h, step, dup)
		return dup
	}
	if dup {
		return true
	}
	switch b.rule {
	case ruleBSBF:
		for f := range b.k {
			b.resetRandom(f)
		}
	case ruleBSBFSD:
		b.resetRandom(b.rng.IntN(b.k))
	case ruleRLBSBF:
		for f := range b.k {
			// Position first, then the coin: the paper's order, and the
			// reference model's.
			i := f*b.stride + b.rng.IntN(b.s)
			if b.rng.IntN(b.s) < b.load[f] {
				b.clear(f, i)
			}
		}
	}
	b.insert(h, step)
	return false
}

// observeRSBF applies Algorithm 1's update for the i-th element, whose
// probe gave dup.
func (b *SamplingBF) observeRSBF(h, step uint64, dup bool) {
	if b.n < b.phase3 {
		b.n++
	}
	i := b.n
	switch {
	case i <= uint64(b.s): // phase 1: the first s elements, no reset
		b.insert(h, step)
	case dup: // all bits set: nothing to insert
	case i >= b.phase3: // phase 3: move a set bit onto each zero bit
		g := h
		for f := range b.k {
			if p := b.pos(f, g); !b.isSet(p) {
				b.resetSetBit(f)
				b.set(f, p)
			}
			g += step
		}
	default: // phase 2: insert with probability s/i
		if hi, _ := bits.Mul64(b.rng.Uint64(), i); hi < uint64(b.s) {
			for f := range b.k {
				b.resetRandom(f)
			}
			b.insert(h, step)
		}
	}
}

// resetSetBit resets a random set bit of filter f: uniform by rejection, or
// after rsbfSetBitAttempts misses (filter nearly empty) the first set bit at
// or after a random position, wrapping at the filter's end.
func (b *SamplingBF) resetSetBit(f int) {
	if b.load[f] == 0 {
		return
	}
	base := f * b.stride
	for range rsbfSetBitAttempts {
		if i := base + b.rng.IntN(b.s); b.isSet(i) {
			b.clear(f, i)
			return
		}
	}
	wpf := b.stride / 64
	start := b.rng.IntN(b.s)
	j := start >> 6
	w := b.words[base/64+j] & (^uint64(0) << (start & 63))
	for w == 0 { // ends: load > 0, and the start word is read whole on wrap
		if j++; j == wpf {
			j = 0
		}
		w = b.words[base/64+j]
	}
	b.clear(f, base+64*j+bits.TrailingZeros64(w))
}

// SizeBits is k*s = k*floor(mem/k), the filters' bits.
func (b *SamplingBF) SizeBits() int { return b.k * b.s }

// Reset clears every filter, the load counts and RSBF's stream position,
// and reseeds the generator: the filter behaves exactly as a new one.
func (b *SamplingBF) Reset() {
	clear(b.words)
	clear(b.load)
	b.n = 0
	b.rng = mix.NewWyrand(b.seed)
}

// String gives the canonical spec, e.g. "bsbf:mem=64KiB,k=2" or
// "rsbf:mem=64KiB,k=3,pstar=0.03" (k explicit, whether given or derived).
func (b *SamplingBF) String() string {
	s := fmt.Sprintf("%s:mem=%s,k=%d", samplingNames[b.rule], FormatMem(b.memBits), b.k)
	if b.rule == ruleRSBF {
		s += ",pstar=" + strconv.FormatFloat(b.pstar, 'g', -1, 64)
	}
	return s
}

// K is the number of Bloom filters (and hash functions).
func (b *SamplingBF) K() int { return b.k }

// FilterBits is s, the bits of each filter.
func (b *SamplingBF) FilterBits() int { return b.s }

// Load is the number of set bits of filter f, from the running count.
func (b *SamplingBF) Load(f int) int { return b.load[f] }

// FillRatio is the fraction of the k*s bits that are set, from the running
// counts (no scan).
func (b *SamplingBF) FillRatio() float64 {
	n := 0
	for _, l := range b.load {
		n += l
	}
	return float64(n) / float64(b.SizeBits())
}

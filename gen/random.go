package gen

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"time"
)

// clock yields the offsets of n packet timestamps from the start: the first
// is 0, the others the order statistics of n-1 uniform points over d,
// produced in increasing order by drawing each one as the minimum of the
// points still to come.
type clock struct {
	left int     // points still to draw
	t    float64 // the last point, as a fraction of d
	d    time.Duration
	last time.Duration
	done bool
}

func newClock(n int, d time.Duration) clock { return clock{left: n - 1, d: d} }

func (c *clock) next(r *stream) time.Duration {
	if !c.done {
		c.done = true
		return 0
	}
	// The minimum of k uniforms on [t, 1] is t + (1-t)(1 - U^(1/k)).
	u := 1 - r.float64() // in (0, 1]
	c.t += (1 - c.t) * -math.Expm1(math.Log(u)/float64(c.left))
	c.left--
	off := min(time.Duration(c.t*float64(c.d)), c.d)
	c.last = max(c.last, off) // rounding must never step back
	return c.last
}

// selector answers take exactly want times out of left calls, each subset
// of calls equally likely (selection sampling, Knuth's Algorithm S).
type selector struct{ left, want int }

func (s *selector) take(r *stream) bool {
	if s.left <= 0 {
		return false
	}
	yes := r.below(s.left) < s.want
	s.left--
	if yes {
		s.want--
	}
	return yes
}

// stream is a seeded PCG generator with the few draws the generator needs,
// written here rather than taken from math/rand/v2's Rand so that outputs
// stay the same across Go releases (only the PCG source's sequence is
// specified).
type stream struct{ pcg rand.PCG }

func (s *stream) seed(seed, id uint64) { s.pcg.Seed(seed, id) }

func (s *stream) next() uint64 { return s.pcg.Uint64() }

// below returns a uniform int in [0, n), n > 0, by Lemire's multiply-shift
// with rejection.
func (s *stream) below(n int) int {
	hi, lo := bits.Mul64(s.next(), uint64(n))
	if lo < uint64(n) {
		thresh := -uint64(n) % uint64(n)
		for lo < thresh {
			hi, lo = bits.Mul64(s.next(), uint64(n))
		}
	}
	return int(hi)
}

// float64 returns a uniform float64 in [0, 1).
func (s *stream) float64() float64 { return float64(s.next()>>11) * 0x1p-53 }

// mix hashes x under key (the splitmix64 finaliser): for choices that must
// be a function of a host or pair rather than drawn in sequence.
func mix(key, x uint64) uint64 {
	z := x + key + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// scramble is a keyed bijection on w-bit values: xor with a key, multiply
// by an odd constant and xor-shift are each invertible modulo 2^w.
func scramble(x uint64, w uint, key uint64) uint64 {
	mask := uint64(1)<<w - 1 // all ones for w = 64: the shift gives 0
	for round := range uint64(3) {
		x = (x ^ mix(key, round)) & mask
		x = x * 0xd6e8feb86659fd93 & mask
		x ^= x >> ((w + 1) / 2)
	}
	return x
}

// permuteIndex maps i in [0, n) to [0, n) by a keyed bijection: scramble
// over the smallest power of two holding n, walking the cycle until it
// lands back in range (cycle walking; under two steps on average).
func permuteIndex(i, n, key uint64) uint64 {
	w := uint(bits.Len64(n - 1))
	if w == 0 {
		return 0
	}
	for {
		i = scramble(i, w, key)
		if i < n {
			return i
		}
	}
}

// alias samples an index in [0, n) from a fixed distribution in O(1) by
// Walker's alias method (Vose's construction): index i is kept with
// probability prob[i], else replaced by alias[i].
type alias struct {
	prob  []float64
	alias []uint32
}

// newZipfAlias returns the alias table of ranks 1..n, as indices 0..n-1,
// with P(rank k) ∝ k^-s.
func newZipfAlias(n int, s float64) *alias {
	w := make([]float64, n)
	var total float64
	for i := range w {
		w[i] = math.Exp(-s * math.Log(float64(i+1)))
		total += w[i]
	}
	return newAlias(w, total)
}

// newAlias builds the table of weights w, whose sum is total; it reuses w.
func newAlias(w []float64, total float64) *alias {
	n := len(w)
	a := &alias{prob: w, alias: make([]uint32, n)}
	// Scale to mean 1, then pair each under-full index with an over-full
	// one that tops it up. work holds the under-full indices from the
	// front and the over-full ones from the back.
	work := make([]uint32, n)
	small, large := 0, n
	for i := range w {
		w[i] *= float64(n) / total
		if w[i] < 1 {
			work[small] = uint32(i)
			small++
		} else {
			large--
			work[large] = uint32(i)
		}
	}
	for small > 0 && large < n {
		small--
		l, g := work[small], work[large]
		a.alias[l] = g // prob[l] already holds l's share
		w[g] -= 1 - w[l]
		if w[g] < 1 {
			large++
			work[small] = g
			small++
		}
	}
	// Whatever is left is full up to rounding.
	for _, i := range work[:small] {
		w[i] = 1
	}
	for _, i := range work[large:] {
		w[i] = 1
	}
	return a
}

func (a *alias) draw(r *stream) int {
	i := r.below(len(a.prob))
	if r.float64() < a.prob[i] {
		return i
	}
	return int(a.alias[i])
}

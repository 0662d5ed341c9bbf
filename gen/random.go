package gen

import (
	"math"
	"math/bits"
	"time"

	"github.com/flowdedup/flowdedup/mix"
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

func (c *clock) next(r *mix.PCG) time.Duration {
	if !c.done {
		c.done = true
		return 0
	}
	// The minimum of k uniforms on [t, 1] is t + (1-t)(1 - U^(1/k)).
	u := 1 - r.Float64() // in (0, 1]
	c.t += (1 - c.t) * -math.Expm1(math.Log(u)/float64(c.left))
	c.left--
	off := min(time.Duration(c.t*float64(c.d)), c.d)
	c.last = max(c.last, off) // rounding must never step back
	return c.last
}

// selector answers take exactly want times out of left calls, each subset
// of calls equally likely (selection sampling, Knuth's Algorithm S).
type selector struct{ left, want int }

func (s *selector) take(r *mix.PCG) bool {
	if s.left <= 0 {
		return false
	}
	yes := r.IntN(s.left) < s.want
	s.left--
	if yes {
		s.want--
	}
	return yes
}

// keyed hashes x under key (the splitmix64 finaliser of x+key, one Golden
// step on): for choices that must be a function of a host or pair rather
// than drawn in sequence.
func keyed(key, x uint64) uint64 { return mix.Mix64(x + key + mix.Golden) }

// scramble is a keyed bijection on w-bit values: xor with a key, multiply
// by an odd constant and xor-shift are each invertible modulo 2^w.
func scramble(x uint64, w uint, key uint64) uint64 {
	mask := uint64(1)<<w - 1 // all ones for w = 64: the shift gives 0
	for round := range uint64(3) {
		x = (x ^ keyed(key, round)) & mask
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

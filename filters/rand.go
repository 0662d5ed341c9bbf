package filters

import "math/bits"

// rng is a small, allocation-free pseudo-random generator (wyrand) for the
// filters' own random choices: decrement positions, eviction victims. It is
// not for hashing keys, and not cryptographic. The zero value is usable but
// every filter seeds it from New's seed.
type rng struct{ s uint64 }

func newRNG(seed uint64) rng { return rng{s: mix64(seed ^ 0x9e3779b97f4a7c15)} }

func (r *rng) next() uint64 {
	r.s += 0xa0761d6478bd642f
	hi, lo := bits.Mul64(r.s, r.s^0xe7037ed1a0b428db)
	return hi ^ lo
}

// intn returns a uniform value in [0, n) by multiply-shift (Lemire); the bias
// is at most n/2^64, far below anything a test can see.
func (r *rng) intn(n int) int { return reduce(r.next(), n) }

// float64 returns a uniform value in [0, 1).
func (r *rng) float64() float64 { return float64(r.next()>>11) * 0x1p-53 }

// reduce maps a uniform 64-bit h onto [0, n) by multiply-shift instead of
// modulo: it uses the high bits of h, costs one multiply, no division.
func reduce(h uint64, n int) int {
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

// mix64 is a bijective finaliser (splitmix64's) that turns a hash into an
// independent-looking one, for deriving second hashes.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

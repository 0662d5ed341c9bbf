package mix

import "math/bits"

// Golden is 2^64 divided by the golden ratio, rounded to odd: splitmix64's
// increment. Adding multiples of it spreads nearby seeds far apart before
// Mix64.
const Golden = 0x9e3779b97f4a7c15

// Mix64 is splitmix64's finaliser (Stafford's Mix13 variant): a bijection
// of 64-bit values in which every output bit depends on every input bit.
// It turns a hash or a counter into an independent-looking value, for
// second hashes and derived seeds. Mix64(0) is 0.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Reduce maps a uniform 64-bit h onto [0, n) by multiply-shift (Lemire):
// the high word of h*n. It costs one multiplication and no division, and
// reads the high bits of h. The bias is at most n/2^64. n must be positive.
func Reduce(h uint64, n int) int {
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

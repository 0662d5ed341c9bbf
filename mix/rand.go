package mix

import (
	"math/bits"
	"math/rand/v2"
)

// SplitMix is Vigna's splitmix64 generator: a Golden-spaced counter passed
// through Mix64. The zero value is the generator seeded with 0.
type SplitMix struct{ s uint64 }

// NewSplitMix returns the generator whose state is seed, as the reference
// implementation seeds it.
func NewSplitMix(seed uint64) SplitMix { return SplitMix{s: seed} }

// Uint64 returns the next 64 random bits.
func (r *SplitMix) Uint64() uint64 {
	r.s += Golden
	return Mix64(r.s)
}

// Uint64N returns a uniform value in [0, n), n > 0, with no bias, by
// Lemire's multiply-shift with rejection ("Fast random integer generation
// in an interval", ACM TOMACS, 2019): the high word of x*n, drawn again
// while the low word falls among the 2^64 mod n values that would favour
// some results. PCG.Uint64N is the same code: a generic helper would be
// called through a dictionary, not inlined, and make the generator escape.
func (r *SplitMix) Uint64N(n uint64) uint64 {
	hi, lo := bits.Mul64(r.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), n)
		}
	}
	return hi
}

// IntN is Uint64N for int bounds, n > 0.
func (r *SplitMix) IntN(n int) int { return int(r.Uint64N(uint64(n))) }

// Float64 returns a uniform value in [0, 1): the top 53 bits of Uint64.
func (r *SplitMix) Float64() float64 { return unit(r.Uint64()) }

// PCG is math/rand/v2's PCG source with Uint64N, IntN and Float64 defined
// here rather than taken from math/rand/v2's Rand: only the source's
// sequence is specified by the standard library, and flowdedup gen's output
// must not change with the Go release.
type PCG struct{ pcg rand.PCG }

// NewPCG returns the PCG generator of math/rand/v2's NewPCG(seed, stream).
func NewPCG(seed, stream uint64) PCG {
	var r PCG
	r.pcg.Seed(seed, stream)
	return r
}

// Uint64 returns the next 64 random bits.
func (r *PCG) Uint64() uint64 { return r.pcg.Uint64() }

// Uint64N returns a uniform value in [0, n), n > 0, with no bias: as
// SplitMix.Uint64N.
func (r *PCG) Uint64N(n uint64) uint64 {
	hi, lo := bits.Mul64(r.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), n)
		}
	}
	return hi
}

// IntN is Uint64N for int bounds, n > 0.
func (r *PCG) IntN(n int) int { return int(r.Uint64N(uint64(n))) }

// Float64 returns a uniform value in [0, 1).
func (r *PCG) Float64() float64 { return unit(r.Uint64()) }

// Wyrand is Wang Yi's wyrand (wyhash.h), with the constants of wyhash's
// releases before final4: a Weyl sequence folded by a 64x64->128-bit
// multiplication. It is the cheapest of the generators here, for draws on
// hot paths.
type Wyrand struct{ s uint64 }

// NewWyrand returns a generator whose state is Mix64(seed ^ Golden), so that
// neighbouring seeds (a filter's seed and seed+1) start far apart.
func NewWyrand(seed uint64) Wyrand { return Wyrand{s: Mix64(seed ^ Golden)} }

// Uint64 returns the next 64 random bits.
func (r *Wyrand) Uint64() uint64 {
	r.s += 0xa0761d6478bd642f
	hi, lo := bits.Mul64(r.s, r.s^0xe7037ed1a0b428db)
	return hi ^ lo
}

// IntN returns a value in [0, n), n > 0, by Reduce: without rejection, so
// it costs one multiplication more than Uint64 and is biased by at most
// n/2^64, far below what any use here can see.
func (r *Wyrand) IntN(n int) int { return Reduce(r.Uint64(), n) }

// Float64 returns a uniform value in [0, 1).
func (r *Wyrand) Float64() float64 { return unit(r.Uint64()) }

// Rand is what the samplers draw from: *SplitMix and *PCG.
type Rand interface {
	Uint64N(n uint64) uint64
	Float64() float64
}

var (
	_ Rand = (*SplitMix)(nil)
	_ Rand = (*PCG)(nil)
)

// unit maps 64 random bits to [0, 1) with the 53 bits a float64 holds.
func unit(x uint64) float64 { return float64(x>>11) * 0x1p-53 }

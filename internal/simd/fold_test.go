package simd

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/zeebo/xxh3"
)

// XXH3's default secret, the little-endian words at bytes 24, 32, 40 and
// 48 (the xxHash specification's kSecret): the 9-to-16-byte path's keys.
const (
	secret024 = 0x1f67b3b7a4a44072
	secret032 = 0x78e5c0cc4ee679cb
	secret040 = 0x2172ffcc7dd05a82
	secret048 = 0x8e2443f7744608b8
)

// TestFold9to16IsXXH3 checks the scalar twin and Fold9to16 (whichever path
// it takes) against github.com/zeebo/xxh3: for an input b of 9 to 16
// bytes, XXH3-64 with a seed folds lo, its first 8 bytes xored with
// (secret[24:32]^secret[32:40]) + seed, and hi, its last 8 xored with
// (secret[40:48]^secret[48:56]) - seed, with n = len(b).
func TestFold9to16IsXXH3(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const keys = 1000
	for n := 9; n <= 16; n++ {
		lo, hi := make([]uint64, keys), make([]uint64, keys)
		want, seeds := make([]uint64, keys), make([]uint64, keys)
		for i := range lo {
			b := make([]byte, n)
			for j := range b {
				b[j] = byte(r.Uint32())
			}
			if i%7 == 0 {
				for j := range b {
					b[j] = 0xff
				}
			}
			seed := r.Uint64()
			if i < len(edgeWords) {
				seed = edgeWords[i]
			}
			seeds[i] = seed
			lo[i] = binary.LittleEndian.Uint64(b) ^ (secret024 ^ secret032 + seed)
			hi[i] = binary.LittleEndian.Uint64(b[n-8:]) ^ (secret040 ^ secret048 - seed)
			want[i] = xxh3.HashSeed(b, seed)
		}
		got := make([]uint64, keys)
		fold9to16Scalar(got, lo, hi, uint64(n))
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("n=%d seed %#x: fold9to16Scalar = %#x, xxh3.HashSeed = %#x", n, seeds[i], got[i], want[i])
			}
		}
		Fold9to16(lo, lo, hi, uint64(n))
		for i := range lo {
			if lo[i] != want[i] {
				t.Fatalf("n=%d seed %#x: Fold9to16 = %#x, xxh3.HashSeed = %#x", n, seeds[i], lo[i], want[i])
			}
		}
	}
}

// TestFold9to16VectorIsScalar compares the two paths bit for bit on every
// length from 0 to 67, with edge words (all ones: the largest carries of
// the 128-bit product) among random ones, in place on lo and on hi.
func TestFold9to16VectorIsScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for round := range 50 {
		for n := range 68 {
			lo, hi := randomWords(r, n), randomWords(r, n)
			ln := []uint64{9, 14, 16, 0, ^uint64(0), r.Uint64()}[round%6]
			want := make([]uint64, n)
			fold9to16Scalar(want, lo, hi, ln)
			got := make([]uint64, n)
			fold9to16Vector(got, lo, hi, ln)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("len %d n %d: lo %#x hi %#x: vector %#x, scalar %#x", n, ln, lo[i], hi[i], got[i], want[i])
				}
			}
			if Available() {
				l2, h2 := append([]uint64(nil), lo...), append([]uint64(nil), hi...)
				fold9to16Vector(l2, l2, hi, ln)
				fold9to16Vector(h2, lo, h2, ln)
				for i := range want {
					if l2[i] != want[i] || h2[i] != want[i] {
						t.Fatalf("in place, len %d [%d]: %#x %#x, scalar %#x", n, i, l2[i], h2[i], want[i])
					}
				}
			}
		}
	}
}

func TestFold9to16BadLengths(t *testing.T) {
	for _, c := range []struct{ dst, lo, hi int }{{3, 4, 4}, {4, 4, 3}, {4, 3, 4}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("dst %d lo %d hi %d: no panic", c.dst, c.lo, c.hi)
				}
			}()
			Fold9to16(make([]uint64, c.dst), make([]uint64, c.lo), make([]uint64, c.hi), 9)
		}()
	}
}

func TestFold9to16DoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	lo, hi := randomWords(r, 256), randomWords(r, 256)
	dst := make([]uint64, 256)
	if a := testing.AllocsPerRun(100, func() { Fold9to16(dst, lo, hi, 14) }); a != 0 {
		t.Errorf("Fold9to16: %v allocations a call", a)
	}
}

func BenchmarkFold9to16(b *testing.B) {
	r := rand.New(rand.NewPCG(27, 28))
	lo, hi := randomWords(r, benchBatch), randomWords(r, benchBatch)
	dst := make([]uint64, benchBatch)
	benchPair(b, func() { fold9to16Scalar(dst, lo, hi, 14) }, func() { fold9to16Vector(dst, lo, hi, 14) })
}

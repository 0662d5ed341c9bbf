package simd

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/cpu"
)

// TestVectorPathChosen checks that the GOEXPERIMENT=simd amd64 build takes
// the vector path on a CPU with AVX-512 (F, DQ, VL, BW: what the kernels
// use), judged by golang.org/x/sys/cpu rather than archsimd, and that no
// other build claims one.
func TestVectorPathChosen(t *testing.T) {
	want := vectorBuild && runtime.GOARCH == "amd64" && cpu.X86.HasAVX512F &&
		cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW
	if Available() != want {
		t.Fatalf("Available() = %v, want %v (vector build %v, AVX-512 F/DQ/VL/BW %v/%v/%v/%v)", Available(), want,
			vectorBuild, cpu.X86.HasAVX512F, cpu.X86.HasAVX512DQ, cpu.X86.HasAVX512VL, cpu.X86.HasAVX512BW)
	}
	if !vectorBuild {
		t.Log("not the GOEXPERIMENT=simd amd64 build: scalar twins only")
	}
}

func TestSetVector(t *testing.T) {
	was := SetVector(false)
	defer SetVector(was)
	if Vector() {
		t.Fatal("Vector() after SetVector(false)")
	}
	if SetVector(true) {
		t.Fatal("SetVector(true) after SetVector(false) returned true")
	}
	if Vector() != Available() {
		t.Fatalf("Vector() = %v after SetVector(true), Available() = %v", Vector(), Available())
	}
}

// edgeWords are inputs at the ends of the ranges: the carries, rotations
// and shifts of the kernels meet them.
var edgeWords = []uint64{0, 1, 2, 0x7fffffffffffffff, 0x8000000000000000, ^uint64(0), ^uint64(1),
	0xffffffff, 0x100000000, 0xffffffff00000000, 0x00000000ffffffff, 0x5555555555555555, 0xaaaaaaaaaaaaaaaa,
	0x0123456789abcdef, 0xfedcba9876543210, rrmxmxMul, 0x8000000080000000, 0x7fffffff7fffffff}

// randomWords returns n words: edge words and random ones mixed.
func randomWords(r *rand.Rand, n int) []uint64 {
	w := make([]uint64, n)
	for i := range w {
		if r.IntN(4) == 0 {
			w[i] = edgeWords[r.IntN(len(edgeWords))]
		} else {
			w[i] = r.Uint64()
		}
	}
	return w
}

// XXH3's default secret, the little-endian words at bytes 8 and 16 (the
// xxHash specification's kSecret): the 4-to-8-byte path's key.
const (
	secret008 = 0x1cad21f72c81017c
	secret016 = 0xdb979083e96dd4de
)

// TestRRMXMXIsXXH3 checks the scalar twin against github.com/zeebo/xxh3:
// for an input b of 4 to 8 bytes, XXH3-64 with a seed is rrmxmx of the
// spec's keyed word (its first and last 4 bytes, little-endian, last |
// first<<32, xored with secret[8:16]^secret[16:24] minus the seed with its
// low half byte-swapped into the high one), with n = len(b).
func TestRRMXMXIsXXH3(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const keys = 1000
	for _, n := range []int{4, 5, 6, 7, 8} {
		x := make([]uint64, keys)
		want := make([]uint64, keys)
		seeds := make([]uint64, keys)
		for i := range x {
			b := make([]byte, n)
			for j := range b {
				b[j] = byte(r.Uint32())
			}
			seed := r.Uint64()
			if i < len(edgeWords) {
				seed = edgeWords[i]
			}
			seeds[i] = seed
			s := seed ^ uint64(bits.ReverseBytes32(uint32(seed)))<<32
			first := uint64(binary.LittleEndian.Uint32(b))
			last := uint64(binary.LittleEndian.Uint32(b[n-4:]))
			x[i] = (last | first<<32) ^ (secret008 ^ secret016 - s)
			want[i] = xxh3.HashSeed(b, seed)
		}
		got := make([]uint64, keys)
		rrmxmxScalar(got, x, uint64(n))
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("n=%d seed %#x: rrmxmxScalar = %#x, xxh3.HashSeed = %#x", n, seeds[i], got[i], want[i])
			}
		}
		// And RRMXMX, whichever path it takes, in place.
		RRMXMX(x, x, uint64(n))
		for i := range x {
			if x[i] != want[i] {
				t.Fatalf("n=%d seed %#x: RRMXMX = %#x, xxh3.HashSeed = %#x", n, seeds[i], x[i], want[i])
			}
		}
	}
}

// TestRRMXMXVectorIsScalar compares the two paths bit for bit on every
// length from 0 to 67 (whole vectors and tails) and on in-place calls.
func TestRRMXMXVectorIsScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 50 {
		for n := range 68 {
			x := randomWords(r, n)
			ln := []uint64{4, 5, 8, 0, ^uint64(0), r.Uint64()}[round%6]
			want := make([]uint64, n)
			rrmxmxScalar(want, x, ln)
			got := make([]uint64, n)
			rrmxmxVector(got, x, ln)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("len %d n %d: x[%d]=%#x: vector %#x, scalar %#x", n, ln, i, x[i], got[i], want[i])
				}
			}
			if Available() {
				rrmxmxVector(x, x, ln)
				for i := range want {
					if x[i] != want[i] {
						t.Fatalf("in place, len %d: [%d]: vector %#x, scalar %#x", n, i, x[i], want[i])
					}
				}
			}
		}
	}
}

func TestRRMXMXShortDst(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic with dst shorter than x")
		}
	}()
	RRMXMX(make([]uint64, 3), make([]uint64, 4), 5)
}

func TestKernelsDoNotAllocate(t *testing.T) {
	x := randomWords(rand.New(rand.NewPCG(5, 6)), 256)
	dst := make([]uint64, 256)
	if a := testing.AllocsPerRun(100, func() { RRMXMX(dst, x, 5) }); a != 0 {
		t.Errorf("RRMXMX: %v allocations a call", a)
	}
}

package simd

import (
	"math/rand/v2"
	"testing"
)

// TestDecrementBytesScalar checks the twin byte by byte against the
// definition: every byte one less, 0 staying 0.
func TestDecrementBytesScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for n := range 40 {
		w := randomWords(r, n)
		for i := range w {
			if r.IntN(3) == 0 { // bytes of 0, 1 and 255 side by side
				w[i] = []uint64{0x00ff01000100ff00, 0x0101010101010101, 0x8000000000000080, 0}[r.IntN(4)]
			}
		}
		want := make([]byte, 0, 8*n)
		for _, x := range w {
			for b := range 8 {
				v := byte(x >> (8 * b))
				if v != 0 {
					v--
				}
				want = append(want, v)
			}
		}
		decrementBytesScalar(w)
		for i, x := range w {
			for b := range 8 {
				if got := byte(x >> (8 * b)); got != want[8*i+b] {
					t.Fatalf("len %d word %d byte %d: %d, want %d", n, i, b, got, want[8*i+b])
				}
			}
		}
	}
}

// TestDecrementBytesVectorIsScalar compares the two paths bit for bit on
// every length from 0 to 67 words, random and edge words, decremented
// over and over until every byte is 0.
func TestDecrementBytesVectorIsScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	for n := range 68 {
		a := randomWords(r, n)
		b := append([]uint64(nil), a...)
		for round := range 260 {
			decrementBytesScalar(a)
			decrementBytesVector(b)
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("len %d round %d word %d: vector %#x, scalar %#x", n, round, i, b[i], a[i])
				}
			}
		}
		for i := range a {
			if a[i] != 0 {
				t.Fatalf("len %d: word %d is %#x after 260 decrements", n, i, a[i])
			}
		}
	}
	w := randomWords(r, 256)
	if a := testing.AllocsPerRun(100, func() { DecrementBytes(w) }); a != 0 {
		t.Errorf("DecrementBytes: %v allocations a call", a)
	}
}

// BenchmarkDecrementBytes decrements 168 words, the 1341 cells an SBF with
// Max=255 decrements for each element at its default FP rate.
func BenchmarkDecrementBytes(b *testing.B) {
	w := randomWords(rand.New(rand.NewPCG(35, 36)), 168)
	benchPairN(b, len(w), func() { decrementBytesScalar(w) }, func() { decrementBytesVector(w) })
}

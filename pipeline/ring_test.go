package pipeline

import (
	"math"
	"runtime"
	"testing"
)

// TestRingSPSC moves numbered batches through a small ring between two
// goroutines and checks that they arrive complete and in order.
func TestRingSPSC(t *testing.T) {
	const batches = 20000
	r := newRing(3, 2) // rounded up to 4 slots
	if r.cap() != 4 {
		t.Fatalf("cap %d, want 4", r.cap())
	}
	go func() {
		for i := range uint64(batches) {
			var b *slot
			for b = r.reserve(); b == nil; b = r.reserve() {
				runtime.Gosched()
			}
			b.n = 2
			b.hashes[0], b.hashes[1] = i, ^i
			r.publish()
		}
	}()
	for i := range uint64(batches) {
		var b *slot
		for b = r.peek(); b == nil; b = r.peek() {
			runtime.Gosched()
		}
		if b.n != 2 || b.hashes[0] != i || b.hashes[1] != ^i {
			t.Fatalf("batch %d: got n=%d %x %x", i, b.n, b.hashes[0], b.hashes[1])
		}
		if l := r.len(); l < 1 || l > 4 {
			t.Fatalf("len %d with a batch in hand", l)
		}
		r.release()
	}
	if r.peek() != nil || r.len() != 0 {
		t.Fatal("ring not empty at the end")
	}
}

func TestRingFullEmpty(t *testing.T) {
	r := newRing(2, 1)
	if r.peek() != nil || r.ready() {
		t.Fatal("new ring not empty")
	}
	a := r.reserve()
	if a != r.reserve() {
		t.Fatal("reserve moved without publish")
	}
	r.publish()
	r.reserve()
	r.publish()
	if r.reserve() != nil {
		t.Fatal("reserve on a full ring")
	}
	if r.peek() != a || !r.ready() || r.len() != 2 {
		t.Fatal("peek does not return the oldest slot")
	}
	r.release()
	if r.reserve() != a {
		t.Fatal("the released slot is not reused")
	}
}

func TestWindowing(t *testing.T) {
	w := windowing{d: 10}
	for _, c := range []struct{ t, i int64 }{{0, 0}, {9, 0}, {10, 1}, {-1, -1}, {-10, -1}, {-11, -2}} {
		if got := w.index(c.t); got != c.i {
			t.Errorf("index(%d) = %d, want %d", c.t, got, c.i)
		}
	}
	if w.start(3) != 30 || w.end(3) != 40 {
		t.Errorf("window 3 is [%d, %d)", w.start(3), w.end(3))
	}
	if w.end(math.MaxInt64/10) != math.MaxInt64 || w.end(winDone) != math.MaxInt64 || w.end(winUnknown) != math.MinInt64 {
		t.Error("end does not saturate")
	}
	off := windowing{}
	if off.index(12345) != 0 || off.end(0) != math.MaxInt64 || off.start(0) != 0 {
		t.Error("windows off")
	}
}

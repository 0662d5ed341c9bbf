package hugepage

import (
	"runtime"
	"sync"
	"testing"
	"unsafe"
)

// row is pointer-free, as record.Record is, and not a power of two long.
type row struct {
	a [44]byte
	b int64
	c uint32
	d bool
}

func isMapped[T any](s []T) bool {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	_, ok := pool.live[unsafe.Pointer(unsafe.SliceData(s[:1]))]
	return ok
}

// A large buffer of a pointer-free type is a mapping on a 2 MiB boundary
// (on Linux), holds what is written into it, and after Free is handed to
// the next Alloc of its size; small buffers and types with pointers are on
// the heap, and Free leaves them alone.
func TestAllocFree(t *testing.T) {
	const n = 65536 // 65536 rows of 64 bytes: 4 MiB
	s := Alloc[row](n)
	if len(s) != 0 || cap(s) < n {
		t.Fatalf("len %d cap %d, want 0 and at least %d", len(s), cap(s), n)
	}
	if runtime.GOOS == "linux" {
		if !isMapped(s) {
			t.Fatalf("a %d-byte buffer of a pointer-free type is not a mapping", n*int(unsafe.Sizeof(row{})))
		}
		if at := uintptr(unsafe.Pointer(unsafe.SliceData(s[:1]))); at%Size != 0 {
			t.Errorf("mapping at %#x, not on a %d-byte boundary", at, Size)
		}
	}
	s = s[:n]
	for i := range s {
		s[i].b, s[i].a[43] = int64(i), byte(i)
	}
	for i := range s {
		if s[i].b != int64(i) || s[i].a[43] != byte(i) {
			t.Fatalf("row %d reads %d %d", i, s[i].b, s[i].a[43])
		}
	}
	Free(s)
	Free(s) // twice: nothing
	again := Alloc[row](n)
	if runtime.GOOS == "linux" && unsafe.SliceData(again[:1]) != unsafe.SliceData(s[:1]) {
		t.Errorf("the buffer given back was not reused")
	}
	other := Alloc[row](n)
	if unsafe.SliceData(other[:1]) == unsafe.SliceData(again[:1]) {
		t.Fatalf("two live buffers share memory")
	}
	Free(again[:0]) // a slice of length 0 of the buffer gives it back too
	Free(other)

	small := Alloc[byte](Size - 1)
	withPointers := Alloc[*row](Size)
	strs := Alloc[struct {
		x [100]byte
		s string
	}](Size)
	if isMapped(small) || isMapped(withPointers) || isMapped(strs) {
		t.Errorf("a small buffer or a type with pointers is a mapping")
	}
	Free(small)
	Free(withPointers)
	if cap(small) != Size-1 || cap(withPointers) != Size {
		t.Errorf("heap buffers of capacity %d and %d", cap(small), cap(withPointers))
	}
	if Alloc[row](0) == nil && cap(Alloc[row](0)) != 0 {
		t.Errorf("Alloc(0)")
	}
	Free([]row(nil))
}

// Alloc and Free from several goroutines at once (run with -race): no
// buffer is handed to two of them.
func TestAllocFreeConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 20 {
				s := Alloc[uint64](Size / 8 * (1 + i%2))[:1]
				s[0] = uint64(g)
				runtime.Gosched()
				if s[0] != uint64(g) {
					t.Errorf("goroutine %d: its buffer was written by %d", g, s[0])
				}
				Free(s)
			}
		})
	}
	wg.Wait()
}

// Package hugepage gives the export path its large buffers outside Go's
// heap, in memory the kernel backs with transparent huge pages where it
// can.
//
// The export path holds a batch of records (a 65536-record batch is 5.8
// MiB) and, for ClickHouse, its RowBinary rows (about 9 MiB) in memory
// that a run touches for the first time: each 4 KiB page of it is a page
// fault. On the project's machine (a paravirtualized VM) a fault costs
// about 18 us, so the first batches' fresh memory cost more CPU than
// encoding and sending them; a 2 MiB page is one fault. Linux with
// transparent huge pages in "madvise" mode (Debian's and Ubuntu's kernels
// default) gives them only to memory marked MADV_HUGEPAGE, which Go's heap
// is not. Buffers on the heap also make the garbage collector run more
// often, for memory it never needs to scan. The figures are in the
// repository's docs/benchmarks.md, "What export costs".
//
// [Alloc] maps such memory for buffers of pointer-free types of at least
// [Size] bytes on Linux, and [Free] hands it back for the next Alloc. It is
// never unmapped: a reference kept past Free by mistake reads stale data
// rather than faulting. Everything else (other systems, small buffers,
// types with pointers, a failed mapping) is an ordinary make, which Free
// leaves to the garbage collector.
package hugepage

import (
	"reflect"
	"sync"
	"unsafe"
)

// Size is the huge page size the memory is laid out for: 2 MiB, x86-64's
// and arm64's with 4 KiB base pages. Smaller buffers stay on the heap.
const Size = 2 << 20

// pool holds the mappings: live ones by their first byte's address, and
// free ones by length, for the next Alloc of that length.
var pool struct {
	mu   sync.Mutex
	live map[unsafe.Pointer]int
	free map[int][]unsafe.Pointer
}

// Alloc returns a slice of length 0 and capacity at least n, whose
// contents past its length are not specified. Memory from a mapping must
// be given back with Free once nothing refers to it; a buffer that is not
// (one still in a stuck call's hands) stays mapped for the life of the
// process.
func Alloc[T any](n int) []T {
	var zero T
	size := unsafe.Sizeof(zero)
	bytes := uint64(n) * uint64(size)
	if n <= 0 || size == 0 || bytes < Size || bytes > 1<<40 || hasPointers(reflect.TypeFor[T]()) {
		return make([]T, 0, n)
	}
	length := int((bytes + Size - 1) &^ (Size - 1))
	base := take(length)
	if base == nil {
		return make([]T, 0, n)
	}
	return unsafe.Slice((*T)(base), uintptr(length)/size)[:0]
}

// take returns the address of a free mapping of length bytes, or of a new
// one; nil when none can be made.
func take(length int) unsafe.Pointer {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	var base unsafe.Pointer
	if f := pool.free[length]; len(f) > 0 {
		base = f[len(f)-1]
		pool.free[length] = f[:len(f)-1]
	} else if base = mapHuge(length); base == nil {
		return nil
	}
	if pool.live == nil {
		pool.live = make(map[unsafe.Pointer]int)
	}
	pool.live[base] = length
	return base
}

// Free gives back the memory of s, a slice (of any length) of a buffer
// Alloc returned; it does nothing for a buffer on the heap, or one given
// back already.
func Free[T any](s []T) {
	if cap(s) == 0 {
		return
	}
	base := unsafe.Pointer(unsafe.SliceData(s[:1]))
	pool.mu.Lock()
	defer pool.mu.Unlock()
	length, ok := pool.live[base]
	if !ok {
		return
	}
	delete(pool.live, base)
	if pool.free == nil {
		pool.free = make(map[int][]unsafe.Pointer)
	}
	pool.free[length] = append(pool.free[length], base)
}

// hasPointers reports whether values of t hold pointers the garbage
// collector must see: such values never go outside the heap.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	}
	return true // pointers, strings, slices, maps, interfaces, channels, functions, uintptr
}

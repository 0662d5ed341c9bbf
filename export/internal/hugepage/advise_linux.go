//go:build linux

package hugepage

import (
	"syscall"
	"unsafe"
)

// madvHugepage is MADV_HUGEPAGE, the same on every Linux architecture.
const madvHugepage = 14

// advise marks the whole huge pages of s's memory with MADV_HUGEPAGE. An
// error (a kernel without transparent huge pages: EINVAL) changes nothing
// and is ignored.
func advise[T any](s []T) {
	var zero T
	n := uintptr(len(s)) * unsafe.Sizeof(zero)
	if n < Size {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	lo := (start + Size - 1) &^ (Size - 1)
	hi := (start + n) &^ (Size - 1)
	if hi <= lo {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), n)[lo-start : hi-start]
	syscall.Madvise(b, madvHugepage)
}

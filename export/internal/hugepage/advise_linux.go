//go:build linux

package hugepage

import (
	"syscall"
	"unsafe"
)

// madvHugepage is MADV_HUGEPAGE, the same on every Linux architecture.
const madvHugepage = 14

// mapHuge maps private anonymous memory holding length bytes (a multiple
// of Size) from a Size boundary, marked for transparent huge pages, and
// returns the address of that boundary; nil when the kernel refuses. The
// mapping is Size bytes longer, for the alignment: the bytes outside are
// never touched, so they cost address space, not memory. The hint failing
// (a kernel without transparent huge pages) leaves ordinary pages.
func mapHuge(length int) unsafe.Pointer {
	_, m := mapAligned(length)
	if m == nil {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(m))
}

// mapAligned makes mapHuge's mapping and returns it whole, for
// syscall.Munmap, and its part from the Size boundary; nils when the
// kernel refuses.
func mapAligned(length int) (mapping, aligned []byte) {
	m, err := syscall.Mmap(-1, 0, length+Size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil
	}
	off := int((Size - uintptr(unsafe.Pointer(unsafe.SliceData(m)))%Size) % Size)
	aligned = m[off : off+length]
	syscall.Madvise(aligned, madvHugepage)
	return m, aligned
}

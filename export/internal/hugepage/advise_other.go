//go:build !linux

package hugepage

import "unsafe"

// mapHuge maps nothing outside Linux: Alloc uses the heap.
func mapHuge(length int) unsafe.Pointer { return nil }

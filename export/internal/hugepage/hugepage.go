// Package hugepage asks the kernel to back large export buffers with
// transparent huge pages where it can.
//
// The export path holds a batch of records (a 65536-record batch is 5.8
// MiB) and, for ClickHouse, its RowBinary rows (about 9 MiB) in memory
// that a run touches for the first time: each 4 KiB page of it is a page
// fault. On the project's machine (a paravirtualized VM) a fault costs
// about 18 us, so the first batches' fresh memory cost more CPU than
// encoding and sending them; a 2 MiB page is one fault. Linux with
// transparent huge pages in "madvise" mode (Debian's and Ubuntu's kernels
// default) gives them only to memory marked MADV_HUGEPAGE, which Go's
// heap is not: [Make] marks the part of a new buffer that spans whole
// 2 MiB pages before anything touches it. The figures are in the
// repository's docs/benchmarks.md, "What export costs".
//
// Elsewhere (other systems, a kernel without transparent huge pages, a
// buffer smaller than a huge page) it is an ordinary allocation. The hint
// never changes what a buffer holds: the Go runtime may later give the
// memory back to the kernel (the scavenger), which splits the huge pages
// as it would any.
package hugepage

// Size is the huge page size the hint is given for: 2 MiB, x86-64's and
// arm64's with 4 KiB base pages. Buffers shorter than this are left alone.
const Size = 2 << 20

// Make returns a slice of length 0 and capacity n, whose whole 2 MiB
// pages, on Linux, are marked for transparent huge pages before they are
// first touched. T must hold no pointers (the memory is ordinary heap
// memory either way; the rule keeps the hint away from memory the garbage
// collector scans).
func Make[T any](n int) []T {
	s := make([]T, 0, n)
	if n > 0 {
		advise(s[:n])
	}
	return s
}

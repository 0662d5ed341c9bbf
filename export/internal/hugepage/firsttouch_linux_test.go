//go:build linux

package hugepage

import (
	"syscall"
	"testing"
	"unsafe"
)

// BenchmarkFirstTouch: the CPU of writing fresh memory, 8 MiB mapped anew
// each round, in 4 KiB pages (as Go's heap gets it) and marked for 2 MiB
// pages (as Alloc maps it): the page faults that package hugepage saves.
func BenchmarkFirstTouch(b *testing.B) {
	const n = 8 << 20
	for _, c := range []struct {
		name string
		huge bool
	}{{"small-pages", false}, {"huge-pages", true}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m, err := syscall.Mmap(-1, 0, n+Size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
				if err != nil {
					b.Fatal(err)
				}
				s := m[:n]
				if c.huge {
					s = m[Size-int(uintptr(addr(m)))%Size:][:n]
					syscall.Madvise(s, madvHugepage)
				}
				for i := 0; i < n; i += 4096 {
					s[i] = 1
				}
				syscall.Munmap(m)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(n/4096), "ns/4KiB")
		})
	}
}

func addr(m []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(m))) }

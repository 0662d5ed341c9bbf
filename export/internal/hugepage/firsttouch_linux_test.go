//go:build linux

package hugepage

import (
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// Touching 8 MiB of a new mapping as mapHuge makes it takes far fewer
// page faults than its 2048 pages of 4 KiB when the kernel gives huge
// pages to memory that asks for them. The bound, a quarter of the
// small-page count, leaves room for a kernel that cannot find free 2 MiB
// pages for some of them (it then falls back to small ones): with the hint
// working, 4 faults would do.
func TestHugePagesTaken(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages are off on this kernel (%q, %v)", strings.TrimSpace(string(mode)), err)
	}
	if os.Getpagesize() != 4096 {
		t.Skipf("page size %d: the 2 MiB huge pages are of 4 KiB base pages", os.Getpagesize())
	}
	const n = 8 << 20
	m, s := mapAligned(n)
	if m == nil {
		t.Fatal("mmap failed")
	}
	defer syscall.Munmap(m)
	// The faults of this thread alone, the goroutine kept on it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var r0, r1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_THREAD, &r0)
	for i := 0; i < n; i += 4096 {
		s[i] = 1
	}
	syscall.Getrusage(syscall.RUSAGE_THREAD, &r1)
	if faults := r1.Minflt - r0.Minflt; faults > n/4096/4 {
		t.Errorf("%d page faults touching %d bytes, want at most %d", faults, n, n/4096/4)
	}
}

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
				var m, s []byte
				if c.huge {
					m, s = mapAligned(n)
				} else {
					var err error
					m, err = syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
					if err != nil {
						b.Fatal(err)
					}
					s = m
				}
				if m == nil {
					b.Fatal("mmap failed")
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

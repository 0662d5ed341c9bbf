//go:build linux

package pcapfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkFileIn compares two ways of getting a capture file's bytes in
// the page cache to the reader: read(2) into one buffer of the Reader's
// size, which is what the Reader does, and mmap(2) of the whole file
// (plain, and with MAP_POPULATE, which maps every page up front), each
// touching one byte of every 64 (a cache line) as framing does. It
// reports cpu-ns/MB, the process's user+system CPU time per MiB: the
// kernel's copy on one side, page faults and page-table work on the other.
// docs/decisions/replay-inline-workers.md has the figures: on the AMD EPYC
// VM mapping cost no less CPU than reading, so the Reader reads.
func BenchmarkFileIn(b *testing.B) {
	const size = 64 << 20
	path := filepath.Join(b.TempDir(), "in.bin")
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	data = nil
	touch := func(p []byte) (sum byte) {
		for i := 0; i < len(p); i += 64 {
			sum += p[i]
		}
		return sum
	}
	for _, mode := range []string{"read", "mmap", "mmap-populate"} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, bufSize)
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			var cpu time.Duration
			var sink byte
			for b.Loop() {
				c0 := cpuNow(b)
				switch mode {
				case "read":
					if _, err := f.Seek(0, 0); err != nil {
						b.Fatal(err)
					}
					for {
						n, err := f.Read(buf)
						sink += touch(buf[:n])
						if err != nil || n == 0 {
							break
						}
					}
				default:
					flags := syscall.MAP_SHARED
					if mode == "mmap-populate" {
						flags |= syscall.MAP_POPULATE
					}
					m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, flags)
					if err != nil {
						b.Fatal(err)
					}
					sink += touch(m)
					if err := syscall.Munmap(m); err != nil {
						b.Fatal(err)
					}
				}
				cpu += cpuNow(b) - c0
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/(size>>20), "cpu-ns/MB")
			_ = sink
		})
	}
}

// cpuNow is the process's user and system CPU time so far.
func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

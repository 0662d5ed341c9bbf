package filters

import (
	"runtime"
	"unsafe"
)

// prefetchLoad is the portable prefetch: a plain load of one byte of every
// line, combined and kept alive so the compiler keeps the loads. The loads
// are independent, so the CPU has their misses in flight together, but each
// holds up the instructions after it until its line arrives.
func prefetchLoad(lines []unsafe.Pointer) {
	var x byte
	for _, p := range lines {
		x ^= *(*byte)(p)
	}
	runtime.KeepAlive(x)
}

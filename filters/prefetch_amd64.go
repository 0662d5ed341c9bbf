package filters

import "unsafe"

// prefetch asks the CPU to start loading the cache line of every address in
// lines into its caches, and returns without waiting for them: PREFETCHT0,
// which Go has no intrinsic for. A prefetch never faults and changes no
// memory; it only moves lines into the cache. Unlike a plain load of the
// line, it does not hold up the instructions after it until the line
// arrives, so the work that follows overlaps the misses
// (BenchmarkRandomLines measures both).
//
//go:noescape
func prefetch(lines []unsafe.Pointer)

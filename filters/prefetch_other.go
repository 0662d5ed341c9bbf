//go:build !amd64

package filters

import "unsafe"

// prefetch loads one byte of every address in lines, so that their cache
// lines are in flight together (see prefetch_amd64.go; without a prefetch
// instruction a plain load is the portable way to start a miss).
func prefetch(lines []unsafe.Pointer) { prefetchLoad(lines) }

//go:build !linux

package affinity

import "runtime"

// Allowed returns 0 .. runtime.NumCPU()-1: without sched_getaffinity the
// mask is unknown.
func Allowed() ([]int, error) {
	cpus := make([]int, runtime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return cpus, nil
}

// Pin locks the calling goroutine to its OS thread and returns
// ErrNotSupported.
func Pin(cpu int) error {
	runtime.LockOSThread()
	return ErrNotSupported
}

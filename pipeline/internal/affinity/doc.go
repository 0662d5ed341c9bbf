// Package affinity binds goroutines to CPUs, for the pipeline's Config.Pin.
//
// It makes its system call (sched_setaffinity) through golang.org/x/sys/unix,
// so that the pipeline, which pins, makes no system call itself. The package
// is two functions, small and auditable, and internal to the pipeline, its
// only user.
//
// Pin locks the calling goroutine to its OS thread and never unlocks it: a
// pinned goroutine that returns takes its thread with it (the runtime ends a
// thread whose goroutine exits while locked), so no thread with a narrowed
// CPU mask goes back to the scheduler's pool.
package affinity

import "errors"

// ErrNotSupported is returned by Pin on systems without sched_setaffinity.
var ErrNotSupported = errors.New("affinity: not supported on this system")

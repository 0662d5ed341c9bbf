// Package affinity binds goroutines to CPUs, for the pipeline's Config.Pin.
//
// It is the one system-call helper outside capture/ and fastpath/ (the
// style rule "syscalls in one place" names those two): CPU affinity belongs
// to neither packet sources nor the XDP fast path, and the pipeline must not
// import golang.org/x/sys/unix itself. The package is two functions, so the
// exception stays small and auditable.
//
// Pin locks the calling goroutine to its OS thread and never unlocks it: a
// pinned goroutine that returns takes its thread with it (the runtime ends a
// thread whose goroutine exits while locked), so no thread with a narrowed
// CPU mask goes back to the scheduler's pool.
package affinity

import "errors"

// ErrNotSupported is returned by Pin on systems without sched_setaffinity.
var ErrNotSupported = errors.New("affinity: not supported on this system")

package testutil

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// WaitBlockedIn waits until a goroutine whose stack holds fn (a function's
// full name, as a stack trace prints it: "pkg/path.(*T).method") is
// blocked in the Go runtime, on a channel, a select, a lock or a condition
// variable, and fails tb when none is within limit. It is WaitInPoll for
// code that waits in Go rather than in the kernel: a test acts on such a
// goroutine (closes what it waits on) once it is there, instead of after a
// sleep.
func WaitBlockedIn(tb testing.TB, fn string, limit time.Duration) {
	tb.Helper()
	WaitFor(tb, "a goroutine blocked in "+fn, limit, func() bool { return blockedIn(fn) })
}

// blockedStates are the goroutine states of a stack trace
// ("goroutine 7 [select]:") that mean blocked in the runtime.
var blockedStates = []string{"chan receive", "chan send", "select", "sync.Mutex.Lock", "sync.RWMutex.RLock", "sync.RWMutex.Lock", "sync.Cond.Wait", "semacquire"}

// blockedIn reports whether a goroutine whose stack holds fn is blocked.
func blockedIn(fn string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		header, stack, _ := strings.Cut(g, "\n")
		_, state, ok := strings.Cut(header, "[")
		if !ok || !strings.Contains(stack, fn+"(") {
			continue
		}
		for _, s := range blockedStates {
			if strings.HasPrefix(state, s) {
				return true
			}
		}
	}
	return false
}

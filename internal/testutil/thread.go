package testutil

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// WaitInPoll waits until thread tid of this process sleeps in the kernel in
// poll(2): its /proc wchan (the kernel function it sleeps in) names a poll
// function, such as poll_schedule_timeout. It fails tb if that has not
// happened within the limit.
//
// A test that must act on a goroutine blocked in a system call (close its
// socket, wake it) uses it instead of sleeping and hoping the goroutine got
// there: the goroutine calls runtime.LockOSThread, hands over its thread id
// (unix.Gettid), then makes the call. A descheduled goroutine's thread
// sleeps in a futex, not in poll, so it is not mistaken for one blocked.
func WaitInPoll(tb testing.TB, tid int, limit time.Duration) {
	tb.Helper()
	path := fmt.Sprintf("/proc/self/task/%d/wchan", tid)
	deadline := time.Now().Add(limit)
	last := ""
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			tb.Fatalf("thread %d: %v", tid, err)
		}
		last = string(b)
		if strings.Contains(last, "poll") {
			return
		}
		if time.Now().After(deadline) {
			if last == "0" {
				SkipOrFail(tb, "the kernel does not show where thread %d sleeps (wchan is 0: no CONFIG_KALLSYMS, or restricted)", tid)
			}
			tb.Fatalf("thread %d not in poll(2) after %v (wchan %q)", tid, limit, last)
		}
		time.Sleep(time.Millisecond)
	}
}

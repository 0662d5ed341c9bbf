package testutil

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// failRecorder stands for a test that a helper fails: it keeps the
// message and ends the goroutine, as testing.T's Fatalf does.
type failRecorder struct {
	testing.TB
	msg string
}

func (f *failRecorder) Helper() {}

func (f *failRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failing runs fn with a failRecorder on a goroutine of its own and
// returns what it failed with ("" when it did not fail).
func failing(fn func(tb testing.TB)) string {
	rec := &failRecorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(rec)
	}()
	<-done
	return rec.msg
}

func TestWaitForHolds(t *testing.T) {
	n := 0
	if msg := failing(func(tb testing.TB) {
		WaitFor(tb, "the third look", time.Minute, func() bool { n++; return n == 3 })
	}); msg != "" || n != 3 {
		t.Errorf("WaitFor failed with %q after %d looks; want success on the third", msg, n)
	}
}

func TestWaitForFailsNamingWhat(t *testing.T) {
	msg := failing(func(tb testing.TB) {
		WaitFor(tb, "a condition that never holds", 20*time.Millisecond, func() bool { return false })
	})
	if !strings.Contains(msg, "a condition that never holds") {
		t.Errorf("WaitFor failed with %q; want it to name what it waited for", msg)
	}
}

// TestProcessWaitForExit: a process that exits while the test waits on
// it fails the wait at once, with its stderr: the limit, an hour, would
// outlast go test's timeout.
func TestProcessWaitForExit(t *testing.T) {
	p := StartProcess(t, exec.Command("sh", "-c", "echo last words >&2; exit 3"), "", 0)
	msg := failing(func(tb testing.TB) {
		p.WaitFor(tb, "a condition that never holds", time.Hour, func() bool { return false })
	})
	if !strings.Contains(msg, "exit status 3") || !strings.Contains(msg, "last words") || !strings.Contains(msg, "a condition that never holds") {
		t.Errorf("Process.WaitFor failed with %q; want the exit, the stderr and what it waited for", msg)
	}
}

// TestProcessWaitForHolds: a condition that holds while the process runs
// ends the wait; the process's stderr is what it said.
func TestProcessWaitForHolds(t *testing.T) {
	cmd := exec.Command("sh", "-c", "echo ready >&2; exec cat")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := StartProcess(t, cmd, "ready", time.Minute)
	p.WaitFor(t, "ready on stderr", time.Minute, func() bool { return p.Log() == "ready\n" })
	stdin.Close()
	if err := p.Wait(t, time.Minute); err != nil {
		t.Errorf("cat, its input closed: %v", err)
	}
}

func TestWaitUntil(t *testing.T) {
	n := 0
	if !WaitUntil(time.Minute, func() bool { n++; return n == 3 }) || n != 3 {
		t.Errorf("WaitUntil gave up after %d looks; want success on the third", n)
	}
	if WaitUntil(20*time.Millisecond, func() bool { return false }) {
		t.Error("WaitUntil reported a condition that never holds as held")
	}
}

// waitsOnChannel blocks on c: TestWaitBlockedIn looks for it by name.
func waitsOnChannel(c chan struct{}) { <-c }

func TestWaitBlockedIn(t *testing.T) {
	const fn = "github.com/flowdedup/flowdedup/internal/testutil.waitsOnChannel"
	if blockedIn(fn) {
		t.Fatal("a goroutine blocked in waitsOnChannel before any was started")
	}
	c := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitsOnChannel(c)
	}()
	WaitBlockedIn(t, fn, time.Minute)
	close(c)
	<-done
	if blockedIn(fn) {
		t.Error("a goroutine still blocked in waitsOnChannel after it returned")
	}
}

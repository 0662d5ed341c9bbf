//go:build linux

package sockwait

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

func socketPair(t *testing.T) (int, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return fds[0], fds[1]
}

func TestWait(t *testing.T) {
	a, b := socketPair(t)
	w, err := New(a)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	start := time.Now()
	if r, err := w.Wait(start.Add(30 * time.Millisecond)); r != Timeout || err != nil {
		t.Fatalf("idle socket: %v, %v; want Timeout", r, err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("Timeout after %v, before the deadline", d)
	}
	if r, _ := w.Wait(time.Now().Add(-time.Second)); r != Timeout {
		t.Errorf("past deadline: %v, want Timeout", r)
	}

	unix.Write(b, []byte("x"))
	if r, err := w.Wait(time.Time{}); r != Ready || err != nil {
		t.Fatalf("readable socket: %v, %v; want Ready", r, err)
	}
	if n := testing.AllocsPerRun(100, func() { w.Wait(time.Time{}) }); n != 0 {
		t.Errorf("Wait allocates %v times", n)
	}
	var buf [1]byte
	unix.Read(a, buf[:])

	// Wake from another goroutine ends a Wait without deadline, and every
	// later Wait too.
	done := make(chan Result, 1)
	tid := testutil.OnThread(func() {
		r, _ := w.Wait(time.Time{})
		done <- r
	})
	testutil.WaitInPoll(t, tid, 5*time.Second)
	w.Wake()
	select {
	case r := <-done:
		if r != Woken {
			t.Errorf("after Wake: %v, want Woken", r)
		}
	case <-time.After(time.Minute):
		t.Fatal("Wake did not end Wait")
	}
	if r, _ := w.Wait(time.Now().Add(time.Second)); r != Woken {
		t.Errorf("Wait after Wake: %v, want Woken", r)
	}
	if err := w.Close(); err != nil {
		t.Error(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

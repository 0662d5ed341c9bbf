//go:build linux

package testutil

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fatalRecorder stands for a test that WaitInPoll fails: it records the
// failure and ends the goroutine, as testing.T's Fatalf does.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.failed = true
	runtime.Goexit()
}

func (f *fatalRecorder) Skip(args ...any) { f.Fatalf("skip") }

func TestWaitInPoll(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])

	// A thread blocked in poll on an empty pipe is found.
	polled := make(chan struct{})
	tid := OnThread(func() {
		// A signal (the runtime's preemption, a profiler) interrupts
		// poll with EINTR: poll again, or the thread would end and its
		// /proc entry with it before WaitInPoll looked.
		for {
			_, err := unix.Poll([]unix.PollFd{{Fd: int32(p[0]), Events: unix.POLLIN}}, -1)
			if err != unix.EINTR {
				break
			}
		}
		close(polled)
	})
	WaitInPoll(t, tid, 5*time.Second)
	unix.Write(p[1], []byte{1})
	<-polled

	// A thread whose goroutine sleeps (the thread waits in a futex) is
	// not taken for one in poll: WaitInPoll fails after its limit.
	stop := make(chan struct{})
	defer close(stop)
	tid = OnThread(func() { <-stop })
	rec := &fatalRecorder{TB: t}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		WaitInPoll(rec, tid, 100*time.Millisecond)
	}()
	<-finished
	if !rec.failed {
		t.Error("WaitInPoll returned for a thread that is not in poll")
	}
}

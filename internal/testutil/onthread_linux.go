package testutil

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// OnThread runs do on a new goroutine locked to its OS thread until it
// ends, and returns the thread's id, for WaitInPoll: the test acts once
// the thread sleeps in the call do makes.
func OnThread(do func()) int {
	tids := make(chan int, 1)
	go func() {
		runtime.LockOSThread() // this thread is the goroutine's until it ends
		tids <- unix.Gettid()
		do()
	}()
	return <-tids
}

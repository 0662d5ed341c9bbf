package testutil

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// PinThread keeps the calling test goroutine on its OS thread and the thread
// on one CPU until the test ends, and returns that CPU: the first the
// process may run on. Tests of per-CPU kernel state (BPF prefilters, rings
// and counters, veth's receive path, which runs in the sender's softirq)
// use it so that every frame they send is handled by that CPU, in order.
func PinThread(tb testing.TB) int {
	tb.Helper()
	runtime.LockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		tb.Fatalf("sched_getaffinity: %v", err)
	}
	cpu := -1
	for i := range 1 << 10 {
		if old.IsSet(i) {
			cpu = i
			break
		}
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		tb.Fatalf("pin to CPU %d: %v", cpu, err)
	}
	tb.Cleanup(func() {
		unix.SchedSetaffinity(0, &old)
		runtime.UnlockOSThread()
	})
	return cpu
}

// LockToCPU locks the calling goroutine to its OS thread and binds the
// thread to cpu, for good: it is meant for a goroutine that ends when its
// work is done, since the runtime then ends the locked thread with its
// affinity (a test that must send from each CPU in turn starts one such
// goroutine per CPU).
func LockToCPU(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set)
}

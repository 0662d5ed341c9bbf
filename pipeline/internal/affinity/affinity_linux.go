package affinity

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Allowed returns the CPUs the calling thread may run on, in increasing
// order (the process's mask as set by taskset or a cgroup cpuset).
func Allowed() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("affinity: sched_getaffinity: %w", err)
	}
	n := set.Count()
	cpus := make([]int, 0, n)
	for cpu := 0; len(cpus) < n; cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus, nil
}

// Pin locks the calling goroutine to its OS thread and binds the thread to
// cpu. The goroutine stays locked even when Pin fails.
func Pin(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	// pid 0 is the calling thread, not the whole process.
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("affinity: pin to cpu %d: %w", cpu, err)
	}
	return nil
}

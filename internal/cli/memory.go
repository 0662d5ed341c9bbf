package cli

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/prometheus/procfs"

	"github.com/flowdedup/flowdedup/filters"
	"github.com/flowdedup/flowdedup/units"
)

// memoryBudget is what the machine and the process's cgroup can give.
//
// The machine's part is MemAvailable from /proc/meminfo, not MemTotal: it
// is the kernel's estimate of what can be allocated now without swapping
// (free memory plus the page cache and slabs it can reclaim), while
// MemTotal counts memory other processes hold, and filters sized to it
// would swap or meet the OOM killer. Kernels before 3.14 have no
// MemAvailable; MemTotal stands in there. The cgroup's part is its memory
// limit (v2 memory.max, v1 memory.limit_in_bytes, the smallest on the path
// to the root; read by automemlimit's memlimit.FromCgroup, which knows the
// v1, v2 and hybrid layouts and container mounts): a systemd unit's
// MemoryMax= or a container's limit.
type memoryBudget struct {
	machine     uint64 // bytes; 0 when /proc/meminfo could not be read
	machineFrom string // "MemAvailable" or "MemTotal"
	cgroup      uint64 // bytes; 0 when the cgroup sets no limit
}

// limit returns the smaller of the known limits, or false when neither is
// known.
func (m memoryBudget) limit() (uint64, bool) {
	switch {
	case m.machine == 0 && m.cgroup == 0:
		return 0, false
	case m.machine == 0:
		return m.cgroup, true
	case m.cgroup == 0:
		return m.machine, true
	}
	return min(m.machine, m.cgroup), true
}

// String names both sources, for error messages.
func (m memoryBudget) String() string {
	var parts []string
	if m.machine > 0 {
		parts = append(parts, m.machineFrom+" "+units.Approx(m.machine)+" in /proc/meminfo")
	}
	if m.cgroup > 0 {
		parts = append(parts, "cgroup memory limit "+units.Approx(m.cgroup))
	} else {
		parts = append(parts, "no cgroup memory limit")
	}
	return strings.Join(parts, "; ")
}

// systemMemory reads this machine's memory budget. It is a variable so
// that tests can put a small machine in its place rather than allocate.
var systemMemory = func() memoryBudget {
	var m memoryBudget
	if fs, err := procfs.NewFS("/proc"); err == nil {
		if mi, err := fs.Meminfo(); err == nil {
			switch {
			case mi.MemAvailableBytes != nil:
				m.machine, m.machineFrom = *mi.MemAvailableBytes, "MemAvailable"
			case mi.MemTotalBytes != nil:
				m.machine, m.machineFrom = *mi.MemTotalBytes, "MemTotal"
			}
		}
	}
	if limit, err := memlimit.FromCgroup(); err == nil {
		m.cgroup = limit
	}
	return m
}

// maxWorkersPerCPU bounds --workers. A worker is a goroutine that keys and
// filters without pause while there is traffic: more workers than CPUs only
// take turns on them, and each costs its filters' memory and a ring per
// reader. A few per CPU leave room to reproduce the sharding of a bigger
// machine on a small one; far beyond that is a typo (--workers 1000).
const maxWorkersPerCPU = 4

// maxWorkers is the largest --workers accepted on this machine.
func maxWorkers() int { return maxWorkersPerCPU * runtime.NumCPU() }

// checkFootprint refuses, before anything is allocated, filters that need
// more memory than budget: the spec's footprint (filters.Footprint) times
// the workers times the windows each keeps open.
func checkFootprint(spec string, workers, open int, budget memoryBudget) error {
	per, bounded, err := filters.Footprint(spec)
	if err != nil {
		return usageError{fmt.Errorf("--filter: %w", err)}
	}
	limit, known := budget.limit()
	if !bounded || !known {
		return nil
	}
	total := uint64(per) * uint64(workers) * uint64(open)
	if total <= limit {
		return nil
	}
	need, can := units.Approx(total), units.Approx(limit)
	if need == can { // too close to tell apart rounded
		need, can = fmt.Sprintf("%d bytes", total), fmt.Sprintf("%d bytes", limit)
	}
	return usagef("--filter %s: the filters need %s (%s per filter x %d workers x %d open windows), more than the %s this machine can give (%s)",
		spec, need, units.Approx(uint64(per)), workers, open, can, budget)
}

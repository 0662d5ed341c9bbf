package pipeline

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
)

// GCHold keeps the garbage collector from starting a cycle during the
// setup and the run of a replay whose packet path allocates nothing
// (HoldCollections).
//
// Why: the setup (the filters, the rings, the batches) is most of the
// heap, so a run with more than about 4 MB of it (two workers with 1 MiB
// filters) crosses the collector's first goal and starts a cycle during
// the setup or the run, although there is next to nothing to collect.
// That cycle costs far more than its heap: its mark scans the binary's
// pointer-holding globals (5 MB in flowdedup, most of them gopacket's
// tables, linked in for `flowdedup gen`), its background and idle mark
// workers take the second core for as long as the mark lasts (50-70 ms),
// and its stops wait for the busy goroutines to be preempted: 60-130 ms
// of CPU in a replay of 300.
//
// How: HoldCollections turns the percentage goal off for the setup, whose
// allocations the configuration bounds (the filters' memory and a few
// MB); Bound, called once the setup is done (after New, before Run), puts
// a memory limit of twice the memory the runtime holds then, plus 64 MiB,
// in its place. A run that allocates nothing never reaches it; a run that
// does is collected when it reaches it, so the heap stays within about
// what the default goal (twice the live heap) allows, plus the slack.
// Release restores the settings. The answers do not depend on when the
// collector runs.
//
// A process whose GOGC or GOMEMLIMIT (or debug.SetGCPercent,
// debug.SetMemoryLimit) already changed the defaults keeps them: the hold
// then does nothing.
type GCHold struct {
	held    bool
	percent int
	limit   int64
}

// HoldCollections turns the collector's percentage goal off, unless the
// process changed the defaults (see GCHold). Call Bound once the setup is
// done and Release after the run.
func HoldCollections() *GCHold {
	h := &GCHold{limit: debug.SetMemoryLimit(-1)} // -1: read it, change nothing
	if h.limit != math.MaxInt64 {
		return h
	}
	h.percent = debug.SetGCPercent(-1)
	if h.percent != 100 {
		debug.SetGCPercent(h.percent)
		return h
	}
	h.held = true
	return h
}

// Bound sets the memory limit that collects a run which does allocate:
// twice what the runtime holds now, plus 64 MiB.
func (h *GCHold) Bound() {
	if h.held {
		debug.SetMemoryLimit(int64(min(2*heldMemory()+64<<20, math.MaxInt64/2)))
	}
}

// Release restores the collector's settings as HoldCollections found them.
func (h *GCHold) Release() {
	if h.held {
		h.held = false
		debug.SetMemoryLimit(h.limit)
		debug.SetGCPercent(h.percent)
	}
}

// heldMemory is the memory the runtime holds that a memory limit counts:
// everything it mapped but the heap pages it gave back to the kernel.
func heldMemory() uint64 {
	s := [...]metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s[:])
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 1 << 30 // unknown (not in this runtime): a limit the setup is far below
	}
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

package pipeline

import (
	"github.com/flowdedup/flowdedup/capture"
)

// addWindowCounts adds the kernel's counts of window i (a WindowCounter's)
// to the window, opening it if only the kernel saw frames of it (the
// prefilter can keep every key of a window in the kernel). A window whose
// counts the kernel no longer keeps (capture.ErrWindowGone: the producer
// fell more windows behind than the kernel has slots) gets none; Stats
// still counts those frames.
func (p *producer) addWindowCounts(i int64) {
	if err := p.wc.WindowCounts(i, &p.kcWin); err != nil || p.kcWin.Packets == 0 {
		return
	}
	var zero capture.KernelCounts
	addKernelCounts(p.counts(i), &p.kcWin, &zero)
	addKernelTotals(&p.kcAttr, &p.kcWin)
}

// pollDrops counts in window hi what the kernel did since the last poll:
// its drops (DropCounter) and, for a source that keys frames in the kernel
// (KernelCounter), the frames it handled without handing them to us. Kernel
// counts are cumulative, so a window gets what happened between two polls:
// the polls at window boundaries place the kernel's work in its window
// within the time it takes to flush the batches.
func (p *producer) pollDrops() {
	if dc, ok := p.src.(capture.DropCounter); ok {
		if n, err := dc.KernelDrops(); err == nil && n > p.kdrops {
			p.current().dropped[dropKernel] += n - p.kdrops
			p.kdrops = n
		}
	}
	if kc, ok := p.src.(capture.KernelCounter); ok {
		if err := kc.KernelCounts(&p.kcNew); err == nil {
			if p.wc == nil {
				addKernelCounts(p.current(), &p.kcNew, &p.kc)
			}
			copyKernelCounts(&p.kc, &p.kcNew)
		}
	}
}

// addKernelCounts adds the kernel counts cur - old to c.
func addKernelCounts(c *counts, cur, old *capture.KernelCounts) {
	delta := func(now, before uint64) uint64 {
		if now < before {
			return 0 // a counter never goes back; be safe if one did
		}
		return now - before
	}
	c.packets += delta(cur.Packets, old.Packets)
	c.prefilter += delta(cur.Prefiltered, old.Prefiltered)
	c.dropped[dropXDPRingFull] += delta(cur.RingFull, old.RingFull)
	for label, n := range cur.Errors {
		d := delta(n, old.Errors[label])
		if d == 0 {
			continue
		}
		if malformedLabel[label] {
			c.malformed[reasonIndex(label)] += d
		} else {
			c.skipped[reasonIndex(label)] += d
		}
	}
}

// copyKernelCounts sets dst to src, reusing dst's map.
func copyKernelCounts(dst, src *capture.KernelCounts) {
	dst.Packets, dst.Keyed, dst.Prefiltered, dst.RingFull = src.Packets, src.Keyed, src.Prefiltered, src.RingFull
	if dst.Errors == nil {
		dst.Errors = make(map[string]uint64, len(src.Errors))
	}
	clear(dst.Errors)
	for label, n := range src.Errors {
		dst.Errors[label] = n
	}
}

// addKernelTotals adds src to dst.
func addKernelTotals(dst, src *capture.KernelCounts) {
	dst.Packets += src.Packets
	dst.Keyed += src.Keyed
	dst.Prefiltered += src.Prefiltered
	dst.RingFull += src.RingFull
	if dst.Errors == nil {
		dst.Errors = make(map[string]uint64, len(src.Errors))
	}
	for label, n := range src.Errors {
		dst.Errors[label] += n
	}
}

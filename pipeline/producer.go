package pipeline

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync/atomic"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// Producer tuning.
const (
	// statsEvery is how many packets a producer reads between two
	// publications of its counters for Stats (a power of two).
	statsEvery = 1024
	// liveFlushDelay bounds, in packet time, how long a live producer
	// keeps a partly filled batch: on a slow link a batch of 256 keys for
	// one shard could otherwise take seconds to fill and its records would
	// come out late. Checked on every packet (one comparison against the
	// oldest batch's time) and on every capture.ErrTimeout.
	liveFlushDelay = 50 * time.Millisecond
	// dropPollEvery: a DropCounter may cost a system call, so it is
	// polled every dropPollEvery*statsEvery packets, on idle ticks and at
	// window boundaries.
	dropPollEvery = 64
)

// producer reads one Source, keys and hashes its packets and routes each
// key to its shard's ring. Everything it touches per packet is its own:
// its batches, its counters, its rings' producer ends.
type producer struct {
	id    int
	src   capture.Source
	kind  flow.KeyKind
	seed  uint64
	live  bool
	wall  bool // WallClockWindows
	win   windowing
	stop  *atomic.Bool
	rings []*ring   // by shard
	cur   []*batch  // by shard: the reserved slot being filled, or nil
	age   []int64   // by shard: time of the first key in cur (live flush)
	old   int64     // live: a lower bound of age[s] over the filled batches; math.MaxInt64: none
	wake  []*parker // by shard: the worker's parker
	park  *parker   // this producer's, woken by its workers when they free a slot
	ready func() bool

	window int64 // current window index, or winUnknown before the first packet
	endNs  int64 // the current window ends at this time
	counts counts
	total  counts // earlier windows, for Stats
	kdrops uint64 // kernel drops accounted so far
	n      uint64 // packets read, for the periodic checks
	full   *ring  // the ring a blocked producer waits on

	stats *producerStats

	// A KernelCounter's counts: accounted so far, and the latest poll.
	// Off the per-packet path, so last.
	kc, kcNew capture.KernelCounts
}

// producerStats are a producer's cumulative counters, published for Stats
// every statsEvery packets and at window boundaries.
type producerStats struct {
	_         cacheLinePad
	packets   atomic.Uint64
	prefilter atomic.Uint64
	malformed [maxReasons]atomic.Uint64
	skipped   [maxReasons]atomic.Uint64
	dropped   [numDrops]atomic.Uint64
	_         cacheLinePad
}

func newProducer(id int, src capture.Source, cfg *Config, start int64, stop *atomic.Bool, rings []*ring, wake []*parker) *producer {
	p := &producer{
		id:    id,
		src:   src,
		kind:  cfg.Key,
		seed:  cfg.Seed,
		live:  cfg.Live,
		wall:  cfg.WallClockWindows,
		win:   windowing{d: int64(cfg.Window)},
		stop:  stop,
		rings: rings,
		cur:   make([]*batch, len(rings)),
		age:   make([]int64, len(rings)),
		wake:  wake,
		park:  newParker(),
		old:   math.MaxInt64,
		stats: new(producerStats),
	}
	p.ready = p.slotFree
	p.window = start
	p.endNs = p.win.end(start)
	p.counts.reset()
	p.total.reset()
	return p
}

// run reads the source until it ends, fails or the pipeline stops, then
// hands everything it read to the workers and tells them it is done. It
// returns the source's error, if any: io.EOF and capture.ErrClosed are the
// normal end of input; capture.ErrTimeout is a live source's idle tick; a
// capture.ErrCorrupt is counted as a malformed frame (reason
// "corrupt_file") without failing the run: the source has lost the framing
// of that file and moves on to its next one (or ends), and what was read
// is good.
//
// When the pipeline stops (SIGINT), a live producer first drains the frames
// its source already holds (the kernel ring), up to the source's first idle
// tick or drainLimit: frames captured before the signal are reported, not
// lost uncounted. A replay producer stops at once: the file is still there.
func (p *producer) run() error {
	defer p.finish()
	var pkt capture.Packet
	var drainEnd time.Time
	for {
		if p.stop.Load() {
			if !p.live {
				return nil
			}
			if drainEnd.IsZero() {
				drainEnd = time.Now().Add(drainLimit)
			} else if time.Now().After(drainEnd) {
				return nil
			}
		}
		if err := p.src.Next(&pkt); err != nil {
			switch {
			case errors.Is(err, capture.ErrTimeout):
				if !drainEnd.IsZero() {
					return nil // drained: the ring is empty
				}
				p.idle()
				continue
			case errors.Is(err, io.EOF), errors.Is(err, capture.ErrClosed):
				return nil
			case errors.Is(err, capture.ErrCorrupt):
				p.counts.packets++
				p.counts.malformed[reasonIndex(corruptFile)]++
				continue
			}
			return fmt.Errorf("pipeline: source %d: %w", p.id, err)
		}
		p.packet(&pkt)
	}
}

// drainLimit bounds how long a live producer keeps reading after a stop,
// for a link so busy that its ring never runs empty.
const drainLimit = 500 * time.Millisecond

// packet handles one frame: the hot path.
func (p *producer) packet(pkt *capture.Packet) {
	t := pkt.TimeNs
	if p.n++; p.n%statsEvery == 0 {
		p.periodic()
	}
	if t >= p.endNs {
		p.advance(t)
	}
	c := &p.counts
	c.firstNs = min(c.firstNs, t)
	c.lastNs = max(c.lastNs, t)
	if p.live && p.old != math.MaxInt64 && t-p.old > int64(liveFlushDelay) {
		p.flushStale(t)
	}
	var key flow.Key
	if pkt.Key.IsValid() {
		// Parsed in the kernel, and counted there as a packet with the
		// frames its KernelCounter reports.
		key = pkt.Key
	} else {
		c.packets++
		var err error
		if key, err = flow.Parse(pkt.Data, pkt.LinkType, p.kind); err != nil {
			p.parseError(err)
			return
		}
	}
	h := key.Hash(p.seed)
	s := flow.ShardOf(h, len(p.rings))
	b := p.cur[s]
	if b == nil {
		if b = p.acquire(s, t); b == nil {
			c.dropped[dropRingFull]++
			return
		}
	}
	i := b.n
	b.hashes[i] = h
	b.keys[i] = key
	b.times[i] = t
	b.n = i + 1
	if b.n == len(b.hashes) {
		p.publish(s)
	}
}

func (p *producer) parseError(err error) {
	i := reasonIndex(flow.Reason(err))
	if flow.IsMalformed(err) {
		p.counts.malformed[i]++
	} else {
		p.counts.skipped[i]++
	}
}

// periodic runs every statsEvery packets: it publishes the counters and,
// with wall-clock windows, lets the clock close a window even when packet
// times do not move (a source that stamps no time).
func (p *producer) periodic() {
	if p.n%(statsEvery*dropPollEvery) == 0 {
		p.pollDrops()
	}
	p.publishStats()
	if p.wall {
		if now := time.Now().UnixNano(); now >= p.endNs {
			p.advance(now)
		}
	}
}

// idle runs when a live source had no frame for its poll interval: flush
// what is buffered so records are not held back on a quiet link, and close
// windows by the wall clock.
func (p *producer) idle() {
	now := time.Now().UnixNano()
	if p.wall && now >= p.endNs {
		p.advance(now)
	}
	p.flush()
	p.pollDrops()
	p.publishStats()
}

// flushStale publishes the batches whose first key is older than
// liveFlushDelay at packet time t.
func (p *producer) flushStale(t int64) {
	limit := t - int64(liveFlushDelay)
	p.old = math.MaxInt64
	for s, b := range p.cur {
		switch {
		case b == nil || b.n == 0:
		case p.age[s] < limit:
			p.publish(s)
		default:
			p.old = min(p.old, p.age[s])
		}
	}
}

// acquire reserves the next slot of shard s's ring for data. Replay waits
// for a free slot; live gives up at once and the caller drops the key.
func (p *producer) acquire(s int, t int64) *batch {
	r := p.rings[s]
	b := r.reserve()
	if b == nil {
		if p.live {
			return nil
		}
		b = p.waitSlot(r)
	}
	b.kind = slotData
	b.n = 0
	p.cur[s] = b
	p.age[s] = t
	p.old = min(p.old, t)
	return b
}

// waitSlot blocks until r has a free slot and returns it.
func (p *producer) waitSlot(r *ring) *batch {
	if b := r.reserve(); b != nil {
		return b
	}
	p.full = r
	p.park.park(p.ready)
	p.full = nil
	return r.reserve()
}

// slotFree is the parking condition of waitSlot.
func (p *producer) slotFree() bool { return p.full.reserve() != nil }

// publish hands shard s's current batch to its worker.
func (p *producer) publish(s int) {
	p.rings[s].publish()
	p.cur[s] = nil
	p.wake[s].wake()
}

// flush publishes every partly filled batch.
func (p *producer) flush() {
	p.old = math.MaxInt64
	for s, b := range p.cur {
		if b != nil {
			if b.n > 0 {
				p.publish(s)
			} else {
				p.cur[s] = nil // reserved but empty: leave it unpublished
			}
		}
	}
}

// advance moves the producer to the window of time t, if that is later
// than its current one: the keys of the old window are flushed, and every
// worker gets a marker with this producer's counts for it, so that no key
// of the new window can reach a worker before the marker (each ring is
// FIFO). Markers are never dropped: in live mode too they wait for a slot.
func (p *producer) advance(t int64) {
	next := p.win.index(t)
	if next <= p.window {
		// Not later (a time at the edge of the int64 range): keep the
		// window, and stop checking until it ends.
		p.endNs = max(p.endNs, t+1)
		return
	}
	p.closeWindow(next)
}

// closeWindow flushes, sends the markers leaving the current window for
// next (winDone at the end) and starts counting the next window.
func (p *producer) closeWindow(next int64) {
	p.flush()
	p.pollDrops()
	for s, r := range p.rings {
		b := r.reserve()
		if b == nil {
			b = p.waitSlot(r)
		}
		b.kind = slotMarker
		b.n = 0
		b.next = next
		b.counts = p.counts
		r.publish()
		p.wake[s].wake()
	}
	p.total.add(&p.counts)
	p.counts.reset()
	p.window = next
	p.endNs = p.win.end(next)
	p.publishStats()
}

// pollDrops counts in the current window what the kernel did since the
// last poll: its drops (DropCounter) and, for a source that keys frames in
// the kernel (KernelCounter), the frames it handled without handing them to
// us. Kernel counts are cumulative, so a window gets what happened between
// two polls: the polls at window boundaries place the kernel's work in its
// window within the time it takes to flush the batches.
func (p *producer) pollDrops() {
	if dc, ok := p.src.(capture.DropCounter); ok {
		if n, err := dc.KernelDrops(); err == nil && n > p.kdrops {
			p.counts.dropped[dropKernel] += n - p.kdrops
			p.kdrops = n
		}
	}
	if kc, ok := p.src.(capture.KernelCounter); ok {
		if err := kc.KernelCounts(&p.kcNew); err == nil {
			p.addKernelCounts()
		}
	}
}

// addKernelCounts adds the difference between the latest kernel counts
// (kcNew) and the ones already accounted (kc) to the window.
func (p *producer) addKernelCounts() {
	c, old, cur := &p.counts, &p.kc, &p.kcNew
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
	old.Packets, old.Keyed, old.Prefiltered, old.RingFull = cur.Packets, cur.Keyed, cur.Prefiltered, cur.RingFull
	if old.Errors == nil {
		old.Errors = make(map[string]uint64, len(cur.Errors))
	}
	for label, n := range cur.Errors {
		old.Errors[label] = n
	}
}

// finish ends the producer: its last window is closed with a done marker.
func (p *producer) finish() { p.closeWindow(winDone) }

// publishStats stores total+counts into the atomics Stats reads.
func (p *producer) publishStats() {
	st := p.stats
	st.packets.Store(p.total.packets + p.counts.packets)
	st.prefilter.Store(p.total.prefilter + p.counts.prefilter)
	for i := range st.malformed {
		st.malformed[i].Store(p.total.malformed[i] + p.counts.malformed[i])
		st.skipped[i].Store(p.total.skipped[i] + p.counts.skipped[i])
	}
	for i := range st.dropped {
		st.dropped[i].Store(p.total.dropped[i] + p.counts.dropped[i])
	}
}

// startWindow is the window every producer and worker starts in when it is
// known before the first packet: 0 with windows off, the current wall-clock
// window with WallClockWindows. Otherwise (packet-time windows) it is
// winUnknown, and each producer's first packet sends a marker that says
// where it starts.
func startWindow(cfg *Config, now time.Time) int64 {
	switch {
	case cfg.Window == 0:
		return 0
	case cfg.WallClockWindows:
		return windowing{d: int64(cfg.Window)}.index(now.UnixNano())
	}
	return winUnknown
}

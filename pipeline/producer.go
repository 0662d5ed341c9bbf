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
//
// Windows, as the producer sees them: hi is the window of the newest time
// it has seen, lo the oldest window still open, the first whose end plus
// the lateness is after that time (windowing.low). Packets of window hi
// take the hot path into the reserved ring slot of their shard; packets of
// an older open window [lo, hi) go through a side buffer per shard, copied
// into a slot of their own when it fills or at a flush, so that a batch
// always holds keys of one window; packets older than lo are late: counted
// by reason, not keyed. When the newest time reaches the end of lo plus the
// lateness, lo closes: the producer flushes its batches and sends every
// worker a marker with its counts of that window and its new lo, after
// which it never sends that window anything again.
type producer struct {
	id       int
	src      capture.Source
	kind     flow.KeyKind
	mask     flow.Mask
	decap    *flow.Decap // nil without --decap: Decode
	seed     uint64
	live     bool
	wall     bool  // WallClockWindows
	idleWall bool  // IdleWallClock
	drop     bool  // Live and not Wait: a full ring drops the key
	newest   int64 // IdleWallClock: the newest packet time seen (liveClock)
	win      windowing
	stop     *atomic.Bool
	rings    []*ring    // by shard
	cur      []*slot    // by shard: the reserved slot being filled with keys of window hi, or nil
	age      []int64    // by shard: time of the first key in cur (live flush)
	side     []sideKeys // by shard: keys of the older open windows
	old      int64      // live: a lower bound of the first-key times of the filled batches and side buffers; math.MaxInt64: none
	wake     []*parker  // by shard: the worker's parker
	park     *parker    // this producer's, woken by its workers when they free a slot
	ready    func() bool
	fan      *fanout // parse goroutines key the frames (Config.Parsers); nil: the producer does
	// inline, by shard: the workers, run on this goroutine, each after
	// every item the producer publishes into its ring (replay of one
	// source without parse goroutines: see newTopology); nil: the workers
	// have goroutines of their own.
	inline []*worker

	// The open windows lo..hi (both winUnknown before the first packet of
	// packet-time windows), and what the hot path compares packet times
	// with.
	lo, hi   int64
	hiStart  int64        // start of hi: packets at or after it are in hi
	loStart  int64        // start of lo: packets before it are late
	next     int64        // a time at or past it moves the windows: min(end(hi), closesAt(lo))
	hiCounts *counts      // the counts of window hi, in open
	open     []openCounts // by window modulo len(open)

	total  counts // closed windows, for Stats
	early  counts // counted before the first packet of packet-time windows
	kdrops uint64 // kernel drops accounted so far
	n      uint64 // packets read, for the periodic checks
	full   *ring  // the ring a blocked producer waits on

	stats *producerStats

	// A KernelCounter's counts: accounted so far, and the latest poll.
	// A WindowCounter's counts go to each window as it closes instead
	// (kcWin, the scratch; kcAttr, their sum), and kc only serves Stats.
	// Off the per-packet path, so last.
	kc, kcNew     capture.KernelCounts
	wc            capture.WindowCounter // src, when it counts by window in the kernel
	kernelKeyed   bool                  // src is a capture.KernelCounter: it counts the packets behind its keys
	kcWin, kcAttr capture.KernelCounts

	// The jump guard of packet-time windows (see screen): a packet more
	// than jump ns past the newest time seen waits in hold, its bytes in
	// holdBuf, until the next packet confirms or contradicts its time.
	guard   bool
	jump    uint64
	held    bool
	hold    capture.Packet
	holdBuf []byte
}

// openCounts are a producer's counts of one open window.
type openCounts struct {
	window int64 // winNone: the slot is free
	counts counts
}

// sideKeys gathers one shard's keys of a window older than hi (packets
// within the lateness), to be copied into a ring slot of their own. It
// holds keys of one window at a time.
type sideKeys struct {
	window int64
	n      int
	age    int64 // time of the first key (live flush)
	hashes []uint64
	keys   []flow.Key
	times  []int64
	obs    []uint32
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
	late      [numLate]atomic.Uint64
	_         cacheLinePad
}

// newProducer makes producer id over src, starting with the open windows
// lo..hi (startWindows).
func newProducer(id int, src capture.Source, cfg *Config, lo, hi int64, stop *atomic.Bool, rings []*ring, wake []*parker) *producer {
	p := &producer{
		id:       id,
		src:      src,
		kind:     cfg.Key,
		mask:     cfg.Prefix,
		decap:    decapOf(cfg),
		seed:     cfg.Seed,
		live:     cfg.Live,
		wall:     cfg.WallClockWindows,
		idleWall: cfg.IdleWallClock,
		drop:     cfg.Live && !cfg.Wait,
		win:      newWindowing(cfg),
		stop:     stop,
		rings:    rings,
		cur:      make([]*slot, len(rings)),
		age:      make([]int64, len(rings)),
		side:     make([]sideKeys, len(rings)),
		wake:     wake,
		park:     newParker(),
		old:      math.MaxInt64,
		stats:    new(producerStats),
	}
	p.ready = p.slotFree
	p.wc, _ = src.(capture.WindowCounter)
	_, p.kernelKeyed = src.(capture.KernelCounter)
	p.guard = !cfg.Live && !cfg.WallClockWindows && cfg.Window > 0
	p.jump = uint64(max(2*cfg.Window+cfg.Lateness, minTimeJump))
	for s := range p.side {
		p.side[s] = sideKeys{
			hashes: make([]uint64, cfg.BatchSize),
			keys:   make([]flow.Key, cfg.BatchSize),
			times:  make([]int64, cfg.BatchSize),
			obs:    make([]uint32, cfg.BatchSize),
		}
	}
	p.open = make([]openCounts, p.win.open())
	for i := range p.open {
		p.open[i].window = winNone
	}
	p.total.reset()
	p.early.reset()
	p.lo, p.hi = lo, hi
	if hi == winUnknown {
		p.next = math.MinInt64 // the first packet says where we start
	} else {
		p.setWindows(lo, hi)
	}
	return p
}

// run reads the source until it ends, fails or the pipeline stops, then
// hands everything it read to the workers and tells them it is done. It
// returns the source's error, if any: io.EOF and capture.ErrClosed are the
// normal end of input; capture.ErrTimeout is a live source's idle tick; a
// capture.ErrCorrupt is counted as a malformed frame (reason
// "corrupt_file") without failing the run: the source has lost the framing
// of that file and moves on to its next one (or ends), and what was read
// is good (damaged).
//
// When the pipeline stops (SIGINT), a live producer first drains the frames
// its source already holds (the kernel ring), up to the source's first idle
// tick or drainLimit: frames captured before the signal are reported, not
// lost uncounted. A replay producer stops at once: the file is still there.
func (p *producer) run() error {
	if p.fan != nil {
		return p.runBatches()
	}
	defer p.finish()
	defer p.release() // before finish: a held packet is counted in its window
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
				p.release() // a quiet pipe: nothing contradicts it
				p.idle()
				continue
			case errors.Is(err, io.EOF), errors.Is(err, capture.ErrClosed):
				return nil
			case errors.Is(err, capture.ErrCorrupt):
				p.damaged(err)
				continue
			}
			return fmt.Errorf("pipeline: source %d: %w", p.id, err)
		}
		if p.guard && (p.held || pkt.TimeNs >= p.next) && !p.screen(&pkt) {
			continue
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
	if t >= p.next {
		p.advance(t)
	}
	var c *counts
	w := p.hi
	switch {
	case t >= p.hiStart:
		c = p.hiCounts
	case t >= p.loStart:
		w = p.win.index(t)
		c = p.counts(w)
	default:
		p.late(pkt)
		return
	}
	c.firstNs = min(c.firstNs, t)
	c.lastNs = max(c.lastNs, t)
	if p.live && p.old != math.MaxInt64 && t-p.old > int64(liveFlushDelay) {
		p.flushStale(t)
	}
	if p.fan != nil {
		c.packets++
		p.add(pkt, w) // a parse goroutine keys it
		return
	}
	// The key is decoded in place and hashed through a pointer: a Key
	// returned or passed by value is copied with wide loads of what the
	// parser has just written field by field, which stalls the CPU (a
	// failed store-to-load forwarding) three times a packet.
	var key flow.Key
	if pkt.Key.IsValid() {
		// Keyed by the source; parsed in the kernel, and counted there as
		// a packet, when it is a KernelCounter.
		key = pkt.Key
		if !p.kernelKeyed {
			c.packets++
		}
	} else {
		c.packets++
		var err error
		if p.decap == nil {
			err = key.Decode(pkt.Data, pkt.LinkType, p.kind)
		} else {
			err = key.DecodeDecap(pkt.Data, pkt.LinkType, p.kind, p.decap)
		}
		if err != nil {
			parseError(c, err)
			return
		}
	}
	p.mask.Apply(&key) // one branch when off; a kernel-masked key stays as it is
	h := flow.HashKey(&key, p.seed)
	if pkt.ObserverID != 0 {
		h = observerHash(h, pkt.ObserverID)
	}
	s := flow.ShardOf(h, len(p.rings))
	if w != p.hi {
		p.sideKey(s, w, h, &key, t, pkt.ObserverID)
		return
	}
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
	b.obs[i] = pkt.ObserverID
	b.n = i + 1
	if b.n == len(b.hashes) {
		p.publish(s)
	}
}

// late counts a packet older than every open window, in window hi: its own
// window has closed, and placing it in another would be wrong.
func (p *producer) late(pkt *capture.Packet) {
	c := p.hiCounts
	if !pkt.Key.IsValid() || !p.kernelKeyed {
		c.packets++ // a kernel-keyed packet is counted by the kernel
	}
	c.late[lateClosed]++
}

// counts returns the counts of open window w, starting them if w has none
// yet.
func (p *producer) counts(w int64) *counts {
	o := &p.open[slotOf(w, len(p.open))]
	if o.window != w {
		o.window = w
		o.counts.reset()
	}
	return &o.counts
}

// slotOf returns w modulo n, in [0, n).
func slotOf(w int64, n int) int {
	i := int(w % int64(n))
	if i < 0 {
		i += n
	}
	return i
}

// sideKey buffers a key of open window w older than hi.
func (p *producer) sideKey(s int, w int64, h uint64, k *flow.Key, t int64, obs uint32) {
	sk := &p.side[s]
	if sk.n > 0 && (sk.window != w || sk.n == len(sk.hashes)) {
		p.flushSide(s)
	}
	if sk.n == 0 {
		sk.window, sk.age = w, t
		p.old = min(p.old, t)
	}
	i := sk.n
	sk.hashes[i], sk.keys[i], sk.times[i], sk.obs[i] = h, *k, t, obs
	sk.n = i + 1
}

// flushSide copies shard s's side keys into a ring slot of their own and
// publishes it; live, when the ring is full, they are dropped and counted
// in their window. The slot being filled for window hi is published first:
// a ring has one slot reserved at a time.
func (p *producer) flushSide(s int) {
	sk := &p.side[s]
	if sk.n == 0 {
		return
	}
	if b := p.cur[s]; b != nil {
		if b.n > 0 {
			p.publish(s)
		} else {
			p.cur[s] = nil // reserved but empty: reserve hands out the same slot again
		}
	}
	r := p.rings[s]
	b := r.reserve()
	if b == nil {
		if p.drop {
			p.counts(sk.window).dropped[dropRingFull] += uint64(sk.n)
			sk.n = 0
			return
		}
		b = p.waitSlot(r)
	}
	b.kind = slotData
	b.window = sk.window
	b.n = copy(b.hashes, sk.hashes[:sk.n])
	copy(b.keys, sk.keys[:sk.n])
	copy(b.times, sk.times[:sk.n])
	copy(b.obs, sk.obs[:sk.n])
	sk.n = 0
	r.publish()
	p.handoff(s)
}

func parseError(c *counts, err error) {
	i := reasonIndex(flow.Reason(err))
	if flow.IsMalformed(err) {
		c.malformed[i]++
	} else {
		c.skipped[i]++
	}
}

// current returns the counts of window hi, where what is not tied to a
// packet's time goes (a corrupt file, kernel counts), or before the first
// packet of packet-time windows, counts kept for the first window.
func (p *producer) current() *counts {
	if p.hiCounts == nil {
		return &p.early
	}
	return p.hiCounts
}

// damaged counts a damaged input (capture.ErrCorrupt) as the malformed
// frame it cost (reason "corrupt_file"), in the window open now. An empty
// file (capture.ErrEmpty) held no frame and counts nothing here. Damaged
// files themselves are counted where they are read (pcapfile.Reader.Damaged,
// for replay's totals); this is the frame the damage cost.
func (p *producer) damaged(err error) {
	if errors.Is(err, capture.ErrEmpty) {
		return
	}
	c := p.current()
	c.packets++
	c.malformed[reasonIndex(corruptFile)]++
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
		if now := time.Now().UnixNano(); now >= p.next {
			p.advance(now)
		}
	}
}

// idle runs when a live source had no frame for its poll interval: flush
// what is buffered so records are not held back on a quiet link, and close
// windows by the wall clock.
func (p *producer) idle() {
	now := time.Now().UnixNano()
	if now >= p.next && (p.wall || p.idleWall && p.liveClock(now)) {
		p.advance(now)
	}
	p.flush()
	for _, w := range p.inline {
		w.flushRecords() // what a worker's goroutine does when it finds nothing to do
	}
	p.pollDrops()
	p.publishStats()
}

// liveClock reports, for IdleWallClock, whether the packets' times follow
// the wall clock: the newest is within two windows and the lateness of
// now, so that the windows it is in have closed by the time the clock is
// past them. Packets far behind it (an exporter reading an old capture)
// close windows by their own times alone, or a pause of the input would
// make the rest of them late. False before the first packet.
func (p *producer) liveClock(now int64) bool {
	if p.hi == winUnknown {
		return false
	}
	if n := p.hiCounts.lastNs; n != math.MinInt64 {
		p.newest = n
	}
	return now-p.newest <= 2*p.win.d+p.win.l
}

// flushStale publishes the batches and side keys whose first key is older
// than liveFlushDelay at packet time t.
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
	for s := range p.side {
		switch sk := &p.side[s]; {
		case sk.n == 0:
		case sk.age < limit:
			p.flushSide(s)
		default:
			p.old = min(p.old, sk.age)
		}
	}
}

// acquire reserves the next slot of shard s's ring for keys of window hi.
// Replay waits for a free slot; live gives up at once and the caller drops
// the key.
func (p *producer) acquire(s int, t int64) *slot {
	r := p.rings[s]
	b := r.reserve()
	if b == nil {
		if p.drop {
			return nil
		}
		b = p.waitSlot(r)
	}
	b.kind = slotData
	b.window = p.hi
	b.n = 0
	p.cur[s] = b
	p.age[s] = t
	p.old = min(p.old, t)
	return b
}

// waitSlot blocks until r has a free slot and returns it.
func (p *producer) waitSlot(r *ring) *slot {
	if b := r.reserve(); b != nil {
		return b
	}
	if p.inline != nil {
		for _, w := range p.inline {
			w.drain() // empties the rings: the workers wait on nothing but this goroutine
		}
		if b := r.reserve(); b != nil {
			return b
		}
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
	p.handoff(s)
}

// handoff tells shard s's worker that its ring has a new item: it wakes
// the worker's goroutine or, with an inline worker, runs the worker on this
// goroutine until it has taken everything in its ring.
func (p *producer) handoff(s int) {
	if p.inline != nil {
		p.inline[s].drain()
		return
	}
	p.wake[s].wake()
}

// flush publishes every partly filled batch and every shard's side keys.
func (p *producer) flush() {
	p.old = math.MaxInt64
	for s, b := range p.cur {
		if p.side[s].n > 0 {
			p.flushSide(s) // publishes cur[s] first
			continue
		}
		if b != nil {
			if b.n > 0 {
				p.publish(s)
			} else {
				p.cur[s] = nil // reserved but empty: leave it unpublished
			}
		}
	}
}

// advance moves the open windows for time t, at or past p.next: the window
// of t becomes hi if it is newer, and the windows whose end plus the
// lateness t has reached close.
func (p *producer) advance(t int64) {
	hi, lo := p.win.index(t), p.win.low(t)
	if p.hi == winUnknown {
		// The first packet of packet-time windows: tell the workers where
		// this producer starts.
		p.mark(winNone, nil, lo)
		p.setWindows(lo, hi)
		p.hiCounts.add(&p.early)
		p.early.reset()
		return
	}
	hi, lo = max(hi, p.hi), max(lo, p.lo)
	if hi == p.hi && lo == p.lo {
		// t is at the edge of the int64 range, where window ends
		// saturate: nothing moves.
		p.next = max(p.next, t+1)
		return
	}
	if hi != p.hi {
		p.flush() // the reserved slots hold keys of the old hi
	}
	if lo != p.lo {
		p.closeWindows(lo)
	}
	p.setWindows(lo, hi)
}

// setWindows makes lo..hi the open windows.
func (p *producer) setWindows(lo, hi int64) {
	p.lo, p.hi = lo, hi
	p.hiCounts = p.counts(hi)
	if p.win.d == 0 {
		p.loStart, p.hiStart, p.next = math.MinInt64, math.MinInt64, math.MaxInt64
		return
	}
	p.loStart, p.hiStart = p.win.start(lo), p.win.start(hi)
	p.next = min(p.win.end(hi), p.win.closesAt(lo))
}

// closeWindows closes the open windows before lo: it publishes every key
// read so far, then sends every worker a marker per window it has counts
// for, in order, the last one with lo as its next window (or one marker
// that only moves to lo). Markers are never dropped: live too, they wait
// for a slot. After that no key of those windows ever reaches a worker from
// this producer.
func (p *producer) closeWindows(lo int64) {
	p.flush()
	p.pollDrops()
	end := lo
	if n := int64(len(p.open)); p.lo < winDone-n {
		end = min(lo, p.lo+n) // open windows are within n of lo
	}
	if p.wc != nil {
		for i := p.lo; i < end; i++ {
			p.addWindowCounts(i)
		}
	}
	last := winNone
	for i := p.lo; i < end; i++ {
		if p.open[slotOf(i, len(p.open))].window == i {
			last = i
		}
	}
	if last == winNone {
		p.mark(winNone, nil, lo)
	}
	for i := p.lo; last != winNone && i <= last; i++ {
		o := &p.open[slotOf(i, len(p.open))]
		if o.window != i {
			continue
		}
		next := i + 1
		if i == last {
			next = lo
		}
		p.mark(i, &o.counts, next)
		p.total.add(&o.counts)
		o.window = winNone
	}
	p.lo = lo
	p.publishStats()
}

// mark sends every worker a marker: window closed (winNone: none) with the
// producer's counts c of it, and next, the producer's new low window.
func (p *producer) mark(window int64, c *counts, next int64) {
	if p.fan != nil {
		p.fan.mark(window, c, next) // sent by a parse goroutine, in turn
		return
	}
	for s, r := range p.rings {
		b := r.reserve()
		if b == nil {
			b = p.waitSlot(r)
		}
		b.kind = slotMarker
		b.window = window
		b.n = 0
		b.next = next
		if c != nil {
			b.counts = *c
		} else {
			b.counts.reset()
		}
		r.publish()
		p.handoff(s)
	}
}

// finish ends the producer: its open windows close, with a last marker
// whose next is winDone. A producer that never had a packet of
// packet-time windows sends what it counted (a corrupt file, say) in a
// marker of window winUnknown.
func (p *producer) finish() {
	if p.hi == winUnknown {
		p.pollDrops()
		p.mark(winUnknown, &p.early, winDone)
		p.total.add(&p.early)
		p.early.reset()
		p.publishStats()
		return
	}
	p.closeWindows(winDone)
}

// publishStats stores the counts of closed and open windows into the
// atomics Stats reads.
func (p *producer) publishStats() {
	var sum counts
	sum.reset()
	sum.add(&p.total)
	sum.add(&p.early)
	if p.wc != nil {
		// What the kernel counted in windows not closed yet.
		addKernelCounts(&sum, &p.kc, &p.kcAttr)
	}
	for i := range p.open {
		if p.open[i].window != winNone {
			sum.add(&p.open[i].counts)
		}
	}
	st := p.stats
	st.packets.Store(sum.packets)
	st.prefilter.Store(sum.prefilter)
	for i := range st.malformed {
		st.malformed[i].Store(sum.malformed[i])
		st.skipped[i].Store(sum.skipped[i])
	}
	for i := range st.dropped {
		st.dropped[i].Store(sum.dropped[i])
	}
	for i := range st.late {
		st.late[i].Store(sum.late[i])
	}
}

// startWindows returns the open windows every producer starts with when
// they are known before the first packet: window 0 with windows off, and
// with WallClockWindows those of the current time. Otherwise (packet-time
// windows) both are winUnknown, and each producer's first packet sends a
// marker that says where it starts.
func startWindows(cfg *Config, now time.Time) (lo, hi int64) {
	switch {
	case cfg.Window == 0:
		return 0, 0
	case cfg.WallClockWindows:
		w := newWindowing(cfg)
		return w.low(now.UnixNano()), w.index(now.UnixNano())
	}
	return winUnknown, winUnknown
}

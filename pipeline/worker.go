package pipeline

import (
	"math"
	"sync/atomic"

	"github.com/flowdedup/flowdedup/filters"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/sketch"
)

// batchesPerTurn is how many batches a worker takes from one ring before
// it looks at the next, so that one busy producer cannot starve another's
// ring (whose producer may be blocked on it in replay).
const batchesPerTurn = 8

// fillRatioer is implemented by the filters that can tell how full they
// are (SBF, QHT, Bloom).
type fillRatioer interface{ FillRatio() float64 }

// worker owns one shard: a filter per open window, and the consumer end of
// one ring per producer. It is the only goroutine that touches its
// filters, so they need no lock, and it crosses no atomic per key.
//
// Window protocol, as the worker sees it: at[p] is producer p's low window:
// p sends nothing for windows before it (winUnknown until p has said where
// it starts). low, the smallest at[p], is the oldest window that may still
// receive keys: every window before it is complete. The worker holds the
// windows low .. low+len(slots)-1, each in the slot of its index modulo
// len(slots) (windowing.open: the most a producer can have open at once),
// with a filter of its own. A ring item (a batch or a marker) of a window
// beyond that range waits at the head of its ring until low moves on; that
// happens only when another producer is further behind, and that producer's
// ring is read meanwhile. A marker from p adds p's counts of the window it
// closes (worker 0 only: it hands them to the collator) and moves at[p] to
// its next window. When low passes windows the worker holds, it closes them
// in order: their records, then their close with key, distinct (and, for
// worker 0, the producers') counts, go to the collator, and their filter is
// cleared for a later window. Since every producer sends its markers to
// every worker, all workers hold and close the same windows in the same
// order.
type worker struct {
	id int
	// rings holds, by producer, its rings to this worker: one, or one per
	// parse goroutine of a producer that parses in parallel (fanout),
	// read in turn from turn[p] on: each slotTurn item moves to the next.
	rings    [][]*ring
	turn     []int
	prodPark [][]*parker // by producer and ring: its writer, woken when a slot is freed
	park     *parker
	ready    func() bool
	win      windowing

	at    []int64 // by producer
	low   int64   // min(at)
	slots []wslot // by window modulo len(slots)
	pre   counts  // worker 0: counts of a producer that never had a packet (marker of winUnknown)
	hot   *wslot  // the slot of the last batch, for Stats' fill ratio

	keysBefore, distinctBefore uint64 // in closed windows, for Stats
	keys, distinct             uint64 // in open windows

	out  chan<- *outBatch
	free <-chan *outBatch
	ob   *outBatch // being filled

	dup []bool // the filter's answers for the batch being observed

	noEstimate bool // Config.NoEstimate: the sketches are not fed

	stats *workerStats
}

// wslot is one open window of a worker.
type wslot struct {
	window   int64 // winNone: free
	filter   filters.Filter
	fill     fillRatioer // nil when the filter has no fill ratio
	startNs  int64       // of window, for records
	endNs    int64
	keys     uint64
	distinct uint64
	counts   counts     // worker 0: the producers' counts
	sketch   sketchFeed // every key of the window given to this worker
}

// workerStats are a worker's counters for Stats, stored once per batch.
type workerStats struct {
	_          cacheLinePad
	keys       atomic.Uint64
	distinct   atomic.Uint64
	fill       atomic.Uint64 // math.Float64bits of the fill ratio
	fillWanted atomic.Bool   // set by Stats: compute the fill ratio at the next batch boundary
	waiting    atomic.Bool   // send waits for a free output batch: all of them are with the collator
	_          cacheLinePad
}

// outBatch carries records from a worker to the collator, then returns to
// the worker through its free list. A batch with close set ends one of the
// worker's windows: its records come first, then the close.
type outBatch struct {
	worker int
	recs   []record.Record

	close    bool
	final    bool  // the worker's last close: every producer has ended
	window   int64 // the window closed (winUnknown: no producer ever had a packet)
	keys     uint64
	distinct uint64
	counts   counts // worker 0 only
	// sketch: with close, the worker's sketch of the window, which the
	// collator merges into the window's; it is empty whenever the batch is
	// with the worker.
	sketch *sketch.HLL
}

// newWorker makes worker id with its filters (one per window that can be
// open at once), starting with producers at window lo.
func newWorker(id int, filt []filters.Filter, sk *sketch.HLL, cfg *Config, lo int64, rings [][]*ring, prodPark [][]*parker, park *parker, out chan<- *outBatch, free <-chan *outBatch, stats *workerStats) *worker {
	w := &worker{
		id:       id,
		rings:    rings,
		turn:     make([]int, len(rings)),
		prodPark: prodPark,
		park:     park,
		win:      newWindowing(cfg),
		at:       make([]int64, len(rings)),
		low:      lo,
		slots:    make([]wslot, len(filt)),
		out:      out,
		free:     free,
		stats:    stats,
		dup:      make([]bool, cfg.BatchSize),

		noEstimate: cfg.NoEstimate,
	}
	for i, f := range filt {
		w.slots[i] = wslot{window: winNone, filter: f, sketch: newSketchFeed(sk)}
		w.slots[i].fill, _ = f.(fillRatioer)
	}
	w.hot = &w.slots[0]
	w.ready = w.anyReady
	for i := range w.at {
		w.at[i] = lo
	}
	w.pre.reset()
	return w
}

func (w *worker) run() {
	w.ob = <-w.free
	for {
		progressed := w.step()
		if w.low == winDone {
			w.finish()
			return
		}
		if !progressed {
			w.flushRecords() // idle: hand over what we have, for latency
			w.park.park(w.ready)
		}
	}
}

// step takes what the rings hold for the worker now, up to batchesPerTurn
// items of each ring in turn, and reports whether it took anything.
func (w *worker) step() (progressed bool) {
	for p := range w.rings {
		for range batchesPerTurn {
			t := w.turn[p]
			r := w.rings[p][t]
			b := r.peek()
			if b == nil || !w.holds(b.window) {
				break
			}
			progressed = true
			kind := b.kind
			switch kind {
			case slotMarker:
				w.marker(p, b)
			case slotCounts:
				w.slot(b.window).counts.add(&b.counts)
			case slotTurn:
				w.turn[p] = (t + 1) % len(w.rings[p])
			default:
				w.observe(b)
			}
			r.release()
			w.prodPark[p][t].wake()
			if kind == slotMarker {
				break // another producer's marker may be due first
			}
		}
	}
	return progressed
}

// flushRecords hands the records gathered so far to the collator.
func (w *worker) flushRecords() {
	if len(w.ob.recs) > 0 {
		w.send()
	}
}

// startInline readies a worker that runs on its producer's goroutine
// (producer.inline) instead of its own: the producer calls drain after
// each item it publishes, and endInline once it has returned.
func (w *worker) startInline() { w.ob = <-w.free }

// drain takes every item in the worker's rings. Inline only: with one
// producer, every item it publishes is of a window the worker holds, so
// drain leaves the rings empty.
func (w *worker) drain() {
	for w.low != winDone && w.step() {
	}
}

// endInline ends an inline worker once its producer has returned (and so
// has sent its last marker): it takes what is left and closes its windows.
func (w *worker) endInline() {
	w.drain()
	w.finish()
}

// holds reports whether window i is one the worker can take items of now:
// below low+len(slots). winNone (a marker closing nothing) and winUnknown
// always are.
func (w *worker) holds(i int64) bool {
	if i == winNone || i == winUnknown {
		return true
	}
	if w.low == winUnknown {
		return false // a producer has not said where it starts
	}
	return i-w.low < int64(len(w.slots))
}

// slot returns the slot of window i (low <= i < low+len(slots)), taking
// it for i if it is free.
func (w *worker) slot(i int64) *wslot {
	sl := &w.slots[slotOf(i, len(w.slots))]
	if sl.window != i {
		sl.window = i
		if w.win.d != 0 {
			sl.startNs, sl.endNs = w.win.start(i), w.win.end(i)
		}
		sl.keys, sl.distinct = 0, 0
		sl.counts.reset()
	}
	return sl
}

// marker takes producer p's marker b: its counts of the window it closes,
// and its new low window.
func (w *worker) marker(p int, b *slot) {
	switch b.window {
	case winNone:
	case winUnknown:
		if w.id == 0 {
			w.pre.add(&b.counts)
		}
	default:
		sl := w.slot(b.window)
		if w.id == 0 {
			sl.counts.add(&b.counts)
		}
	}
	w.at[p] = b.next
	low := winDone
	for _, a := range w.at {
		low = min(low, a)
	}
	if low != w.low {
		if low != winDone {
			w.closeBefore(low)
		} // else finish closes them all, the last one as final
		w.low = low
	}
}

// observe runs the batch's keys through its window's filter: the hot loop.
func (w *worker) observe(b *slot) {
	sl := w.slot(b.window)
	w.hot = sl
	hashes := b.hashes[:b.n]
	dup := w.dup[:len(hashes)]
	filters.ObserveAll(sl.filter, hashes, dup) // the batch path, when the filter has one
	for i, d := range dup {
		if !d {
			w.emit(sl, &b.keys[i], b.times[i], b.obs[i])
		}
	}
	if !w.noEstimate {
		sl.sketch.add(b.keys[:b.n], hashes) // every key, not only the unseen: the estimate must not inherit the filter's errors
	}
	n := uint64(len(hashes))
	sl.keys += n
	w.keys += n
	st := w.stats
	st.keys.Store(w.keysBefore + w.keys)
	st.distinct.Store(w.distinctBefore + w.distinct)
	if st.fillWanted.Load() {
		st.fillWanted.Store(false)
		w.storeFill()
	}
}

// emit appends a record of an unseen key of slot sl's window.
func (w *worker) emit(sl *wslot, k *flow.Key, t int64, obs uint32) {
	if len(w.ob.recs) == cap(w.ob.recs) {
		w.send()
	}
	w.ob.recs = append(w.ob.recs, record.Record{Key: *k, TimeNs: t, WindowNs: sl.startNs, WindowEndNs: sl.endNs, Worker: w.id, ObserverID: obs, Windowed: w.win.d != 0})
	sl.distinct++
	w.distinct++
}

// send hands the current output batch to the collator and takes a free
// one. It blocks while the collator holds all of this worker's batches:
// that is how a slow sink pushes back on the workers, and through the
// rings on the producers.
func (w *worker) send() {
	w.out <- w.ob
	select {
	case w.ob = <-w.free:
	default:
		w.stats.waiting.Store(true)
		w.ob = <-w.free
		w.stats.waiting.Store(false)
	}
}

// closeBefore closes, in order, the windows the worker holds that are
// before low.
func (w *worker) closeBefore(low int64) {
	if w.low == winUnknown {
		return // nothing held yet
	}
	n := int64(len(w.slots))
	end := low
	if w.low < winDone-n {
		end = min(low, w.low+n)
	}
	for i := w.low; i < end; i++ {
		if sl := &w.slots[slotOf(i, len(w.slots))]; sl.window == i {
			w.close(sl, false)
		}
	}
}

// close sends the close of slot sl's window and frees the slot.
func (w *worker) close(sl *wslot, final bool) {
	ob := w.ob
	ob.close, ob.final = true, final
	ob.window = sl.window
	ob.keys, ob.distinct = sl.keys, sl.distinct
	ob.counts = sl.counts
	ob.sketch = sl.sketch.take(ob.sketch) // the collator merges the window's and empties it; the slot takes the empty one
	if w.id == 0 {
		ob.counts.add(&w.pre) // what producers that never had a packet counted goes to the first window closed
		w.pre.reset()
	}
	if final {
		w.out <- ob
		w.ob = nil
	} else {
		w.send()
		sl.filter.Reset() // the last one stays as the run left it, for Stats
	}
	sl.window = winNone
	w.keysBefore += sl.keys
	w.distinctBefore += sl.distinct
	w.keys -= sl.keys
	w.distinct -= sl.distinct
}

// finish closes the windows still held, the last one as final. With none
// at all (no producer had a packet), the final close is of window
// winUnknown, with what the producers counted.
func (w *worker) finish() {
	var last *wslot
	for i := range w.slots {
		if sl := &w.slots[i]; sl.window != winNone && (last == nil || sl.window > last.window) {
			last = sl
		}
	}
	if last == nil {
		sl := &wslot{window: winUnknown, filter: w.slots[0].filter, sketch: w.slots[0].sketch} // empty: no window was held
		sl.counts.reset()
		w.close(sl, true) // with w.pre's counts
		return
	}
	for {
		var next *wslot
		for i := range w.slots {
			if sl := &w.slots[i]; sl.window != winNone && (next == nil || sl.window < next.window) {
				next = sl
			}
		}
		if next == last {
			w.close(last, true)
			return
		}
		w.close(next, false)
	}
}

// storeFill publishes the fill ratio of the filter the worker used last.
// It scans the filter, so only on request (Stats).
func (w *worker) storeFill() {
	r := -1.0
	if w.hot.fill != nil {
		r = w.hot.fill.FillRatio()
	}
	w.stats.fill.Store(math.Float64bits(r))
}

// anyReady is the worker's parking condition: a ring has an item the
// worker can take.
func (w *worker) anyReady() bool {
	for p, rs := range w.rings {
		if r := rs[w.turn[p]]; r.ready() {
			if b := r.peek(); b != nil && w.holds(b.window) {
				return true
			}
		}
	}
	return false
}

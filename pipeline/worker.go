package pipeline

import (
	"math"
	"sync/atomic"

	"github.com/flowdedup/flowdedup/filters"
	"github.com/flowdedup/flowdedup/flow"
)

// batchesPerTurn is how many batches a worker takes from one ring before
// it looks at the next, so that one busy producer cannot starve another's
// ring (whose producer may be blocked on it in replay).
const batchesPerTurn = 8

// fillRatioer is implemented by the filters that can tell how full they
// are (SBF, QHT, Bloom).
type fillRatioer interface{ FillRatio() float64 }

// worker owns one shard: its filter, and the consumer end of one ring per
// producer. It is the only goroutine that touches its filter, so the
// filter needs no lock, and it crosses no atomic per key.
//
// Window protocol, as the worker sees it: at[p] is the window producer p is
// in. A ring is read only while its producer is in the worker's window
// (at[p] == win); a marker from p moves at[p] to the marker's next window,
// after which the ring is left alone, even though it may already hold keys
// of the next window. When no producer is left in win (every at[p] > win),
// the window is complete: the worker sends its close to the collator,
// clears its filter and moves to the smallest at[p]. Since every producer
// sends its markers to every worker, all workers go through the same
// sequence of windows.
type worker struct {
	id       int
	filter   filters.Filter
	fill     fillRatioer // nil when the filter has no fill ratio
	rings    []*ring     // by producer
	prodPark []*parker   // by producer: woken when a slot is freed
	park     *parker
	ready    func() bool
	win      windowing

	at       []int64 // by producer
	window   int64
	startNs  int64 // of window, for records
	endNs    int64
	keys     uint64 // in this window
	distinct uint64
	acc      counts // worker 0 only: the producers' counts for this window

	keysBefore, distinctBefore uint64 // in earlier windows, for Stats

	out  chan<- *outBatch
	free <-chan *outBatch
	ob   *outBatch // being filled

	stats *workerStats
}

// workerStats are a worker's counters for Stats, stored once per batch.
type workerStats struct {
	_          cacheLinePad
	keys       atomic.Uint64
	distinct   atomic.Uint64
	fill       atomic.Uint64 // math.Float64bits of the fill ratio
	fillWanted atomic.Bool   // set by Stats: compute the fill ratio at the next batch boundary
	_          cacheLinePad
}

// outBatch carries records from a worker to the collator, then returns to
// the worker through its free list. A batch with close set ends the
// worker's window: its records come first, then the close.
type outBatch struct {
	worker int
	recs   []Record

	close    bool
	window   int64 // the window closed (winUnknown: no producer ever had a packet)
	next     int64 // the worker's next window (winDone: this was the last)
	keys     uint64
	distinct uint64
	counts   counts // worker 0 only
}

func newWorker(id int, f filters.Filter, cfg *Config, start int64, rings []*ring, prodPark []*parker, park *parker, out chan<- *outBatch, free <-chan *outBatch, stats *workerStats) *worker {
	w := &worker{
		id:       id,
		filter:   f,
		rings:    rings,
		prodPark: prodPark,
		park:     park,
		win:      windowing{d: int64(cfg.Window)},
		at:       make([]int64, len(rings)),
		out:      out,
		free:     free,
		stats:    stats,
	}
	w.fill, _ = f.(fillRatioer)
	w.ready = w.anyReady
	for i := range w.at {
		w.at[i] = start
	}
	w.acc.reset()
	w.enter(start)
	return w
}

func (w *worker) run() {
	w.ob = <-w.free
	for {
		progressed := false
		for p, r := range w.rings {
			if w.at[p] != w.window {
				continue // done with our window: its ring may hold the next one's keys
			}
			for range batchesPerTurn {
				b := r.peek()
				if b == nil {
					break
				}
				progressed = true
				if b.kind == slotMarker {
					w.at[p] = b.next
					if w.id == 0 {
						w.acc.add(&b.counts)
					}
					r.release()
					w.prodPark[p].wake()
					break
				}
				w.observe(b)
				r.release()
				w.prodPark[p].wake()
			}
		}
		if w.windowComplete() {
			if w.closeWindow() {
				return
			}
			continue
		}
		if !progressed {
			if len(w.ob.recs) > 0 {
				w.send() // idle: hand over what we have, for latency
			}
			w.park.park(w.ready)
		}
	}
}

// observe runs the batch's keys through the filter: the hot loop.
func (w *worker) observe(b *batch) {
	f := w.filter
	hashes := b.hashes[:b.n]
	for i, h := range hashes {
		if !f.Observe(h) {
			w.emit(&b.keys[i], b.times[i])
		}
	}
	w.keys += uint64(len(hashes))
	st := w.stats
	st.keys.Store(w.keysBefore + w.keys)
	st.distinct.Store(w.distinctBefore + w.distinct)
	if st.fillWanted.Load() {
		st.fillWanted.Store(false)
		w.storeFill()
	}
}

// emit appends a record of an unseen key.
func (w *worker) emit(k *flow.Key, t int64) {
	if len(w.ob.recs) == cap(w.ob.recs) {
		w.send()
	}
	w.ob.recs = append(w.ob.recs, Record{Key: *k, TimeNs: t, WindowNs: w.startNs, WindowEndNs: w.endNs, Worker: w.id})
	w.distinct++
}

// send hands the current output batch to the collator and takes a free
// one. It blocks while the collator holds all of this worker's batches:
// that is how a slow sink pushes back on the workers, and through the
// rings on the producers.
func (w *worker) send() {
	w.out <- w.ob
	w.ob = <-w.free
}

// windowComplete reports whether no producer is left in the window.
func (w *worker) windowComplete() bool {
	for _, a := range w.at {
		if a == w.window {
			return false
		}
	}
	return true
}

// closeWindow closes the worker's window and moves to the next one. It
// returns true after the last window.
func (w *worker) closeWindow() bool {
	next := winDone
	for _, a := range w.at {
		next = min(next, a)
	}
	if w.window == winUnknown && next != winDone {
		// Every producer has said where it starts: nothing to close yet.
		// (Counts that came with the start markers, kernel drops, stay
		// in acc for the first window.)
		w.enter(next)
		return false
	}
	ob := w.ob
	ob.close = true
	ob.window = w.window
	ob.next = next
	ob.keys = w.keys
	ob.distinct = w.distinct
	ob.counts = w.acc
	if next == winDone {
		w.out <- ob
		w.ob = nil
		return true
	}
	w.send()
	w.filter.Reset()
	w.keysBefore += w.keys
	w.distinctBefore += w.distinct
	w.keys, w.distinct = 0, 0
	w.acc.reset()
	w.enter(next)
	return false
}

// enter makes window i the worker's current one.
func (w *worker) enter(i int64) {
	w.window = i
	if w.win.d != 0 {
		w.startNs, w.endNs = w.win.start(i), w.win.end(i)
	}
}

// storeFill publishes the filter's fill ratio. It scans the filter, so
// only on request (Stats).
func (w *worker) storeFill() {
	r := -1.0
	if w.fill != nil {
		r = w.fill.FillRatio()
	}
	w.stats.fill.Store(math.Float64bits(r))
}

// anyReady is the worker's parking condition: a ring it reads has a slot.
func (w *worker) anyReady() bool {
	for p, r := range w.rings {
		if w.at[p] == w.window && r.ready() {
			return true
		}
	}
	return false
}

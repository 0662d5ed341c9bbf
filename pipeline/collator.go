package pipeline

import (
	"sync/atomic"
	"time"
)

// Output batching: each worker owns outPool batches of outBatchSize
// records, which circulate worker -> collator -> worker. The collator
// returns every batch after writing its records, so in steady state no
// record allocates, and a worker whose batches are all with the collator
// waits: a slow Sink slows the workers instead of growing a queue.
const (
	outBatchSize = 256
	outPool      = 4
)

// collator is the one goroutine that calls the Sink: it collates the
// workers' record batches and window closes into the Sink's ordered stream. Records arrive in
// batches from the workers over one channel; a window's summary is written
// once every worker has closed it.
//
// A worker that has closed the current window while others have not may
// already send records of its next window. Those batches are held, in
// order, in the worker's pending queue until the summary is written (at
// most outPool of them: then the worker waits for its free list), so that
// every Record of a window reaches the Sink before that window's summary
// and none after it.
type collator struct {
	sink     Sink
	win      windowing
	out      <-chan *outBatch
	free     []chan *outBatch // by worker
	stop     *atomic.Bool
	runStart time.Time
	windows  *atomic.Uint64 // summaries written, for Stats

	closed  []bool // by worker: has closed the current window
	nclosed int
	pending []batchQueue // by worker

	// The window being assembled.
	window   int64
	next     int64
	keys     uint64
	distinct uint64
	counts   counts

	err  error
	done bool
	// unflushed: records went to the sink since its last Flush.
	unflushed bool
}

func newCollator(sink Sink, win windowing, out <-chan *outBatch, free []chan *outBatch, stop *atomic.Bool, windows *atomic.Uint64) *collator {
	r := &collator{
		sink:     sink,
		win:      win,
		out:      out,
		free:     free,
		stop:     stop,
		runStart: time.Now(),
		windows:  windows,
		closed:   make([]bool, len(free)),
		pending:  make([]batchQueue, len(free)),
	}
	for i := range r.pending {
		r.pending[i] = batchQueue{buf: make([]*outBatch, outPool+1)}
	}
	r.counts.reset()
	return r
}

// run reports until the last window is written, then closes the Sink. It
// returns the first Sink error. After an error the collator goes on
// receiving, without calling the Sink, so that the workers and producers
// (told to stop) wind down through the normal end-of-input path.
func (r *collator) run() error {
	flusher, _ := r.sink.(Flusher)
	for !r.done {
		var m *outBatch
		select {
		case m = <-r.out:
		default:
			// Nothing waiting: the workers are idle or between batches. Push
			// buffered records out now, so live output lags by the workers'
			// idle hand-over, not by a buffer or a window filling up.
			if flusher != nil && r.unflushed && r.err == nil {
				if err := flusher.Flush(); err != nil {
					r.fail(err)
				}
				r.unflushed = false
			}
			m = <-r.out
		}
		if r.closed[m.worker] {
			r.pending[m.worker].push(m)
			continue
		}
		r.consume(m)
		for r.nclosed == len(r.closed) && !r.done {
			r.summarize()
			r.replayPending()
		}
	}
	if err := r.sink.Close(); err != nil && r.err == nil {
		r.err = err
	}
	return r.err
}

// consume writes m's records, takes its close if it has one, and returns m
// to its worker.
func (r *collator) consume(m *outBatch) {
	for i := range m.recs {
		if r.err != nil {
			break
		}
		if err := r.sink.Record(&m.recs[i]); err != nil {
			r.fail(err)
		}
		r.unflushed = true
	}
	if m.close {
		r.closed[m.worker] = true
		r.nclosed++
		r.window, r.next = m.window, m.next
		r.keys += m.keys
		r.distinct += m.distinct
		if m.worker == 0 {
			r.counts = m.counts
		}
	}
	m.recs = m.recs[:0]
	m.close = false
	r.free[m.worker] <- m // never blocks: the channel holds the worker's whole pool
}

// replayPending consumes held batches, in order, until each worker has
// closed the (new) current window again or has nothing held.
func (r *collator) replayPending() {
	for w := range r.pending {
		q := &r.pending[w]
		for !r.closed[w] && q.len() > 0 {
			r.consume(q.pop())
		}
	}
}

func (r *collator) fail(err error) {
	r.err = err
	r.stop.Store(true)
}

// summarize writes the summary of the window every worker has closed, then
// the empty windows up to the next one, and starts the next.
func (r *collator) summarize() {
	final := r.next == winDone
	s := r.summary(final)
	r.emit(s)
	if !final && r.window != winUnknown {
		r.emitGap(r.window+1, r.next)
	}
	clear(r.closed)
	r.nclosed = 0
	r.keys, r.distinct = 0, 0
	r.counts.reset()
	r.done = final
}

func (r *collator) emit(s *WindowSummary) {
	r.windows.Add(1)
	if r.err != nil {
		return
	}
	if err := r.sink.Window(s); err != nil {
		r.fail(err)
	}
}

// summary builds the WindowSummary of the assembled window. Windows have
// their nominal bounds [i*Window, (i+1)*Window), the final one included
// (Final says it may be partial). With windows off the one window spans the
// packets' times, first to last; a run that read no packet at all reports
// its wall-clock span.
func (r *collator) summary(final bool) *WindowSummary {
	c := &r.counts
	s := &WindowSummary{Packets: c.packets, Keys: r.keys + c.prefilter, Prefiltered: c.prefilter, Distinct: r.distinct, Final: final}
	s.MalformedBy, s.Malformed = byLabel(c.malformed[:len(reasonLabels)], reasonLabels)
	s.SkippedBy, s.Skipped = byLabel(c.skipped[:len(reasonLabels)], reasonLabels)
	s.DroppedBy, s.Dropped = byLabel(c.dropped[:], dropLabels[:])
	switch {
	case r.win.d != 0 && r.window != winUnknown:
		s.StartNs, s.EndNs = r.win.start(r.window), r.win.end(r.window)
	case c.firstNs <= c.lastNs:
		s.StartNs, s.EndNs = c.firstNs, c.lastNs
	default:
		s.StartNs, s.EndNs = r.runStart.UnixNano(), time.Now().UnixNano()
	}
	return s
}

// emitGap writes empty summaries for windows [from, to): one per window, or
// one spanning the gap when it is longer than maxGapWindows.
func (r *collator) emitGap(from, to int64) {
	if to-from > maxGapWindows {
		r.emit(r.empty(r.win.start(from), r.win.start(to)))
		return
	}
	for i := from; i < to; i++ {
		r.emit(r.empty(r.win.start(i), r.win.end(i)))
	}
}

func (r *collator) empty(start, end int64) *WindowSummary {
	return &WindowSummary{
		StartNs: start, EndNs: end,
		MalformedBy: map[string]uint64{}, SkippedBy: map[string]uint64{}, DroppedBy: map[string]uint64{},
	}
}

// batchQueue is a FIFO of a worker's held batches, in a fixed buffer: a
// worker never has more than outPool batches out.
type batchQueue struct {
	buf        []*outBatch
	head, size int
}

func (q *batchQueue) len() int { return q.size }

func (q *batchQueue) push(m *outBatch) {
	if q.size == len(q.buf) {
		panic("pipeline: a worker has more output batches out than its pool")
	}
	q.buf[(q.head+q.size)%len(q.buf)] = m
	q.size++
}

func (q *batchQueue) pop() *outBatch {
	m := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return m
}

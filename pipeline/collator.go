package pipeline

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/sketch"
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
// workers' record batches and window closes into the Sink's ordered stream.
// Records arrive in batches from the workers over one channel and go to
// the Sink at once, whatever their window; a window's summary is written
// once every worker has closed it. A worker sends all its records of a
// window before its close of that window, and every worker closes the same
// windows in the same order, so every Record of a window reaches the Sink
// before that window's summary and none after it, while records of later
// windows (and of earlier ones still open within the lateness) may come
// before it.
type collator struct {
	sink     Sink
	win      windowing
	out      <-chan *outBatch
	free     []chan *outBatch // by worker
	stop     *atomic.Bool
	runStart time.Time
	windows  *atomic.Uint64 // summaries written, for Stats

	// Windows being assembled, oldest first. Workers close the same
	// windows in the same order, so worker w's next close is of window
	// pending[seen[w]-done].
	pending []assembly
	seen    []int // by worker: closes received
	done    int   // windows summarised (assemblies popped)
	last    int64 // the last window summarised (winUnknown: none yet)
	nw      int

	err error
	fin bool
	// unflushed: records went to the sink since its last Flush.
	unflushed bool

	// The distinct-count sketches: each assembly merges its workers'
	// sketches into one of its own, taken from spare (empty ones, cloned
	// from proto while there are too few: as many as windows are assembled
	// at once) and given back when its summary is written.
	proto       *sketch.HLL
	spare       []*sketch.HLL
	keep        bool   // Config.KeepSketch
	emptySketch []byte // binary form of an empty sketch, for empty windows (keep)
}

// assembly is a window being put together from the workers' closes.
type assembly struct {
	window   int64
	closes   int
	final    bool
	keys     uint64
	distinct uint64
	counts   counts
	sketch   *sketch.HLL // the union of the workers' sketches so far
}

// newCollator makes the collator; proto is an empty sketch of the run's
// precision and seed.
func newCollator(sink Sink, win windowing, out <-chan *outBatch, free []chan *outBatch, stop *atomic.Bool, windows *atomic.Uint64, proto *sketch.HLL, keep bool) *collator {
	return &collator{
		sink:     sink,
		win:      win,
		out:      out,
		free:     free,
		stop:     stop,
		runStart: time.Now(),
		windows:  windows,
		seen:     make([]int, len(free)),
		last:     winUnknown,
		nw:       len(free),
		proto:    proto,
		keep:     keep,
	}
}

// run reports until the last window is written, then closes the Sink. It
// returns the first Sink error. After an error the collator goes on
// receiving, giving the Sink no more records but still the summaries of
// the windows it closes, so that the workers and producers (told to stop)
// wind down through the normal end-of-input path and the Sink's totals are
// whole.
func (r *collator) run() error {
	flusher, _ := r.sink.(Flusher)
	for !r.fin {
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
		r.consume(m)
		for len(r.pending) > 0 && r.pending[0].closes == r.nw {
			r.summarize()
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
		k := r.seen[m.worker] - r.done
		r.seen[m.worker]++
		if k == len(r.pending) {
			r.pending = append(r.pending, assembly{window: m.window, sketch: r.spareSketch()})
			r.pending[k].counts.reset()
		}
		a := &r.pending[k]
		if a.window != m.window {
			panic("pipeline: workers closed different windows")
		}
		a.closes++
		a.final = a.final || m.final
		a.keys += m.keys
		a.distinct += m.distinct
		if m.worker == 0 {
			a.counts.add(&m.counts)
		}
		if err := a.sketch.Merge(m.sketch); err != nil && r.err == nil {
			r.fail(fmt.Errorf("pipeline: merging the workers' sketches: %w", err)) // never: every sketch of a run is a clone of one
		}
		m.sketch.Reset()
	}
	m.recs = m.recs[:0]
	m.close, m.final = false, false
	r.free[m.worker] <- m // never blocks: the channel holds the worker's whole pool
}

func (r *collator) fail(err error) {
	r.err = err
	r.stop.Store(true)
}

// summarize writes the summary of the oldest assembled window, after the
// empty windows between it and the one before.
func (r *collator) summarize() {
	a := r.pending[0]
	r.pending = r.pending[1:]
	r.done++
	if r.last != winUnknown && a.window != winUnknown && r.win.d != 0 {
		r.emitGap(r.last+1, a.window)
	}
	r.emit(r.summary(&a))
	r.last = a.window
	r.fin = a.final
	a.sketch.Reset()
	r.spare = append(r.spare, a.sketch)
}

// spareSketch returns an empty sketch for a new assembly.
func (r *collator) spareSketch() *sketch.HLL {
	if n := len(r.spare); n > 0 {
		s := r.spare[n-1]
		r.spare = r.spare[:n-1]
		return s
	}
	return r.proto.Clone()
}

// encode returns the binary form of sk for a summary: a new slice, which
// the pipeline never touches again.
func (r *collator) encode(sk *sketch.HLL) []byte {
	b, err := sk.MarshalBinary()
	if err != nil && r.err == nil {
		r.fail(fmt.Errorf("pipeline: encoding a window's sketch: %w", err)) // never: sk is not the zero HLL
	}
	return b
}

// emit gives the Sink the summary s. After a Sink error it still does, and
// ignores what the Sink returns, so that a Sink that keeps run totals
// counts every window the pipeline closed (the run's real totals), not
// only those closed before the error.
func (r *collator) emit(s *record.WindowSummary) {
	r.windows.Add(1)
	if err := r.sink.Window(s); err != nil && r.err == nil {
		r.fail(err)
	}
}

// summary builds the WindowSummary of the assembled window. Windows have
// their nominal bounds [i*Window, (i+1)*Window), the final one included
// (Final says it may be partial). With windows off the one window spans the
// packets' times, first to last; a run that read no packet at all reports
// its wall-clock span.
func (r *collator) summary(a *assembly) *record.WindowSummary {
	c := &a.counts
	s := &record.WindowSummary{Packets: c.packets, Keys: a.keys + c.prefilter, Prefiltered: c.prefilter, Distinct: a.distinct, Final: a.final,
		DistinctEstimate: a.sketch.Estimate(), Windowed: r.win.d != 0}
	if r.keep {
		s.Sketch = r.encode(a.sketch)
	}
	s.MalformedBy, s.Malformed = byLabel(c.malformed[:len(reasonLabels)], reasonLabels)
	s.SkippedBy, s.Skipped = byLabel(c.skipped[:len(reasonLabels)], reasonLabels)
	s.DroppedBy, s.Dropped = byLabel(c.dropped[:], dropLabels[:])
	s.LateBy, s.Late = byLabel(c.late[:], lateLabels[:])
	switch {
	case r.win.d != 0 && a.window != winUnknown:
		s.StartNs, s.EndNs = r.win.start(a.window), r.win.end(a.window)
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

func (r *collator) empty(start, end int64) *record.WindowSummary {
	s := &record.WindowSummary{
		StartNs: start, EndNs: end, Windowed: r.win.d != 0,
		MalformedBy: map[string]uint64{}, SkippedBy: map[string]uint64{}, DroppedBy: map[string]uint64{}, LateBy: map[string]uint64{},
	}
	if r.keep {
		// An empty window has an empty sketch, so that a merge over a
		// period finds one in every summary. All empty windows share one
		// encoding: the pipeline never writes to it.
		if r.emptySketch == nil {
			r.emptySketch = r.encode(r.proto)
		}
		s.Sketch = r.emptySketch
	}
	return s
}

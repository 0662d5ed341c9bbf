package pipeline

import "github.com/flowdedup/flowdedup/record"

// Sink receives the pipeline's output. All calls come from one goroutine,
// the pipeline's collator goroutine, in order: every Record of a window
// comes before that window's summary, and none after it. Records of
// different windows may interleave: with Config.Lateness a window stays
// open after the next one has begun, so records of window i+1 can come
// before the summary of window i (Record.WindowNs says which window a
// record is of). Summaries come in window order. An error from a Sink
// stops the pipeline and is returned by Run (a full disk must not be lost
// silently). After that error the Sink is given no more records, but
// still the summary of every window the pipeline closes as it stops (what
// Window then returns is ignored), so that run totals kept by the Sink are
// the real ones.
//
// The pointers passed to Record and Window are valid only for the call: the
// pipeline reuses the memory they point to. A Sink that keeps a Record or a
// summary copies it.
type Sink interface {
	Record(r *record.Record) error
	Window(s *record.WindowSummary) error
	// Close flushes buffered output; called once, after the last Window.
	Close() error
}

// Flusher is implemented by Sinks that buffer records. The collator calls
// Flush whenever it has written records and no more are waiting, so a live
// capture's records reach their file within moments, not when a window
// closes or a buffer fills.
type Flusher interface {
	Flush() error
}

// Stats is a snapshot of the pipeline's counters since it started, for
// metrics and progress lines. Safe to take from any goroutine.
type Stats struct {
	Packets     uint64
	Malformed   uint64
	Keys        uint64
	Distinct    uint64
	Dropped     uint64
	MalformedBy map[string]uint64
	DroppedBy   map[string]uint64
	Workers     []WorkerStats

	Skipped   uint64            // frames with no IP key, as in WindowSummary
	SkippedBy map[string]uint64 // by flow.Reason
	Windows   uint64            // windows closed so far (summaries written, empty ones included)

	Prefiltered uint64 // as in WindowSummary; part of Keys

	Late   uint64            // as in WindowSummary
	LateBy map[string]uint64 // by reason
}

// WorkerStats are one shard's counters.
type WorkerStats struct {
	Keys      uint64
	Distinct  uint64
	RingLen   int     // batches waiting in its input ring(s) now
	RingCap   int     // capacity of its input ring(s), in batches
	FillRatio float64 // the filter's fill ratio, -1 when the filter has none (see Pipeline.Stats)
}

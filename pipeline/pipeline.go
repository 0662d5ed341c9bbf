package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/filters"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/sketch"
)

// Defaults for the zero values of Config's sizes.
const (
	// DefaultRingBatches and DefaultBatchSize give each (producer, worker)
	// ring 32768 keys in flight, about 1.8 MB: a few milliseconds of
	// traffic at line rate, enough to ride out a worker's window reset or
	// a descheduled goroutine without dropping (live) or stalling
	// (replay), while one batch (256 keys, 14 KB) still fits in L1/L2 as
	// it crosses cores.
	DefaultRingBatches = 128
	DefaultBatchSize   = 256
	// DefaultReplayRingBatches is the ring capacity without Live: a
	// producer that finds its ring full waits rather than drops, so the
	// ring needs only enough slack to keep both ends busy, and a shallow
	// one stays in the caches of the two cores it joins. Replaying a
	// 1M-packet capture, rings of 32 batches took 8-10 ms less CPU than
	// rings of 128 (which the kernel must also zero as they are first
	// written) and were not slower with 1 or 2 workers; rings of 8 made
	// the producer wait.
	DefaultReplayRingBatches = 32
	// DefaultInlineRingBatches is the ring capacity of workers that run on
	// their producer's goroutine (replay of one source without parse
	// goroutines): the producer runs the worker on each item as soon as
	// it publishes it, so the ring never holds more than one, and two
	// slots that the producer takes in turn stay in its core's cache,
	// where 32 pushed 480 KB a worker through it beside the filter.
	DefaultInlineRingBatches = 2
)

// Config configures a Pipeline.
type Config struct {
	// Workers is the number of shards, each a goroutine owning one filter.
	// 0 means runtime.NumCPU().
	Workers int
	// Filter is the filter spec (filters.New) of each shard: sizes such
	// as mem= are per shard.
	Filter string
	// Key is the flow key kind.
	Key flow.KeyKind
	// Prefix masks the addresses of every key to its network (flow.Mask:
	// --prefix), the keys it parses and those a source hands it, before
	// they are hashed. The zero Mask keys hosts.
	Prefix flow.Mask
	// Decap lists the tunnels whose innermost IP header keys a packet
	// (flow.Key.DecodeDecap: --decap), for the frames the pipeline parses
	// itself; keys a source hands it are its own. The zero Decap keys
	// the outermost header.
	Decap flow.Decap
	// Seed keys the flow hash (flow.Key.Hash). It should be secret and
	// random per run unless reproducibility is wanted.
	Seed uint64
	// FilterSeed seeds the filters' own randomness; shard i gets
	// FilterSeed+i.
	FilterSeed uint64
	// Window is the landmark window length: each key is reported at most
	// once per window, and the filters are cleared between windows. 0
	// turns windows off: the whole run is one window.
	Window time.Duration
	// Lateness is how long a window stays open after its end: a window
	// closes only when a producer has seen a time past its end plus the
	// lateness, so a packet whose timestamp goes back by up to Lateness
	// (interfaces interleaved in a pcapng file, several capture rings) is
	// still counted and keyed in its own window. A packet older than every
	// open window is late: counted (WindowSummary.Late) in the newest
	// window, neither keyed nor reported. Each worker keeps a filter for
	// every window that can be open at once, ceil(Lateness/Window)+1 of
	// them (at most 64), so the filters take that many times the spec's
	// memory. Ignored when Window is 0.
	Lateness time.Duration
	// Live selects the live-capture backpressure policy: a producer whose
	// ring to a worker is full drops the key and counts it (DroppedBy
	// "ring_full") rather than stall the capture. Without Live (replay) the
	// producer waits and nothing is ever dropped.
	Live bool
	// WallClockWindows closes windows by the wall clock (live capture)
	// rather than by packet time alone: a producer also checks the clock
	// on its source's idle ticks (capture.ErrTimeout) and every few
	// thousand packets, so windows close on an idle link, and the first
	// window is the current one. Packets are still placed by their
	// capture time, which for a live source is the wall clock.
	WallClockWindows bool
	// Wait makes the producers of a Live pipeline wait for room in a full
	// ring, as replay's do, rather than drop the key: for a live source
	// that holds what arrives meanwhile and counts what it cannot (collect:
	// the kernel's socket buffers, and their drops). The rest of Live
	// (draining the source when stopped, flushing batches by time) stays.
	Wait bool
	// IdleWallClock closes windows by the wall clock on a live source's
	// idle ticks (capture.ErrTimeout) only, and only while the newest
	// packet time is within two windows and the lateness of the wall
	// clock: otherwise packets' own times place them and move the
	// windows, and the first window is the first packet's. For sources
	// whose times are not their arrival (collect's flow records carry
	// their flow start) whose windows should still close on a quiet
	// network, while an exporter reading an old capture, whose times are
	// far behind the clock, can pause without making the rest late.
	// Ignored with WallClockWindows.
	IdleWallClock bool
	// RingBatches is the capacity of each (producer, worker) ring in
	// batches (rounded up to a power of two), BatchSize the keys per
	// batch. 0 means DefaultRingBatches (DefaultReplayRingBatches without
	// Live) and DefaultBatchSize.
	RingBatches, BatchSize int
	// Pin binds each worker and producer goroutine to its own CPU, round
	// robin over the CPUs the process may use (workers first, then
	// producers), through pipeline/internal/affinity: the pipeline makes no system
	// call itself.
	Pin bool

	// Parsers is the number of goroutines that key and hash the frames of
	// each source that frames in bulk (capture.BatchSource: replay's
	// files) while its producer reads: the producer then only frames the
	// file and makes the decisions that depend on file order (windows,
	// lateness, the time-jump guard), and each worker takes its keys in
	// file order, so records, summaries and Stats are those of the
	// producer parsing alone. 0 (and Live) keys in the producer.
	Parsers int

	// SketchSeed keys the hash of the distinct-count sketches
	// (WindowSummary.DistinctEstimate and Sketch; package sketch). Unlike
	// Seed it is not per run: routers whose sketches are merged share it.
	// 0 means sketch.DefaultSeed, a public constant; a fleet that keeps a
	// seed of its own secret sets the same random one on every router.
	SketchSeed uint64
	// SketchPrecision p sets the sketches' size and error: 2^p bytes for
	// each window slot of each worker, standard error 1.04/sqrt(2^p). 0
	// means sketch.DefaultPrecision (14: 16 KiB, 0.81%).
	SketchPrecision uint8
	// KeepSketch puts each window's sketch, in its binary form, in its
	// summary (WindowSummary.Sketch), for merging across windows and
	// routers; it costs an encoding (about 0.3 ms) and one allocation per
	// window. Without it summaries carry only the estimate.
	KeepSketch bool
	// NoEstimate says that nothing reads the summaries' DistinctEstimate
	// and Sketch (a replay whose summaries go nowhere, no metrics, no
	// export): the workers then skip the distinct-count sketch, which
	// would hash every key that its cache of recent keys misses a second
	// time (with SketchSeed) and update a register, and every summary
	// carries the estimate of an empty sketch, 0 (and, with KeepSketch,
	// an empty sketch). Nothing else in the output depends on it. It
	// saved 10-16% of the CPU of `flowdedup replay --key src` on the
	// 2M-packet capture of docs/benchmarks.md.
	NoEstimate bool
}

// Errors.
var (
	// ErrAlreadyRun: a Pipeline runs once.
	ErrAlreadyRun = errors.New("pipeline: Run called twice")
	// ErrConfig wraps every configuration error New returns.
	ErrConfig = errors.New("pipeline: bad config")
)

// Pipeline is the data path from sources to a Sink. Make one with New, run
// it once with Run; Stats may be called from any goroutine at any time.
type Pipeline struct {
	cfg     Config
	sink    Sink
	filters [][]filters.Filter // by worker, then window slot
	sketch  *sketch.HLL        // an empty one: every sketch of a run is a clone
	wstats  []workerStats
	windows atomic.Uint64
	started atomic.Bool
	run     atomic.Pointer[topology] // set by Run, for Stats

	finished  atomic.Bool // Run has returned: the filters are idle
	finalFill sync.Once   // computes the fill ratios once after Run

	ringed bool // tests: every worker on a goroutine of its own, even where it could run inline
	// inlineRing is the capacity of the rings of inline workers: 0 keeps
	// Config.RingBatches (given by the caller), else
	// DefaultInlineRingBatches (Config.RingBatches was left to its default).
	inlineRing int
}

// New checks cfg, fills in its defaults and builds the shards' filters.
func New(cfg Config, sink Sink) (*Pipeline, error) {
	if sink == nil {
		return nil, fmt.Errorf("%w: nil Sink", ErrConfig)
	}
	if cfg.Workers == 0 {
		cfg.Workers = runtime.NumCPU()
	}
	inlineRing := 0
	if cfg.RingBatches == 0 {
		inlineRing = DefaultInlineRingBatches
		cfg.RingBatches = DefaultRingBatches
		if !cfg.Live {
			cfg.RingBatches = DefaultReplayRingBatches
		}
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	switch {
	case cfg.Workers < 0:
		return nil, fmt.Errorf("%w: Workers %d", ErrConfig, cfg.Workers)
	case cfg.Parsers < 0 || cfg.Parsers > 1024:
		return nil, fmt.Errorf("%w: Parsers %d not in [0, 1024]", ErrConfig, cfg.Parsers)
	case !cfg.Key.IsValid():
		return nil, fmt.Errorf("%w: key kind %v", ErrConfig, cfg.Key)
	case cfg.Window < 0:
		return nil, fmt.Errorf("%w: negative Window %v", ErrConfig, cfg.Window)
	case cfg.Lateness < 0:
		return nil, fmt.Errorf("%w: negative Lateness %v", ErrConfig, cfg.Lateness)
	case newWindowing(&cfg).open() > MaxOpenWindows:
		return nil, fmt.Errorf("%w: Lateness %v is more than %d windows of %v", ErrConfig, cfg.Lateness, MaxOpenWindows-1, cfg.Window)
	case cfg.RingBatches < 2 || cfg.RingBatches > 1<<20:
		return nil, fmt.Errorf("%w: RingBatches %d not in [2, 2^20]", ErrConfig, cfg.RingBatches)
	case cfg.BatchSize < 1 || cfg.BatchSize > 1<<16:
		return nil, fmt.Errorf("%w: BatchSize %d not in [1, 65536]", ErrConfig, cfg.BatchSize)
	case cfg.Filter == "":
		return nil, fmt.Errorf("%w: no filter spec", ErrConfig)
	}
	if cfg.SketchSeed == 0 {
		cfg.SketchSeed = sketch.DefaultSeed
	}
	if cfg.SketchPrecision == 0 {
		cfg.SketchPrecision = sketch.DefaultPrecision
	}
	proto, err := sketch.New(cfg.SketchPrecision, cfg.SketchSeed)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.Window == 0 {
		cfg.Lateness = 0
	}
	open := newWindowing(&cfg).open()
	p := &Pipeline{cfg: cfg, sink: sink, inlineRing: inlineRing, filters: make([][]filters.Filter, cfg.Workers), wstats: make([]workerStats, cfg.Workers), sketch: proto}
	for i := range p.filters {
		// Every window slot of a shard has the same seed: a window's
		// filter behaves the same whichever slot it is in.
		p.filters[i] = make([]filters.Filter, open)
		for j := range p.filters[i] {
			f, err := filters.New(cfg.Filter, cfg.FilterSeed+uint64(i))
			if err != nil {
				return nil, fmt.Errorf("pipeline: shard %d: %w", i, err)
			}
			// A new filter's memory was never written: the kernel maps
			// it to its shared zero page at the first read, so the first
			// Observe of each page (which reads a bucket, then writes
			// it) took a second fault, a copy of the page and a TLB
			// flush on every CPU of the process, 4-6% of the CPU time of
			// a replay. Reset, which makes a filter as new (the Filter
			// contract), writes all of it once, here.
			f.Reset()
			p.filters[i][j] = f
		}
		fill := -1.0
		if _, ok := p.filters[i][0].(fillRatioer); ok {
			fill = 0 // a new filter is empty: no need to scan it
		}
		p.wstats[i].fill.Store(math.Float64bits(fill))
	}
	return p, nil
}

// Config returns the configuration with its defaults filled in.
func (p *Pipeline) Config() Config { return p.cfg }

// Run reads every source to its end, one producer goroutine each, and
// reports to the Sink: the records of each window, then its summary; the
// last window (Final) on return; then Sink.Close. It returns when all of
// that is done.
//
// Cancelling ctx stops the producers from reading further frames; every
// frame already read is still keyed, filtered and reported, and the final
// window is closed, so cancellation is how a caller handles SIGINT. A
// producer notices cancellation between two frames: a live source must
// return from Next at its poll interval (capture.ErrTimeout).
//
// Run returns the first error of the Sink (the pipeline then stops as on
// cancellation; Close is still called), or else of a source (that source
// ends, the others go on; a capture.ErrCorrupt is not an error but a
// malformed frame, reason "corrupt_file"), or else of pinning, or nil.
// Run does not close the sources: the caller owns them.
func (p *Pipeline) Run(ctx context.Context, sources ...capture.Source) error {
	if len(sources) == 0 {
		return fmt.Errorf("%w: Run with no source", ErrConfig)
	}
	if !p.started.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	cfg := &p.cfg
	stop := new(atomic.Bool)
	defer context.AfterFunc(ctx, func() { stop.Store(true) })()
	if ctx.Err() != nil {
		stop.Store(true) // AfterFunc would set it, but asynchronously
	}
	lo, hi := startWindows(cfg, time.Now())
	top := newTopology(p, sources, lo, hi, stop)
	p.run.Store(top)
	pin := newPinner(cfg.Pin)

	var wg sync.WaitGroup
	var sinkErr error
	srcErr := make([]error, len(sources))
	wg.Go(func() { sinkErr = top.collator.run() })
	for w, wk := range top.workers {
		if top.inline {
			break
		}
		wg.Go(func() {
			pin.pin(w)
			wk.run()
		})
	}
	for i, pr := range top.producers {
		wg.Go(func() {
			pin.pin(len(top.workers) + i)
			for _, w := range pr.inline {
				w.startInline()
			}
			srcErr[i] = pr.run()
			for _, w := range pr.inline {
				w.endInline()
			}
		})
	}
	for i, q := range top.parsers {
		wg.Go(func() {
			pin.pin(len(top.workers) + len(top.producers) + i)
			q.run()
		})
	}
	wg.Wait()
	p.finished.Store(true)

	if sinkErr != nil {
		return sinkErr
	}
	for _, err := range srcErr {
		if err != nil {
			return err
		}
	}
	return pin.err()
}

// Stats returns the counters since Run started. Safe from any goroutine.
//
// Producer counters are published every thousand packets and at window
// boundaries, worker counters once per batch, so a snapshot lags the
// packets by that much while running and is exact after Run returns. The
// fill ratio of a filter scans the whole filter, so its worker computes it
// only when asked: each Stats call during Run asks, and gets the value
// computed after the previous call (0 for the first). After Run, the
// ratios of the filters as the run left them are computed once, by the
// first Stats call.
func (p *Pipeline) Stats() Stats {
	if p.finished.Load() {
		p.finalFill.Do(func() {
			if top := p.run.Load(); top != nil {
				for _, w := range top.workers {
					w.storeFill()
				}
			}
		})
	}
	s := Stats{Workers: make([]WorkerStats, len(p.wstats)), Windows: p.windows.Load()}
	var malformed, skipped [maxReasons]uint64
	var dropped [numDrops]uint64
	var late [numLate]uint64
	rs := p.run.Load()
	if rs != nil {
		all := make([]*producerStats, 0, len(rs.producers)+len(rs.parsers))
		for _, pr := range rs.producers {
			all = append(all, pr.stats)
		}
		for _, q := range rs.parsers {
			all = append(all, q.stats) // malformed and skipped only
		}
		for _, st := range all {
			s.Packets += st.packets.Load()
			s.Prefiltered += st.prefilter.Load()
			for i := range malformed {
				malformed[i] += st.malformed[i].Load()
				skipped[i] += st.skipped[i].Load()
			}
			for i := range dropped {
				dropped[i] += st.dropped[i].Load()
			}
			for i := range late {
				late[i] += st.late[i].Load()
			}
		}
	}
	s.MalformedBy, s.Malformed = byLabel(malformed[:len(reasonLabels)], reasonLabels)
	s.SkippedBy, s.Skipped = byLabel(skipped[:len(reasonLabels)], reasonLabels)
	s.DroppedBy, s.Dropped = byLabel(dropped[:], dropLabels[:])
	s.LateBy, s.Late = byLabel(late[:], lateLabels[:])
	s.Keys = s.Prefiltered
	for w := range s.Workers {
		st := &p.wstats[w]
		ws := WorkerStats{
			Keys:      st.keys.Load(),
			Distinct:  st.distinct.Load(),
			FillRatio: math.Float64frombits(st.fill.Load()),
		}
		st.fillWanted.Store(true)
		if rs != nil {
			for _, r := range rs.rings[w] {
				ws.RingLen += r.len()
				ws.RingCap += r.cap()
			}
		}
		s.Keys += ws.Keys
		s.Distinct += ws.Distinct
		s.Workers[w] = ws
	}
	return s
}

package pipeline

import (
	"sync/atomic"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/record"
)

// topology is the wiring of one Run: a ring from every producer to every
// worker, a parker per goroutine, the producers, the workers with their
// pools of output batches, and the collator that feeds the Sink.
//
//	rings[w][i] connects producer i to worker w.
//
// Everything a goroutine touches per packet or per batch is allocated here,
// before any goroutine starts.
type topology struct {
	rings     [][]*ring // by worker: every ring into it, for Stats
	producers []*producer
	parsers   []*parser // of every producer with a fanout
	workers   []*worker
	collator  *collator
	inline    bool // the workers run on the one producer's goroutine (producer.inline)
}

// newTopology wires p's workers to one producer per source. lo..hi are the
// windows every producer begins with open (startWindows); stop is the flag
// that tells producers to stop reading. With Config.Parsers, a source that
// frames in bulk (capture.BatchSource), replayed, gets that many parse
// goroutines, each with a ring to every worker.
func newTopology(p *Pipeline, sources []capture.Source, lo, hi int64, stop *atomic.Bool) *topology {
	cfg := &p.cfg
	nw, np := cfg.Workers, len(sources)
	t := &topology{
		rings:     make([][]*ring, nw),
		producers: make([]*producer, np),
		workers:   make([]*worker, nw),
	}
	in := make([][][]*ring, nw) // by worker, producer, then parse goroutine
	for w := range in {
		in[w] = make([][]*ring, np)
	}
	workerPark := make([]*parker, nw)
	for w := range workerPark {
		workerPark[w] = newParker()
	}
	prodPark := make([][]*parker, np)
	fans := make([]bool, np)
	for i, src := range sources {
		_, ok := src.(capture.BatchSource)
		fans[i] = ok && cfg.Parsers > 0 && !cfg.Live
	}
	// Replay of one source keyed by its producer: the workers run on the
	// producer's goroutine, each taking a batch as soon as it is written,
	// while it is still in this core's cache; nothing waits on another
	// goroutine or crosses cores but the records.
	inline := np == 1 && !fans[0] && !cfg.Live && !p.ringed
	ringBatches := cfg.RingBatches
	if inline && p.inlineRing > 0 {
		ringBatches = p.inlineRing
	}
	for i, src := range sources {
		bs, _ := src.(capture.BatchSource)
		fan := fans[i]
		nr := 1
		if fan {
			nr = cfg.Parsers
		}
		out := make([][]*ring, nr) // by writer, then worker
		for k := range out {
			out[k] = make([]*ring, nw)
			for w := range out[k] {
				r := newRing(ringBatches, cfg.BatchSize)
				out[k][w] = r
				in[w][i] = append(in[w][i], r)
				t.rings[w] = append(t.rings[w], r)
			}
		}
		pr := newProducer(i, src, cfg, lo, hi, stop, out[0], workerPark)
		t.producers[i] = pr
		if !fan {
			prodPark[i] = []*parker{pr.park}
			continue
		}
		pr.fan = newFanout(bs, nr)
		pr.rings = nil // the parse goroutines write the rings
		for k := range nr {
			q := newParser(k, cfg, pr.fan, out[k], workerPark)
			t.parsers = append(t.parsers, q)
			prodPark[i] = append(prodPark[i], q.park)
		}
	}

	out := make(chan *outBatch, nw*outPool)
	free := make([]chan *outBatch, nw)
	for w := range t.workers {
		free[w] = make(chan *outBatch, outPool)
		for range outPool {
			free[w] <- &outBatch{worker: w, recs: make([]record.Record, 0, outBatchSize), sketch: p.sketch.Clone()}
		}
		t.workers[w] = newWorker(w, p.filters[w], p.sketch, cfg, lo, in[w], prodPark, workerPark[w], out, free[w], &p.wstats[w])
	}
	if inline {
		t.producers[0].inline = t.workers
		t.inline = true
	}
	t.collator = newCollator(p.sink, windowing{d: int64(cfg.Window)}, out, free, stop, &p.windows, p.sketch, cfg.KeepSketch)
	return t
}

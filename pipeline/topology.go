package pipeline

import (
	"sync/atomic"

	"github.com/flowdedup/flowdedup/capture"
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
	rings     [][]*ring // by worker, then producer
	producers []*producer
	workers   []*worker
	collator  *collator
}

// newTopology wires p's workers to one producer per source. lo..hi are the
// windows every producer begins with open (startWindows); stop is the flag
// that tells producers to stop reading.
func newTopology(p *Pipeline, sources []capture.Source, lo, hi int64, stop *atomic.Bool) *topology {
	cfg := &p.cfg
	nw, np := cfg.Workers, len(sources)
	t := &topology{
		rings:     make([][]*ring, nw),
		producers: make([]*producer, np),
		workers:   make([]*worker, nw),
	}
	for w := range t.rings {
		t.rings[w] = make([]*ring, np)
		for i := range t.rings[w] {
			t.rings[w][i] = newRing(cfg.RingBatches, cfg.BatchSize)
		}
	}

	workerPark := make([]*parker, nw)
	for w := range workerPark {
		workerPark[w] = newParker()
	}
	prodPark := make([]*parker, np)
	for i, src := range sources {
		out := make([]*ring, nw) // this producer's end of each worker's ring
		for w := range out {
			out[w] = t.rings[w][i]
		}
		t.producers[i] = newProducer(i, src, cfg, lo, hi, stop, out, workerPark)
		prodPark[i] = t.producers[i].park
	}

	out := make(chan *outBatch, nw*outPool)
	free := make([]chan *outBatch, nw)
	for w := range t.workers {
		free[w] = make(chan *outBatch, outPool)
		for range outPool {
			free[w] <- &outBatch{worker: w, recs: make([]Record, 0, outBatchSize), sketch: p.sketch.Clone()}
		}
		t.workers[w] = newWorker(w, p.filters[w], p.sketch, cfg, lo, t.rings[w], prodPark, workerPark[w], out, free[w], &p.wstats[w])
	}
	t.collator = newCollator(p.sink, windowing{d: int64(cfg.Window)}, out, free, stop, &p.windows, p.sketch, cfg.KeepSketch)
	return t
}

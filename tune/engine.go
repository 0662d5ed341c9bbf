package tune

import (
	"context"
	"sync"
	"time"

	"github.com/flowdedup/flowdedup/filters"
)

// tally is one filter spec's counts over one dataset (one seed).
type tally struct {
	spec       string // the canonical spec of the filter built (String())
	memBits    int    // SizeBits of the largest shard's filter
	elements   int
	distinct   int
	duplicates int
	fp, fn     int
	ns         int64 // time spent in Observe
}

func (t tally) fpr() float64 { return ratio(t.fp, t.distinct) }
func (t tally) fnr() float64 { return ratio(t.fn, t.duplicates) }

// errorRate is the wrong answers per key.
func (t tally) errorRate() float64 { return ratio(t.fp+t.fn, t.elements) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// status is where one evaluation of one candidate stands.
type status uint8

const (
	pending status = iota // not run (the budget ran out first)
	done
	invalid // filters.New rejects the spec at this memory
	tooSlow // slower than Config.MaxSlowdown allows: aborted
)

// dataset is every sample under one seed, dealt to the shards.
type dataset struct {
	seed    uint64
	samples [][]shardStream // by sample, then shard
}

// chunk is how many keys are observed between two looks at the clock;
// once a chunk was over the speed limit, the chunks that confirm it are
// shorter (confirmChunk), so that a filter 500 times slower than the
// others is dropped after about chunk+3*confirmChunk keys.
const (
	chunk        = 1 << 10
	confirmChunk = 1 << 7
)

// Speed limit. A filter slower than slowFloorNs per key is timed against
// replay's default filter on the same keys, on the same goroutine, right
// after it, so that the ratio does not depend on how loaded the machine
// is. The reference costs at most a tenth of the time of the filter it
// checks. A filter is dropped after slowChunks chunks in a row over the
// limit: on a loaded machine a chunk whose goroutine was descheduled for a
// time slice looks slow once, a saturated cuckoo filter every time.
const (
	slowFloorNs = 100
	slowChunks  = 4
)

// limit is the speed limit of one evaluation.
type limit struct {
	ref string  // the reference filter's spec (replay's default at the same memory)
	max float64 // the slowdown against ref beyond which a filter is dropped; <= 0: none
}

// speed times filters against the reference for one evaluation.
type speed struct {
	limit
	refF filters.Filter // built on first use, never cleared: it only gives a time
	slow int            // chunks in a row over the limit
}

// tooSlow reports whether f, which took ns for hashes, is over the limit,
// as it has been for slowChunks chunks in a row.
func (sp *speed) tooSlow(ns int64, hashes []uint64) bool {
	if sp.max <= 0 || ns <= slowFloorNs*int64(len(hashes)) {
		sp.slow = 0
		return false
	}
	if sp.refF == nil {
		f, err := filters.New(sp.ref, 1)
		if err != nil {
			return false // no reference at this size: no limit
		}
		sp.refF = f
	}
	start := time.Now()
	for _, h := range hashes {
		sp.refF.Observe(h)
	}
	ref := max(time.Since(start).Nanoseconds(), 1)
	if float64(ns) <= sp.max*float64(ref) {
		sp.slow = 0
		return false
	}
	sp.slow++
	return sp.slow >= slowChunks
}

// evaluate runs spec over d as replay would: shard i's filter is
// filters.New(spec, seed+i) (replay's FilterSeed+i with FilterSeed =
// --seed), cleared at every window boundary and between samples. It gives
// up with tooSlow when the filter is slower than the limit allows.
func evaluate(spec string, d *dataset, lim limit) (tally, status) {
	var t tally
	sp := &speed{limit: lim}
	workers := len(d.samples[0])
	for i := range workers {
		f, err := filters.New(spec, d.seed+uint64(i))
		if err != nil {
			return tally{}, invalid
		}
		if i == 0 {
			t.spec = f.String()
		}
		for j, sm := range d.samples {
			if j > 0 {
				f.Reset()
			}
			if !observeShard(f, &sm[i], &t, sp) {
				return tally{}, tooSlow
			}
		}
		t.memBits = max(t.memBits, f.SizeBits())
	}
	return t, done
}

// observeShard feeds one shard's stream to f and adds the outcome to t. It
// reports false when f is over the speed limit.
func observeShard(f filters.Filter, s *shardStream, t *tally, sp *speed) bool {
	lo, n := 0, len(s.hashes)
	for w := 0; w <= len(s.starts); w++ {
		hi := n
		if w < len(s.starts) {
			hi = int(s.starts[w])
		}
		if w > 0 {
			f.Reset()
		}
		for lo < hi {
			size := chunk
			if sp.slow > 0 {
				size = confirmChunk
			}
			end := min(hi, lo+size)
			start := time.Now()
			fp, fn := observeRun(f, s.hashes[lo:end], s.dup[lo:end])
			el := time.Since(start).Nanoseconds()
			t.ns += el
			t.fp += fp
			t.fn += fn
			if sp.tooSlow(el, s.hashes[lo:end]) {
				return false
			}
			lo = end
		}
	}
	t.elements += n
	for _, d := range s.dup {
		if d {
			t.duplicates++
		}
	}
	t.distinct = t.elements - t.duplicates
	return true
}

// observeRun is the timed loop: Observe and the tally, nothing else.
func observeRun(f filters.Filter, hashes []uint64, dup []bool) (fp, fn int) {
	dup = dup[:len(hashes)]
	for i, h := range hashes {
		said := f.Observe(h)
		if dup[i] {
			if !said {
				fn++
			}
		} else if said {
			fp++
		}
	}
	return fp, fn
}

// job is one evaluation: a candidate's spec on one dataset; the outcome
// goes to *out and *st, which belong to this job alone.
type job struct {
	spec string
	lim  limit
	data *dataset
	out  *tally
	st   *status
}

// runJobs runs jobs on par goroutines, in order of dispatch, and stops
// dispatching at stopAt (jobs not dispatched stay pending) or when ctx is
// done, in which case it returns ctx's error once the running jobs end.
func runJobs(ctx context.Context, jobs []job, par int, stopAt time.Time) error {
	ch := make(chan job)
	var wg sync.WaitGroup
	for range min(par, len(jobs)) {
		wg.Go(func() {
			for j := range ch {
				*j.out, *j.st = evaluate(j.spec, j.data, j.lim)
			}
		})
	}
	for _, j := range jobs {
		if ctx.Err() != nil || (!stopAt.IsZero() && time.Now().After(stopAt)) {
			break
		}
		ch <- j
	}
	close(ch)
	wg.Wait()
	return ctx.Err()
}

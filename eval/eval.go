package eval

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowdedup/flowdedup/filters"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/mix"
)

// Config is one evaluation: every filter observes the same stream.
type Config struct {
	Filters []string // filter specs, as filters.New takes them
	Mems    []string // memory sizes to sweep each filter over (see Sweep); none: as given
	Stream  string   // stream spec, as ParseStream takes it
	// Decap keys a pcap: stream's frames by their innermost IP header
	// through these tunnels (replay's --decap), unless its spec has
	// decap=; the zero Decap keys the outermost header. A stream of
	// another kind with tunnels here is an error (ErrStreamSpec).
	Decap  flow.Decap
	Runs   int    // independent runs averaged (different seeds); >= 1
	Warmup int    // leading elements observed but not counted
	Seed   uint64 // base seed; run r uses a seed derived from Seed and r
}

// Result is one filter's figures on one stream, averaged over runs.
// Field names are the contract of `flowdedup eval --format json`.
type Result struct {
	Filter         string  `json:"filter"`
	Stream         string  `json:"stream"`
	MemoryBits     int     `json:"memory_bits"`
	Runs           int     `json:"runs"`
	Seed           uint64  `json:"seed"`
	Elements       float64 `json:"elements"`
	Distinct       float64 `json:"distinct"`
	Duplicates     float64 `json:"duplicates"`
	FalsePositives float64 `json:"false_positives"`
	FalseNegatives float64 `json:"false_negatives"`
	FPR            float64 `json:"fpr"`
	FNR            float64 `json:"fnr"`
	NsPerOp        float64 `json:"ns_per_op"`
}

// counts is one filter's tally over one run.
type counts struct {
	elements, distinct, duplicates, fp, fn int
	elapsed                                time.Duration
}

// RunSeed is the seed of run r: runs are independent but reproducible from
// the base seed. Run 0 uses the base seed itself, so a single-run eval sees
// exactly the hashes and filter seed that `flowdedup replay --seed` uses.
func RunSeed(base uint64, r int) uint64 {
	if r == 0 {
		return base
	}
	return mix.Mix64(base + uint64(r)*mix.Golden)
}

// Run evaluates every filter of cfg on its stream, each once per size of
// cfg.Mems when given; every filter and size of a run sees the same
// materialised stream. It checks every spec before materialising anything,
// so a typo fails at once.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if len(cfg.Filters) == 0 {
		return nil, errors.New("eval: no filter given")
	}
	specs, err := Sweep(cfg.Filters, cfg.Mems)
	if err != nil {
		return nil, err
	}
	cfg.Filters = specs
	if cfg.Runs < 1 {
		return nil, fmt.Errorf("eval: runs must be at least 1, not %d", cfg.Runs)
	}
	if cfg.Warmup < 0 {
		return nil, fmt.Errorf("eval: warmup must not be negative")
	}
	stream, err := ParseStream(cfg.Stream)
	if err != nil {
		return nil, err
	}
	if stream, err = WithDecap(stream, cfg.Decap); err != nil {
		return nil, err
	}
	results := make([]Result, len(cfg.Filters))
	for i, spec := range cfg.Filters {
		f, err := filters.New(spec, 0)
		if err != nil {
			return nil, err
		}
		results[i] = Result{Filter: f.String(), Stream: stream.String(), MemoryBits: f.SizeBits(), Runs: cfg.Runs, Seed: cfg.Seed}
	}
	total := make([]counts, len(cfg.Filters))
	for r := range cfg.Runs {
		seed := RunSeed(cfg.Seed, r)
		elems, err := stream.Materialize(seed)
		if err != nil {
			return nil, err
		}
		if cfg.Warmup >= len(elems.Hashes) {
			return nil, fmt.Errorf("eval: warmup %d leaves nothing of a %d-element stream to count", cfg.Warmup, len(elems.Hashes))
		}
		for i, spec := range cfg.Filters {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			f, err := filters.New(spec, seed)
			if err != nil {
				return nil, err
			}
			c := observeAll(f, elems, cfg.Warmup)
			if f.SizeBits() > results[i].MemoryBits {
				results[i].MemoryBits = f.SizeBits() // exact grows with what it holds
			}
			t := &total[i]
			t.elements += c.elements
			t.distinct += c.distinct
			t.duplicates += c.duplicates
			t.fp += c.fp
			t.fn += c.fn
			t.elapsed += c.elapsed
			results[i].FPR += ratio(c.fp, c.distinct) / float64(cfg.Runs)
			results[i].FNR += ratio(c.fn, c.duplicates) / float64(cfg.Runs)
		}
	}
	for i := range results {
		t, n := total[i], float64(cfg.Runs)
		res := &results[i]
		res.Elements = float64(t.elements) / n
		res.Distinct = float64(t.distinct) / n
		res.Duplicates = float64(t.duplicates) / n
		res.FalsePositives = float64(t.fp) / n
		res.FalseNegatives = float64(t.fn) / n
		observed := t.elements + cfg.Warmup*cfg.Runs
		res.NsPerOp = float64(t.elapsed.Nanoseconds()) / float64(observed)
	}
	return results, nil
}

// observeAll feeds every element to f and counts errors past the warmup.
// The timed loop does nothing but Observe and the tally.
func observeAll(f filters.Filter, e *Elements, warmup int) counts {
	var c counts
	start := time.Now()
	for _, h := range e.Hashes[:warmup] {
		f.Observe(h)
	}
	hashes, dup := e.Hashes[warmup:], e.Dup[warmup:len(e.Hashes)]
	for i, h := range hashes {
		said := f.Observe(h)
		if dup[i] {
			c.duplicates++
			if !said {
				c.fn++
			}
		} else {
			c.distinct++
			if said {
				c.fp++
			}
		}
	}
	c.elapsed = time.Since(start)
	c.elements = len(hashes)
	return c
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

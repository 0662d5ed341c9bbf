package tune

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/flowdedup/flowdedup/eval"
	"github.com/flowdedup/flowdedup/filters"
	"github.com/flowdedup/flowdedup/flow"
)

// Defaults for the zero values of Config.
const (
	DefaultSeeds          = 3
	DefaultBudget         = 60 * time.Second
	DefaultKeep           = 3
	DefaultCoarseElements = 1 << 18
	// DefaultMaxSlowdown drops a filter whose Observe is more than 50
	// times slower than replay's default filter on the same keys: a
	// saturated cuckoo filter kicks 500 times per new key (1-3 µs, 100
	// to 500 times a QHT), too slow for packet rates, and it would eat the
	// budget. The slowest useful filters stay under it (b_DBF with a long
	// window at 1 MiB: about 22 times).
	DefaultMaxSlowdown = 50
)

// minCoarseMemBits bounds the thinning of the coarse phase: a shard's
// filter is never shrunk below 8 KiB, where the widest grid rows (16
// buckets of 32 bits) still make 128 rows.
const minCoarseMemBits = 1 << 16

// maxSeeds bounds Config.Seeds: each seed holds 9 bytes per key of the
// sample while Run runs.
const maxSeeds = 100

// coarseShare is the part of the budget the coarse phase may use; the
// refine phase has the rest.
const coarseShare = 0.5

// Errors. Test with errors.Is.
var (
	ErrConfig    = errors.New("tune: bad config")
	ErrObjective = errors.New("bad objective")
	ErrNoSample  = errors.New("no sample given")
	ErrNoKeys    = errors.New("no frame of the sample has a flow key")
	// ErrNoResult: no filter finished within the budget.
	ErrNoResult = errors.New("tune: no filter finished within the budget")
)

// Config is one tuning run. The zero value of every field but Samples and
// Mem has a default.
type Config struct {
	// Samples are capture files (pcap, pcapng, gzip), read in order as one
	// capture as replay reads them, and stream specs, each a sample of its
	// own: uniform:, zipf:, distinct:, file: (eval's grammar; one window)
	// and pcap:PATH[,key=KIND][,prefix=V4LEN[,V6LEN]][,decap=LIST]
	// (windows as replay). Error counts add up over the samples.
	Samples []string
	// Key is the flow key kind of captures (replay's --key); zero: src.
	Key flow.KeyKind
	// Prefix keys the captures' addresses by network (replay's
	// --prefix); the zero Mask keys hosts. A pcap: spec's prefix=
	// overrides it for its sample.
	Prefix flow.Mask
	// Decap keys the captures' frames by their innermost IP header
	// through these tunnels (replay's --decap); the zero Decap keys the
	// outermost header. A pcap: spec's decap= overrides it for its
	// sample; the other stream specs carry no packets and ignore it.
	Decap flow.Decap
	// Window is replay's --window: landmark windows of packet time, each
	// filter cleared at the boundary. 0: one window.
	Window time.Duration
	// Workers is replay's --workers, the shards W the keys are dealt to
	// (flow.ShardOf), each with its own filter of Mem; 0: runtime.NumCPU(),
	// replay's default.
	Workers int
	// Mem is the state of each shard's filter, as mem= takes it ("64KiB",
	// "auto"). Required.
	Mem string
	// Objective ranks the filters; the zero value is min-errors.
	Objective Objective
	// Seeds is how many seeds each refined filter runs with (hash keys
	// and filter randomness, as replay's --seed): 0 means DefaultSeeds.
	// Seed r is eval.RunSeed(Seed, r): the first is Seed itself, so
	// `replay --seed Seed` reproduces the first seed's counts exactly.
	Seeds int
	Seed  uint64
	// Parallelism is how many filters run at once; 0: runtime.NumCPU().
	Parallelism int
	// Budget bounds the run's time (0: DefaultBudget). The coarse phase
	// stops starting work at half of it, the refine phase at all of it;
	// what did not run is left out and counted (Search.Unfinished).
	Budget time.Duration
	// Keep is how many filters of each family the coarse phase passes to
	// the refine phase; 0: DefaultKeep.
	Keep int
	// CoarseElements is the key count the coarse phase thins the sample
	// to (docs/filters.md, "How tune works"); 0: DefaultCoarseElements.
	CoarseElements int
	// Exhaustive skips the pruning: every grid point runs on the whole
	// sample with every seed.
	Exhaustive bool
	// MaxSlowdown drops filters more than this many times slower per key
	// than replay's default filter at the same memory, timed on the same
	// keys right after them (so the ratio holds on a loaded machine); 0:
	// DefaultMaxSlowdown, negative: no limit. Filters under 100 ns per key
	// are never timed against it.
	MaxSlowdown float64

	// minCoarseMem overrides minCoarseMemBits (tests thin small samples).
	minCoarseMem int
}

func (c *Config) fill() error {
	if len(c.Samples) == 0 {
		return fmt.Errorf("%w: %w", ErrConfig, ErrNoSample)
	}
	if c.Key == 0 {
		c.Key = flow.KeySrc
	}
	if c.Workers == 0 {
		c.Workers = runtime.NumCPU()
	}
	if c.Seeds == 0 {
		c.Seeds = DefaultSeeds
	}
	if c.Parallelism == 0 {
		c.Parallelism = runtime.NumCPU()
	}
	if c.Budget == 0 {
		c.Budget = DefaultBudget
	}
	if c.Keep == 0 {
		c.Keep = DefaultKeep
	}
	if c.CoarseElements == 0 {
		c.CoarseElements = DefaultCoarseElements
	}
	if c.MaxSlowdown == 0 {
		c.MaxSlowdown = DefaultMaxSlowdown
	}
	if c.minCoarseMem == 0 {
		c.minCoarseMem = minCoarseMemBits
	}
	switch {
	case !c.Key.IsValid():
		return fmt.Errorf("%w: key kind %v", ErrConfig, c.Key)
	case c.Window < 0:
		return fmt.Errorf("%w: negative window %v", ErrConfig, c.Window)
	case c.Workers < 0 || c.Workers > 1<<16:
		return fmt.Errorf("%w: workers %d not in [1, 65536]", ErrConfig, c.Workers)
	case c.Seeds < 0 || c.Seeds > maxSeeds:
		return fmt.Errorf("%w: seeds %d not in [1, %d]", ErrConfig, c.Seeds, maxSeeds)
	case c.Parallelism < 0:
		return fmt.Errorf("%w: negative parallelism", ErrConfig)
	case c.Budget < 0:
		return fmt.Errorf("%w: negative budget", ErrConfig)
	case c.Keep < 0 || c.CoarseElements < 0:
		return fmt.Errorf("%w: negative keep or coarse elements", ErrConfig)
	case c.Objective.Goal > MinFPR || c.Objective.Bound < 0 || c.Objective.Bound > 1:
		return fmt.Errorf("%w: objective %v", ErrConfig, c.Objective)
	case c.Mem == "":
		return fmt.Errorf("%w: no memory size (Mem, e.g. 64KiB)", ErrConfig)
	}
	if _, err := filters.ParseMem(c.Mem); err != nil {
		return fmt.Errorf("%w: mem %q: %v", ErrConfig, c.Mem, err)
	}
	return nil
}

// Result is what Run found. Rates are over the samples' keys as replay
// counts them: FPR = false positives / distinct (first occurrences of a key
// in its window), FNR = false negatives / duplicates, both summed over the
// shards and samples of one seed, as eval counts them.
type Result struct {
	Samples   []SampleInfo `json:"samples"`
	Key       string       `json:"key"`
	Prefix    string       `json:"prefix,omitempty"` // Config.Prefix, "24,64"; none for hosts
	Decap     string       `json:"decap,omitempty"`  // Config.Decap, "all", "gre,vxlan"; none for the outermost header
	Window    string       `json:"window"`           // "0s": one window
	Workers   int          `json:"workers"`
	Mem       string       `json:"mem"` // per shard
	MemBits   int          `json:"mem_bits"`
	Objective Objective    `json:"objective"`
	Seeds     []uint64     `json:"seeds"`
	// Ranked are the filters refined on the whole sample with every seed,
	// best first; exact is not among them.
	Ranked []Candidate `json:"ranked"`
	// Default is replay's default filter at Mem (also ranked), Exact the
	// ground truth with unbounded memory, for reference; nil if they did
	// not finish.
	Default    *Candidate `json:"replay_default,omitempty"`
	Exact      *Candidate `json:"exact,omitempty"`
	Confidence Confidence `json:"confidence"`
	Search     Search     `json:"search"`
}

// Best returns the pick: the first ranked filter, and whether it meets the
// objective's bound on every seed (always true for min-errors).
func (r *Result) Best() (Candidate, bool) {
	if len(r.Ranked) == 0 {
		return Candidate{}, false
	}
	return r.Ranked[0], r.Ranked[0].Feasible
}

// Candidate is one filter's figures over the seeds.
type Candidate struct {
	// Spec is the canonical spec (filters.Filter.String()): every
	// parameter explicit, ready for --filter, so no default can change it.
	Spec       string  `json:"spec"`
	Family     string  `json:"family"`      // a blocked layout is its own: "sbf:blocked=1"
	MemoryBits int     `json:"memory_bits"` // one shard's filter, as its paper counts it
	FPR        Stat    `json:"fpr"`
	FNR        Stat    `json:"fnr"`
	ErrorRate  Stat    `json:"error_rate"` // (FP + FN) / keys
	NsPerOp    float64 `json:"ns_per_op"`  // Observe time per key, all seeds (other jobs ran on the other cores)
	// Score is the mean over seeds of what the objective minimises;
	// Feasible says whether the bound holds on every seed.
	Score    float64      `json:"score"`
	Feasible bool         `json:"feasible"`
	Seeds    []SeedResult `json:"seeds"`
}

// SeedResult is one seed's counts: `flowdedup replay --seed Seed` with the
// same key, window, workers and filter makes exactly these errors.
type SeedResult struct {
	Seed           uint64  `json:"seed"`
	Elements       int     `json:"elements"`
	Distinct       int     `json:"distinct"`
	Duplicates     int     `json:"duplicates"`
	FalsePositives int     `json:"false_positives"`
	FalseNegatives int     `json:"false_negatives"`
	FPR            float64 `json:"fpr"`
	FNR            float64 `json:"fnr"`
}

// Search says how the grid was searched.
type Search struct {
	Grid       int  `json:"grid"` // grid points
	Exhaustive bool `json:"exhaustive"`
	// The coarse phase: one seed, on the keys whose remixed hash falls in
	// 1/Thinning of the range, with filters of Mem/Thinning (CoarseMem).
	Thinning     int      `json:"thinning"`
	CoarseKeys   int      `json:"coarse_keys"`
	CoarseMem    string   `json:"coarse_mem"`
	Coarse       int      `json:"coarse"`    // grid points run in the coarse phase
	Duplicate    int      `json:"duplicate"` // grid points that build the same filter as an earlier one
	Invalid      int      `json:"invalid"`   // grid points filters.New rejects at this memory
	TooSlow      int      `json:"too_slow"`  // dropped: slower than MaxSlowdown allows
	TooSlowSpecs []string `json:"too_slow_specs,omitempty"`
	Refined      int      `json:"refined"`    // filters run on the whole sample with every seed
	Unfinished   int      `json:"unfinished"` // left out when the budget ran out
	// Where the time went: reading and dealing the samples, the coarse
	// phase, the refine phase (tie-breaking included), and in all.
	LoadSeconds    float64 `json:"load_seconds"`
	CoarseSeconds  float64 `json:"coarse_seconds"`
	RefineSeconds  float64 `json:"refine_seconds"`
	Seconds        float64 `json:"seconds"`
	BudgetExceeded bool    `json:"budget_exceeded"`
}

// Run tunes: it reads the samples once, evaluates every grid point (Grid)
// as replay would run it on them, and ranks the filters by the objective.
// docs/filters.md ("How tune works") describes the method.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	start := time.Now()
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	memBits, _ := filters.ParseMem(cfg.Mem)
	seeds := make([]uint64, cfg.Seeds)
	for r := range seeds {
		seeds[r] = eval.RunSeed(cfg.Seed, r)
	}
	samples, err := openSamples(ctx, cfg.Samples, flow.KeySpec{Kind: cfg.Key, Mask: cfg.Prefix}, &cfg.Decap, cfg.Window, seeds[0])
	if err != nil {
		return nil, err
	}
	decap := ""
	if cfg.Decap.Tunnels != 0 {
		decap = cfg.Decap.String()
	}
	res := &Result{
		Key: cfg.Key.String(), Prefix: cfg.Prefix.String(), Decap: decap, Window: cfg.Window.String(), Workers: cfg.Workers,
		Mem: filters.FormatMem(memBits), MemBits: memBits, Objective: cfg.Objective, Seeds: seeds,
	}
	total := 0
	for _, s := range samples {
		res.Samples = append(res.Samples, s.describe())
		total += s.describe().Elements
	}
	var thin uint
	if !cfg.Exhaustive {
		thin = thinBits(total, memBits, cfg.CoarseElements, cfg.minCoarseMem)
	}
	data, coarseData, err := materialize(ctx, samples, seeds, cfg.Workers, thin)
	if err != nil {
		return nil, err
	}

	res.Search.LoadSeconds = time.Since(start).Seconds()
	sr := &search{cfg: &cfg, memBits: memBits, thin: thin, data: data, coarseData: coarseData,
		s: &res.Search, start: start, deadline: start.Add(cfg.Budget)}
	cands := newCandidates(memBits, cfg.Objective, len(seeds))
	sr.s.Grid, sr.s.Exhaustive, sr.s.Thinning = len(cands), cfg.Exhaustive, 1<<thin
	refine := cands
	if !cfg.Exhaustive {
		if refine, err = sr.coarse(ctx, cands); err != nil {
			return nil, err
		}
	}
	sr.s.CoarseSeconds = time.Since(start).Seconds() - sr.s.LoadSeconds
	exact := &candidate{family: "exact", spec: "exact", seeds: make([]tally, len(seeds)), seedSt: make([]status, len(seeds))}
	// The references first: replay's default, then exact.
	refine = slices.Insert(refine, min(len(refine), countDefaults(refine)), exact)
	if err := sr.refine(ctx, refine); err != nil {
		return nil, err
	}

	var ranked []*candidate
	for _, c := range finish(refine, cfg.Objective, sr.s) {
		if c == exact {
			e := c.export(seeds)
			res.Exact = &e
			continue
		}
		ranked = append(ranked, c)
	}
	tieBreak, err := breakTies(ctx, ranked, data[0], memBits, &cfg, sr.deadline)
	if err != nil {
		return nil, err
	}
	for _, c := range ranked {
		cd := c.export(seeds)
		if c.isDefault {
			d := cd
			res.Default = &d
		}
		res.Ranked = append(res.Ranked, cd)
	}
	sr.s.Refined = len(res.Ranked)
	sr.s.Seconds = time.Since(start).Seconds()
	sr.s.RefineSeconds = sr.s.Seconds - sr.s.LoadSeconds - sr.s.CoarseSeconds
	if len(ranked) == 0 {
		return res, ErrNoResult
	}
	var second *candidate
	if len(ranked) > 1 {
		second = ranked[1]
	}
	res.Confidence = confidence(cfg.Objective, ranked[0], second)
	res.Confidence.TieBreak = tieBreak
	return res, nil
}

// search is one Run's phases and what they share.
type search struct {
	cfg             *Config
	memBits         int
	thin            uint
	data            []*dataset // by seed
	coarseData      *dataset
	s               *Search
	start, deadline time.Time
}

// coarse runs every candidate once on the thinned sample with the first
// seed, until half the budget, and returns the ones to refine (prune).
// Candidates that build the same filter as an earlier one are dropped.
// Without thinning the coarse run is the first seed's refined run too.
func (sr *search) coarse(ctx context.Context, cands []*candidate) ([]*candidate, error) {
	cfg, s := sr.cfg, sr.s
	s.CoarseMem = filters.FormatMem(sr.memBits >> sr.thin)
	jobs := make([]job, len(cands))
	for i, c := range cands {
		jobs[i] = job{spec: c.point.spec(sr.memBits, sr.thin), lim: limitAt(sr.memBits>>sr.thin, cfg), data: sr.coarseData, out: &c.coarse, st: &c.coarseSt}
	}
	stop := sr.start.Add(time.Duration(float64(cfg.Budget) * coarseShare))
	if err := runJobs(ctx, jobs, cfg.Parallelism, stop); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var unique []*candidate
	events := 0 // what a bounded objective's bound is counted over
	for _, c := range cands {
		switch c.coarseSt {
		case done:
			s.Coarse++
			if seen[c.coarse.spec] {
				s.Duplicate++
				continue
			}
			seen[c.coarse.spec] = true
			s.CoarseKeys = c.coarse.elements
			events = c.coarse.distinct
			if cfg.Objective.Goal == MinFPR {
				events = c.coarse.duplicates
			}
		default:
			s.left(c, c.coarseSt)
		}
		if sr.thin == 0 {
			c.seeds[0], c.seedSt[0] = c.coarse, c.coarseSt
		}
		unique = append(unique, c)
	}
	return prune(unique, cfg.Keep, cfg.Objective, coarseSlack(cfg.Objective, events)), nil
}

// refine runs the candidates, in order, on the whole sample with every
// seed they have not run with yet, until the deadline.
func (sr *search) refine(ctx context.Context, cands []*candidate) error {
	var jobs []job
	for _, c := range cands {
		for r, d := range sr.data {
			if c.seedSt[r] == done {
				continue
			}
			jobs = append(jobs, job{spec: c.spec, lim: limitAt(sr.memBits, sr.cfg), data: d, out: &c.seeds[r], st: &c.seedSt[r]})
		}
	}
	return runJobs(ctx, jobs, sr.cfg.Parallelism, sr.deadline)
}

// Tie-breaking runs the tied filters again at 1/2^tieShift, 1/2^(2
// tieShift), ... of the memory, down to minTieMemBits.
const (
	tieShift      = 3
	minTieMemBits = 1 << 12
)

// breakTies reorders the head of ranked when several filters made exactly
// the same errors on every seed, which is what happens when the memory is
// ample for the sample (they all make none): it runs the tied filters
// again on the first seed with 1/8 of the memory, then 1/64, and so on
// while some stay tied, and puts first those that do best there, under
// the same objective. The pick is then the filter with the most headroom:
// the one that would still do best if the traffic grew. It returns what
// it did, for the report.
func breakTies(ctx context.Context, ranked []*candidate, d *dataset, memBits int, cfg *Config, deadline time.Time) (string, error) {
	n := leadingTies(ranked)
	if n < 2 {
		return "", nil
	}
	note := fmt.Sprintf("%d filters made the same errors on every seed", n)
	type stressed struct {
		c  *candidate
		t  tally
		st status
		sc score
	}
	for shift := uint(tieShift); n > 1 && memBits>>shift >= minTieMemBits; shift += tieShift {
		ss := make([]stressed, n)
		jobs := make([]job, n)
		for i, c := range ranked[:n] {
			ss[i].c = c
			jobs[i] = job{spec: c.point.spec(memBits>>shift, 0), lim: limitAt(memBits>>shift, cfg), data: d, out: &ss[i].t, st: &ss[i].st}
		}
		if err := runJobs(ctx, jobs, cfg.Parallelism, deadline); err != nil {
			return "", err
		}
		if ss[0].st == pending {
			return note + "; the budget ran out before the tie was broken", nil
		}
		for i := range ss {
			if ss[i].st == done {
				ss[i].sc = cfg.Objective.scoreOf([]tally{ss[i].t}, 0)
			}
		}
		slices.SortStableFunc(ss, func(a, b stressed) int {
			if (a.st == done) != (b.st == done) {
				if a.st == done {
					return -1
				}
				return 1
			}
			return better(a.sc, b.sc, 0, 0, "", "")
		})
		for i := range ss {
			ranked[i] = ss[i].c
		}
		first := ss[0]
		at := fmt.Sprintf("with %s per shard (1/%d)", filters.FormatMem(memBits>>shift), 1<<shift)
		if first.st != done {
			note += fmt.Sprintf("; %s none of them could run", at)
			break
		}
		next := 1
		for next < n && ss[next].st == done && slices.Equal(ss[next].sc.perSeed, first.sc.perSeed) && ss[next].sc.secondary == first.sc.secondary {
			next++
		}
		if next > 1 {
			note += fmt.Sprintf("; %s, %d of them still tied (FPR %.4f%%, FNR %.4f%%)", at, next, 100*first.t.fpr(), 100*first.t.fnr())
		} else {
			note += fmt.Sprintf("; %s, %s did best (FPR %.4f%%, FNR %.4f%%", at, first.c.canon, 100*first.t.fpr(), 100*first.t.fnr())
			if ss[1].st == done {
				note += fmt.Sprintf("; next %s, FPR %.4f%%, FNR %.4f%%", ss[1].c.canon, 100*ss[1].t.fpr(), 100*ss[1].t.fnr())
			}
			note += ")"
		}
		n = next
	}
	if n > 1 {
		note += fmt.Sprintf("; %d still tied, ordered by speed", n)
	}
	return note, nil
}

// limitAt is the speed limit of filters of memBits: replay's default
// filter at that memory is the reference.
func limitAt(memBits int, cfg *Config) limit {
	return limit{ref: defaultPoint.spec(memBits, 0), max: cfg.MaxSlowdown}
}

// thinBits chooses the coarse thinning 2^-bits: the fewest halvings that
// bring the sample to at most coarse keys, as long as a shard's filter
// keeps at least minMem bits.
func thinBits(elements, memBits, coarse, minMem int) uint {
	var j uint
	for j < 30 && elements>>j > coarse && memBits>>(j+1) >= minMem {
		j++
	}
	return j
}

// materialize deals every sample to the shards under every seed, and the
// thinned coarse dataset from the first seed (the first seed's full
// dataset when thin is 0).
func materialize(ctx context.Context, samples []sample, seeds []uint64, workers int, thin uint) ([]*dataset, *dataset, error) {
	data := make([]*dataset, len(seeds))
	var coarse *dataset
	for r, seed := range seeds {
		d := &dataset{seed: seed}
		if r == 0 && thin > 0 {
			coarse = &dataset{seed: seed}
		}
		for _, s := range samples {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			e, err := s.materialize(seed)
			if err != nil {
				return nil, nil, err
			}
			d.samples = append(d.samples, split(e, workers, 0))
			if r == 0 && thin > 0 {
				coarse.samples = append(coarse.samples, split(e, workers, thin))
			}
		}
		data[r] = d
	}
	if coarse == nil {
		coarse = data[0]
	}
	return data, coarse, nil
}

func newCandidates(memBits int, obj Objective, seeds int) []*candidate {
	pts := gridPoints(obj)
	if !slices.ContainsFunc(pts, defaultPoint.equal) {
		pts = append(pts, defaultPoint)
	}
	out := make([]*candidate, len(pts))
	for i, p := range pts {
		out[i] = &candidate{
			point: p, family: p.variant(), spec: p.spec(memBits, 0), isDefault: p.equal(defaultPoint),
			seeds: make([]tally, seeds), seedSt: make([]status, seeds),
		}
	}
	return out
}

func (p point) equal(q point) bool {
	return p.family == q.family && slices.Equal(p.params, q.params)
}

func countDefaults(cs []*candidate) int {
	n := 0
	for _, c := range cs {
		if c.isDefault {
			n++
		}
	}
	return n
}

// left counts a candidate left out, by why.
func (s *Search) left(c *candidate, why status) {
	switch why {
	case invalid:
		s.Invalid++
	case tooSlow:
		s.TooSlow++
		s.TooSlowSpecs = append(s.TooSlowSpecs, c.spec)
	case pending:
		s.Unfinished++
		s.BudgetExceeded = true
	}
}

// finish scores the candidates whose every seed ran, drops the later of
// two that build the same filter, and sorts them best first.
func finish(cands []*candidate, obj Objective, s *Search) []*candidate {
	var out []*candidate
	seen := map[string]bool{}
	for _, c := range cands {
		if !c.complete() {
			s.left(c, c.failed())
			continue
		}
		c.canon = c.seeds[0].spec
		if seen[c.canon] {
			s.Duplicate++
			continue
		}
		seen[c.canon] = true
		c.sc = obj.scoreOf(c.seeds, 0)
		var ns int64
		var n int
		for _, t := range c.seeds {
			ns += t.ns
			n += t.elements
		}
		c.nsPerOp = float64(ns) / float64(max(n, 1))
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b *candidate) int {
		return better(a.sc, b.sc, a.nsPerOp, b.nsPerOp, a.canon, b.canon)
	})
	return out
}

func (c *candidate) export(seeds []uint64) Candidate {
	fpr := make([]float64, len(c.seeds))
	fnr := make([]float64, len(c.seeds))
	er := make([]float64, len(c.seeds))
	out := Candidate{Spec: c.canon, Family: c.family, NsPerOp: c.nsPerOp, Score: c.sc.value, Feasible: c.sc.feasible()}
	for r, t := range c.seeds {
		fpr[r], fnr[r], er[r] = t.fpr(), t.fnr(), t.errorRate()
		out.MemoryBits = max(out.MemoryBits, t.memBits)
		out.Seeds = append(out.Seeds, SeedResult{
			Seed: seeds[r], Elements: t.elements, Distinct: t.distinct, Duplicates: t.duplicates,
			FalsePositives: t.fp, FalseNegatives: t.fn, FPR: t.fpr(), FNR: t.fnr(),
		})
	}
	out.FPR, out.FNR, out.ErrorRate = statOf(fpr), statOf(fnr), statOf(er)
	return out
}

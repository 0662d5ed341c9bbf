package pipeline

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/flowdedup/flowdedup/filters"
	"github.com/flowdedup/flowdedup/flow"
)

// errorRates runs a key stream through a set of filters, choosing each
// key's filter with route, and returns the false positive rate (distinct
// keys called duplicates, over the distinct keys) and the false negative
// rate (duplicates called unseen, over the duplicates), with the two
// denominators.
func errorRates(t *testing.T, spec string, nfilters int, hashes []uint64, route func(h uint64) int) (fpr, fnr float64, distinct, dups int) {
	t.Helper()
	fs := make([]filters.Filter, nfilters)
	for i := range fs {
		f, err := filters.New(spec, 100+uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		fs[i] = f
	}
	seen := make(map[uint64]struct{}, len(hashes))
	var fp, fn int
	for _, h := range hashes {
		_, dup := seen[h]
		got := fs[route(h)].Observe(h)
		switch {
		case dup:
			dups++
			if !got {
				fn++
			}
		default:
			seen[h] = struct{}{}
			distinct++
			if got {
				fp++
			}
		}
	}
	return float64(fp) / float64(distinct), float64(fn) / float64(dups), distinct, dups
}

// TestShardedErrorRatesMatchSingle checks that sharding costs no accuracy
// (docs/architecture.md#the-data-path, step 3): four
// shards of qht:mem=64KiB, each fed the keys flow.ShardOf gives it, must
// err as often as one qht:mem=256KiB fed every key, on a uniform key
// stream. The rates are proportions over n trials; the tolerance is six
// standard errors of the difference of two independent proportions
// (conservative: the two runs see the same keys, so the difference varies
// less). Routing on the raw top bits of the hash instead, which the QHT's
// row choice also reads, gives each shard a quarter of its rows and must
// fail the same check by far: that is the bias ShardOf's remix prevents.
func TestShardedErrorRatesMatchSingle(t *testing.T) {
	const (
		shards = 4
		seed   = 0x5eed
	)
	n, universe := 600_000, 1<<20
	if raceEnabled || testing.Short() {
		n, universe = 200_000, 1<<19 // same load, fewer trials
	}
	perShard := fmt.Sprintf("qht:mem=%dKiB", 64*n/600_000)
	single := fmt.Sprintf("qht:mem=%dKiB", shards*64*n/600_000)
	rng := rand.New(rand.NewPCG(11, 12))
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = srcKey(rng.IntN(universe)).Hash(seed)
	}

	fpr1, fnr1, distinct, dups := errorRates(t, single, 1, hashes, func(uint64) int { return 0 })
	fprS, fnrS, _, _ := errorRates(t, perShard, shards, hashes, func(h uint64) int { return flow.ShardOf(h, shards) })
	fprB, fnrB, _, _ := errorRates(t, perShard, shards, hashes, func(h uint64) int { return int(h >> 62) })

	tol := func(p1, p2 float64, n int) float64 {
		return 6 * math.Sqrt(p1*(1-p1)/float64(n)+p2*(1-p2)/float64(n))
	}
	tolFP, tolFN := tol(fpr1, fprS, distinct), tol(fnr1, fnrS, dups)
	t.Logf("%d keys, %d distinct, %d duplicates", n, distinct, dups)
	t.Logf("single %s:        FPR %.4f FNR %.4f", single, fpr1, fnr1)
	t.Logf("%d x %s (ShardOf):  FPR %.4f FNR %.4f (tolerance %.4f, %.4f)", shards, perShard, fprS, fnrS, tolFP, tolFN)
	t.Logf("%d x %s (top bits): FPR %.4f FNR %.4f", shards, perShard, fprB, fnrB)
	if math.Abs(fprS-fpr1) > tolFP || math.Abs(fnrS-fnr1) > tolFN {
		t.Errorf("sharded error rates differ from the single filter's beyond tolerance")
	}
	if math.Abs(fprB-fpr1) <= 5*tolFP && math.Abs(fnrB-fnr1) <= 5*tolFN {
		t.Errorf("routing on the raw top bits was expected to bias the error rates")
	}
}

// TestPipelineMatchesShardSimulation runs a stream through the pipeline
// with four QHT shards and through four QHTs driven by hand the same way
// (ShardOf of the seeded hash; filter i seeded FilterSeed+i): since each
// worker sees its shard's keys in source order, the records must be
// exactly the keys the hand-driven filters call unseen.
func TestPipelineMatchesShardSimulation(t *testing.T) {
	const (
		shards     = 4
		seed       = 77
		filterSeed = 1000
		spec       = "qht:mem=16KiB"
	)
	n := 60_000
	if raceEnabled {
		n = 20_000
	}
	rng := rand.New(rand.NewPCG(5, 6))
	pkts, ids := randomStream(rng, n, 80_000, func(i int) int64 { return t0 + int64(i) })

	type event struct {
		k flow.Key
		t int64
	}
	want := map[event]bool{}
	fs := make([]filters.Filter, shards)
	for i := range fs {
		fs[i], _ = filters.New(spec, filterSeed+uint64(i))
	}
	for i, id := range ids {
		k := srcKey(id)
		h := k.Hash(seed)
		if !fs[flow.ShardOf(h, shards)].Observe(h) {
			want[event{k, pkts[i].t}] = true
		}
	}
	cfg := Config{Workers: shards, Filter: spec, Key: flow.KeySrc, Seed: seed, FilterSeed: filterSeed, RingBatches: 4, BatchSize: 32}
	sink, _ := run(t, cfg, newSource(pkts))
	recs, _ := sink.snapshot()
	got := map[event]bool{}
	for _, r := range recs {
		got[event{r.Key, r.TimeNs}] = true
	}
	missing, extra := 0, 0
	for e := range want {
		if !got[e] {
			missing++
		}
	}
	for e := range got {
		if !want[e] {
			extra++
		}
	}
	if missing != 0 || extra != 0 || len(recs) != len(want) {
		t.Errorf("pipeline vs simulation: %d records, %d expected, %d missing, %d extra", len(recs), len(want), missing, extra)
	}
}

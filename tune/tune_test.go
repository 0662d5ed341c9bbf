package tune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/flow"
)

// run runs tune, failing the test on error.
func run(t *testing.T, cfg Config) *Result {
	t.Helper()
	if cfg.Budget == 0 {
		cfg.Budget = 10 * time.Minute // the tests check results, not the budget
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func find(res *Result, spec string) (Candidate, bool) {
	for _, c := range res.Ranked {
		if c.Spec == spec {
			return c, true
		}
	}
	return Candidate{}, false
}

// perSeedScore recomputes a candidate's objective value on each seed from
// its counts.
func perSeedScore(obj Objective, c Candidate) []float64 {
	ts := make([]tally, len(c.Seeds))
	for i, s := range c.Seeds {
		ts[i] = tally{elements: s.Elements, distinct: s.Distinct, duplicates: s.Duplicates, fp: s.FalsePositives, fn: s.FalseNegatives}
	}
	return obj.scoreOf(ts, 0).perSeed
}

// withinNoise checks that pick is within noise of best, both measured by
// the exhaustive run on the same seeds (so the comparison is paired).
//
// The tolerance: on the objective's value (a rate), the mean over seeds
// of pick minus best may be at most three standard errors of that mean
// paired difference (sd of the per-seed differences over sqrt(seeds)),
// and never less than a floor of three binomial standard deviations of
// the best's rate over the events it is counted on, sqrt(p(1-p)/n),
// because with three seeds the sample sd of the differences can come out
// near zero by chance. The exhaustive best is the minimum over hundreds of
// noisy candidates, so it is biased low by about this much (winner's
// curse): a pick that close cannot be told apart from it by these seeds.
// A pick must also meet a bound the best meets.
//
// The pick's counts come from the pruned run: it ran the pick on the same
// data with the same seeds, so they are what the exhaustive run measures
// for it (checked when the exhaustive run has it; it may not, when it
// dropped that filter as too slow).
func withinNoise(t *testing.T, name string, obj Objective, exhaustive *Result, p Candidate) {
	t.Helper()
	best := exhaustive.Ranked[0]
	pick := p.Spec
	if fp, ok := find(exhaustive, pick); ok && !slices.Equal(fp.Seeds, p.Seeds) {
		t.Errorf("%s: pick %s: pruned run counted %+v, exhaustive %+v", name, pick, p.Seeds, fp.Seeds)
	}
	if best.Feasible && !p.Feasible {
		t.Errorf("%s: pick %s does not meet %s, the exhaustive best %s does", name, pick, obj, best.Spec)
		return
	}
	ps, bs := perSeedScore(obj, p), perSeedScore(obj, best)
	d := make([]float64, len(ps))
	for i := range d {
		d[i] = ps[i] - bs[i]
	}
	mean, sd := statOf(d).Mean, statOf(d).SD
	events := best.Seeds[0].Elements
	switch obj.Goal {
	case MinFNR:
		events = best.Seeds[0].Duplicates
	case MinFPR:
		events = best.Seeds[0].Distinct
	}
	v := best.Score
	floor := 3 * math.Sqrt(max(v*(1-v), 1/float64(events))/float64(events))
	tol := max(3*sd/math.Sqrt(float64(len(d))), floor)
	if mean > tol {
		t.Errorf("%s: pick %s scores %.5f, the exhaustive best %s %.5f: %.5f worse, more than the noise %.5f",
			name, pick, p.Score, best.Spec, best.Score, mean, tol)
	}
	t.Logf("%s: pick %s %.5f, exhaustive best %s %.5f (difference %.5f, noise %.5f)", name, pick, p.Score, best.Spec, best.Score, mean, tol)
}

// Synthetic regimes where the papers' analysis says who wins. Each runs
// tune as a user would (pruned: the coarse phase thins the stream to
// 1/8 of its keys with 1/8 of the memory) and exhaustively, on the same
// seeds, and checks the pick is within noise of the exhaustive best.
func TestRegimes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		mem    string
		obj    string
		family []string // the analysis' winner
	}{
		// Under 1 bit per distinct key (16384 bits, ~31k distinct) with an
		// FP budget: a QHT's FPR settles at k/S whatever the load (QHT
		// paper, Thm 4.1), so a few fingerprint bits meet the bound, and it
		// evicts only on insertion of an unseen key; its FPR+FNR is the
		// lowest of the field at saturation (QHT paper, Table 2).
		{"saturated", "uniform:n=60000,universe=40000", "2KiB", "min-fnr:fpr<=0.05", []string{"qht", "qhtd", "qqhtd"}},
		// Skewed traffic, a strict FP budget, 1.4 bits per distinct key:
		// the QHT family again (k/S bounds the FPR, wide rows keep the
		// heavy hitters).
		{"skewed", "zipf:n=60000,universe=1000000,s=1.1", "4KiB", "min-fnr:fpr<=0.01", []string{"qht", "qhtd", "qqhtd"}},
		// Ample memory (14 bits per distinct key) and one window: a Bloom
		// filter never forgets (FNR 0) and its FPR (1-e^(-kn/m))^k is
		// tiny at its best k, (m/n) ln 2 = 9.6, of which the grid has 8.
		{"ample", "uniform:n=60000,universe=20000", "32KiB", "min-errors", []string{"bloom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := ParseObjective(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Samples: []string{tc.stream}, Workers: 1, Mem: tc.mem, Objective: obj, Seed: 11,
				CoarseElements: 60000 / 8, minCoarseMem: 1 << 10}
			pruned := run(t, cfg)
			if pruned.Search.Thinning != 8 {
				t.Fatalf("the pruned run thinned to 1/%d, want 1/8", pruned.Search.Thinning)
			}
			cfg.Exhaustive = true
			full := run(t, cfg)
			pick, _ := pruned.Best()
			withinNoise(t, tc.name, obj, full, pick)
			if !slices.Contains(tc.family, pick.Family) {
				t.Errorf("picked %s, want a filter of %v", pick.Spec, tc.family)
			}
		})
	}
}

// bloomAverageFPR is the expected FPR of a Bloom filter of m bits and k
// hashes over a stream of n distinct keys (duplicates set no new bit): the
// j-th distinct key is a false positive when its k bits were all set by
// the j-1 before it, probability (1-(1-1/m)^(k(j-1)))^k.
func bloomAverageFPR(m, k, n int) float64 {
	sum := 0.0
	for j := range n {
		sum += math.Pow(1-math.Pow(1-1/float64(m), float64(k*j)), float64(k))
	}
	return sum / float64(n)
}

// With ample memory the pick is a Bloom filter, and what tune measured
// for it is the Bloom formula: FNR exactly 0, FPR within 4 standard
// deviations of the expected false positives (a sum of nearly independent
// rare events: sd about the square root of the mean).
func TestAmpleMemoryBloomMatchesAnalysis(t *testing.T) {
	res := run(t, Config{Samples: []string{"uniform:n=60000,universe=20000"}, Workers: 1, Mem: "32KiB", Seed: 11})
	pick, _ := res.Best()
	if pick.Family != "bloom" {
		t.Fatalf("picked %s, want a Bloom filter", pick.Spec)
	}
	k := 0
	for kv := range strings.SplitSeq(strings.TrimPrefix(pick.Spec, "bloom:"), ",") {
		if v, ok := strings.CutPrefix(kv, "k="); ok {
			k = int(v[0] - '0')
		}
	}
	for _, s := range pick.Seeds {
		if s.FalseNegatives != 0 {
			t.Errorf("seed %d: a Bloom filter made %d false negatives", s.Seed, s.FalseNegatives)
		}
		want := bloomAverageFPR(pick.MemoryBits, k, s.Distinct) * float64(s.Distinct)
		if math.Abs(float64(s.FalsePositives)-want) > 4*math.Sqrt(want)+1 {
			t.Errorf("seed %d: %s made %d false positives, the formula expects %.1f", s.Seed, pick.Spec, s.FalsePositives, want)
		}
	}
}

// On every testdata capture, the pick is at least as good as replay's
// default at the same memory under the objective, as the real replay
// measures both (seed by seed, from its records).
func TestPickBeatsReplayDefaultOnTestdata(t *testing.T) {
	files, err := filepath.Glob(pcaps + "*.pcap*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata capture: %v", err)
	}
	objs := []Objective{{Goal: MinErrors}, {Goal: MinFNR, Bound: 0.01}, {Goal: MinFPR, Bound: 0.01}}
	const mem = "512B" // small enough that the filters make errors on these captures
	for _, f := range files {
		for i, obj := range objs {
			kind := []flow.KeyKind{flow.Key5Tuple, flow.KeySrc, flow.KeyPair}[i]
			res := run(t, Config{Samples: []string{f}, Key: kind, Window: time.Minute, Workers: 2, Mem: mem, Objective: obj, Seeds: 2, Seed: 3})
			pick, _ := res.Best()
			def := res.Default
			if def == nil {
				t.Fatalf("%s: no replay default in the result", f)
			}
			if def.Spec != "qht:mem=512B,buckets=4,fpbits=12" {
				t.Errorf("default %s", def.Spec)
			}
			first, distinct := firstSeen(t, f, flow.KeySpec{Kind: kind}, time.Minute)
			scores := map[string][]float64{}
			for _, c := range []Candidate{pick, *def} {
				var ts []tally
				for _, s := range c.Seeds {
					tp, fn := 0, 0
					for _, r := range replay(t, f, c.Spec, flow.KeySpec{Kind: kind}, time.Minute, 2, s.Seed) {
						if first[kw{r.Key, r.WindowNs}] == r.TimeNs {
							tp++
						} else {
							fn++
						}
					}
					tt := tally{elements: s.Elements, distinct: distinct, duplicates: s.Elements - distinct, fp: distinct - tp, fn: fn}
					if tt.fp != s.FalsePositives || tt.fn != s.FalseNegatives {
						t.Errorf("%s %s seed %d: tune predicted FP %d FN %d, replay made %d %d", f, c.Spec, s.Seed, s.FalsePositives, s.FalseNegatives, tt.fp, tt.fn)
					}
					ts = append(ts, tt)
				}
				sc := obj.scoreOf(ts, 0)
				if !sc.feasible() {
					sc.value = math.Inf(1)
				}
				scores[c.Spec] = append(scores[c.Spec], sc.value)
			}
			if p, d := scores[pick.Spec][0], scores[def.Spec][0]; p > d {
				t.Errorf("%s %s: pick %s scores %g under replay, worse than the default's %g", f, obj, pick.Spec, p, d)
			}
		}
	}
}

func TestRunErrors(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []Config{
		{Mem: "64KiB"},
		{Samples: []string{"uniform:n=100,universe=10"}},
		{Samples: []string{"uniform:n=100,universe=10"}, Mem: "lots"},
		{Samples: []string{"uniform:n=100,universe=10"}, Mem: "1KiB", Window: -1},
		{Samples: []string{"uniform:n=100,universe=10"}, Mem: "1KiB", Seeds: -1},
		{Samples: []string{"uniform:n=100,universe=10"}, Mem: "1KiB", Objective: Objective{Goal: MinFNR, Bound: 2}},
	} {
		if _, err := Run(ctx, cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("Run(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
	if _, err := Run(ctx, Config{Samples: []string{filepath.Join(t.TempDir(), "missing.pcap")}, Mem: "1KiB"}); err == nil {
		t.Error("a missing capture must be an error")
	}
	if _, err := Run(ctx, Config{Samples: []string{"poisson:n=10"}, Mem: "1KiB"}); err == nil {
		t.Error("an unknown stream must be an error")
	}
	if _, err := Run(ctx, Config{Samples: []string{pcaps + "malformed.pcap"}, Key: flow.KeySrc, Mem: "1KiB", Window: time.Nanosecond}); !errors.Is(err, ErrNoKeys) && err != nil {
		t.Logf("tiny windows: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Run(cctx, Config{Samples: []string{"uniform:n=1000,universe=100"}, Mem: "1KiB"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// A budget too short for everything still returns the references and
// says what it left out.
func TestBudget(t *testing.T) {
	res, err := Run(context.Background(), Config{Samples: []string{"uniform:n=200000,universe=100000"}, Mem: "8KiB", Workers: 1, Budget: time.Millisecond})
	if err != nil && !errors.Is(err, ErrNoResult) {
		t.Fatal(err)
	}
	if !res.Search.BudgetExceeded || res.Search.Unfinished == 0 {
		t.Errorf("search %+v: want the budget exceeded and work left out", res.Search)
	}
}

// The samples of one run add up: a pcap: spec with its own key, a stream,
// and bare capture paths read as one capture.
func TestSamples(t *testing.T) {
	res := run(t, Config{
		Samples: []string{pcaps + "small.pcap", "pcap:" + pcaps + "windows.pcap,key=dst", pcaps + "ipv6.pcap", "distinct:n=500"},
		Key:     flow.Key5Tuple, Mem: "1KiB", Workers: 2, Seeds: 1,
	})
	var names []string
	var keys, distinct int
	for _, s := range res.Samples {
		names = append(names, s.Name)
		keys += s.Elements
		distinct += s.Distinct
	}
	want := []string{pcaps + "small.pcap " + pcaps + "ipv6.pcap", "pcap:" + pcaps + "windows.pcap,key=dst", "distinct:n=500"}
	if !slices.Equal(names, want) {
		t.Errorf("samples %q, want %q", names, want)
	}
	// small and ipv6 have 300 5-tuples each (different flows), windows 28
	// destinations, the stream 500 distinct keys (testdata/pcaps/README.md).
	if keys != 2000+2000+3000+500 || distinct != 300+300+28+500 {
		t.Errorf("%d keys, %d distinct", keys, distinct)
	}
	best, _ := res.Best()
	if best.Seeds[0].Elements != keys || best.Seeds[0].Distinct != distinct {
		t.Errorf("the counts do not add up over the samples: %+v", best.Seeds[0])
	}
}

func TestWriteTextJSONPlot(t *testing.T) {
	res := run(t, Config{Samples: []string{pcaps + "zipf.pcap.gz"}, Key: flow.Key5Tuple, Window: time.Minute, Mem: "1KiB", Workers: 2,
		Objective: Objective{Goal: MinFNR, Bound: 0.01}})
	best, ok := res.Best()
	if !ok {
		t.Fatalf("no filter meets fpr<=1%% at 1KiB: %+v", best)
	}
	var buf bytes.Buffer
	if err := res.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"zipf.pcap.gz: 20000 keys, 4949 distinct, 5 window(s)", "objective min-fnr:fpr<=0.01",
		"best: " + best.Spec, "--filter " + best.Spec, "replay default", "ground truth", "confidence: "} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	if err := res.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Objective != res.Objective || len(back.Ranked) != len(res.Ranked) || back.Ranked[0].Spec != best.Spec ||
		back.Ranked[0].Seeds[0] != best.Seeds[0] || back.Default == nil || back.Exact == nil {
		t.Errorf("JSON does not round-trip: %+v", back)
	}
	for _, ext := range []string{"svg", "png"} {
		path := filepath.Join(t.TempDir(), "tune."+ext)
		if err := res.Plot(path); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || len(b) < 1000 {
			t.Errorf("%s: %d bytes, %v", path, len(b), err)
		}
		if ext == "svg" && (!bytes.Contains(b, []byte(">pick<")) || !bytes.Contains(b, []byte(">bound<"))) {
			t.Errorf("svg legend lacks the pick or the bound")
		}
		// In percent, as the table; the bound 0.01 is the decade 1 (%).
		if ext == "svg" && (!bytes.Contains(b, []byte(">FPR % (false positives / distinct keys), log scale<")) || !bytes.Contains(b, []byte(">1<"))) {
			t.Errorf("svg axes are not in percent")
		}
	}
	if err := res.Plot(filepath.Join(t.TempDir(), "x.pdf")); !errors.Is(err, ErrPlot) {
		t.Errorf("pdf: %v", err)
	}
}

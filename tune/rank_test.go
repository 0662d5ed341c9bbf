package tune

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/filters"
)

func TestParseObjective(t *testing.T) {
	for in, want := range map[string]Objective{
		"min-errors":         {Goal: MinErrors},
		"":                   {Goal: MinErrors},
		"min-fnr:fpr<=0.01":  {Goal: MinFNR, Bound: 0.01},
		"MIN-FNR: fpr <= 1%": {Goal: MinFNR, Bound: 0.01},
		"min-fpr:fnr<=0":     {Goal: MinFPR, Bound: 0},
		"min-fpr:fnr<=1":     {Goal: MinFPR, Bound: 1},
	} {
		got, err := ParseObjective(in)
		if err != nil || got != want {
			t.Errorf("ParseObjective(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		back, err := ParseObjective(got.String())
		if err != nil || back != got {
			t.Errorf("%q: String %q does not parse back: %+v, %v", in, got.String(), back, err)
		}
	}
	for _, in := range []string{"min-fnr", "min-fnr:fnr<=0.1", "min-fpr:fpr<=0.1", "max-errors", "min-fnr:fpr<=x",
		"min-fnr:fpr<=1.5", "min-fnr:fpr<=-0.1", "min-fnr:fpr<0.1", "min-fnr:fpr<=NaN", "min-fpr:fnr<=200%"} {
		if _, err := ParseObjective(in); !errors.Is(err, ErrObjective) {
			t.Errorf("ParseObjective(%q) = %v, want ErrObjective", in, err)
		}
	}
	var o Objective
	if err := o.UnmarshalText([]byte("min-fpr:fnr<=0.5")); err != nil || o != (Objective{MinFPR, 0.5}) {
		t.Errorf("UnmarshalText: %+v, %v", o, err)
	}
}

// t1 is a tally with the given counts.
func t1(distinct, dups, fp, fn int) tally {
	return tally{elements: distinct + dups, distinct: distinct, duplicates: dups, fp: fp, fn: fn}
}

func TestScore(t *testing.T) {
	seeds := []tally{t1(100, 900, 10, 90), t1(100, 900, 20, 0)} // FPR .1/.2, FNR .1/0
	s := Objective{Goal: MinErrors}.scoreOf(seeds, 0)
	// Errors per key: 100/1000 and 20/1000.
	if !near(s.value, 0.06) || !s.feasible() || !near(s.perSeed[0], 0.1) {
		t.Errorf("min-errors: %+v", s)
	}
	s = Objective{Goal: MinFNR, Bound: 0.15}.scoreOf(seeds, 0)
	// FNR mean 0.05; the FPR bound fails on the second seed by 0.05.
	if !near(s.value, 0.05) || s.feasible() || !near(s.violation, 0.05) || !near(s.secondary, 0.15) {
		t.Errorf("min-fnr: %+v", s)
	}
	if s := (Objective{Goal: MinFNR, Bound: 0.15}).scoreOf(seeds, 0.06); !s.feasible() {
		t.Errorf("slack 0.06 should make FPR 0.2 meet 0.15: %+v", s)
	}
	s = Objective{Goal: MinFPR, Bound: 0.1}.scoreOf(seeds, 0)
	if !near(s.value, 0.15) || !s.feasible() {
		t.Errorf("min-fpr: %+v", s)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestBetterOrder(t *testing.T) {
	feasible := score{value: 0.5}
	infeasible := score{value: 0.01, violation: 0.1}
	closer := score{value: 0.9, violation: 0.01}
	if better(feasible, infeasible, 0, 0, "a", "b") >= 0 {
		t.Error("a filter meeting the bound must come before one that does not, whatever their values")
	}
	if better(closer, infeasible, 0, 0, "a", "b") >= 0 {
		t.Error("among filters over the bound, the smaller excess comes first")
	}
	a, b := score{value: 0.1, secondary: 0.3}, score{value: 0.1, secondary: 0.2}
	if better(a, b, 1, 5, "a", "b") <= 0 {
		t.Error("equal values: the lower other rate comes first, before speed")
	}
	if better(a, a, 5, 1, "a", "b") <= 0 || better(a, a, 1, 1, "b", "a") <= 0 {
		t.Error("equal errors: the faster, then the spec, comes first")
	}
}

func cand(family, spec string, coarse tally, def bool) *candidate {
	return &candidate{family: family, spec: spec, coarse: coarse, coarseSt: done, isDefault: def}
}

// prune keeps the best Keep of each family by the coarse score, the
// default whatever its score, and orders them for the refine phase:
// defaults, then each family's best, then each family's second.
func TestPrune(t *testing.T) {
	cs := []*candidate{
		cand("qht", "q-bad", t1(100, 900, 50, 50), false),
		cand("qht", "q-best", t1(100, 900, 1, 1), false),
		cand("qht", "q-default", t1(100, 900, 40, 60), true),
		cand("qht", "q-mid", t1(100, 900, 5, 5), false),
		cand("sbf", "s-2", t1(100, 900, 9, 9), false),
		cand("sbf", "s-1", t1(100, 900, 2, 8), false),
		cand("sbf", "s-3", t1(100, 900, 30, 30), false),
		cand("lru", "l", t1(100, 900, 0, 300), false),
	}
	cs = append(cs, &candidate{family: "sbf", spec: "s-invalid", coarseSt: invalid},
		&candidate{family: "lru", spec: "l-slow", coarseSt: tooSlow})
	var got []string
	for _, c := range prune(cs, 2, Objective{Goal: MinErrors}, 0) {
		got = append(got, c.spec)
	}
	want := []string{"q-default", "q-best", "s-1", "l", "q-mid", "s-2"}
	if !slices.Equal(got, want) {
		t.Errorf("prune = %v, want %v", got, want)
	}
	// A bounded objective: filters over the bound go after those that
	// meet it, and the slack lets one just over it through.
	cs = []*candidate{
		cand("qht", "low-fnr-high-fpr", t1(1000, 1000, 30, 0), false), // FPR 0.03
		cand("qht", "meets", t1(1000, 1000, 10, 500), false),          // FPR 0.01
		cand("qht", "just-over", t1(1000, 1000, 12, 100), false),      // FPR 0.012
	}
	got = got[:0]
	for _, c := range prune(cs, 1, Objective{Goal: MinFNR, Bound: 0.01}, 0) {
		got = append(got, c.spec)
	}
	if !slices.Equal(got, []string{"meets"}) {
		t.Errorf("no slack: %v", got)
	}
	got = got[:0]
	for _, c := range prune(cs, 1, Objective{Goal: MinFNR, Bound: 0.01}, coarseSlack(Objective{Goal: MinFNR, Bound: 0.01}, 1000)) {
		got = append(got, c.spec)
	}
	if !slices.Equal(got, []string{"just-over"}) {
		t.Errorf("with slack: %v", got)
	}
}

// coarseSlack is 3 binomial standard deviations at the bound.
func TestCoarseSlack(t *testing.T) {
	if s := coarseSlack(Objective{Goal: MinFNR, Bound: 0.01}, 10000); !near(s, 3*math.Sqrt(0.01*0.99/10000)) {
		t.Errorf("slack %v", s)
	}
	if s := coarseSlack(Objective{Goal: MinErrors}, 10000); s != 0 {
		t.Errorf("min-errors has no bound, slack %v", s)
	}
	if s := coarseSlack(Objective{Goal: MinFPR, Bound: 0}, 100); !near(s, 3*math.Sqrt(1.0/100/100)) {
		t.Errorf("a zero bound still gets the noise of one event: %v", s)
	}
}

func TestStatOf(t *testing.T) {
	s := statOf([]float64{1, 2, 6})
	// Mean 3, sample variance ((4+1+9)/2) = 7.
	if !near(s.Mean, 3) || !near(s.SD, math.Sqrt(7)) || s.Min != 1 || s.Max != 6 {
		t.Errorf("statOf = %+v", s)
	}
	if s := statOf([]float64{0.5}); s.Mean != 0.5 || s.SD != 0 {
		t.Errorf("one seed: %+v", s)
	}
}

func scored(spec string, perSeed ...float64) *candidate {
	c := &candidate{canon: spec, sc: score{perSeed: perSeed}}
	for _, v := range perSeed {
		c.sc.value += v / float64(len(perSeed))
	}
	return c
}

// The paired t-test against a hand computation: differences 0.02, 0.03,
// 0.04 have mean 0.03 and sd 0.01, so t = 0.03/(0.01/sqrt 3) = 5.196,
// above Student's 97.5% quantile for 2 degrees of freedom, 4.303.
func TestConfidence(t *testing.T) {
	obj := Objective{Goal: MinErrors}
	c := confidence(obj, scored("a", 0.10, 0.10, 0.10), scored("b", 0.12, 0.13, 0.14))
	if !c.Distinguishable || math.Abs(c.T-5.196) > 0.001 || math.Abs(c.Critical-4.303) > 0.001 || c.Wins != 3 {
		t.Errorf("confidence %+v", c)
	}
	// The statement gives the mean difference, 0.03, in percentage points
	// as the table gives rates in percent; the JSON field stays a fraction.
	if !strings.Contains(c.Statement, "error rate lower by 3 percentage points") || math.Abs(c.MeanDiff-0.03) > 1e-12 {
		t.Errorf("statement %q, mean difference %g", c.Statement, c.MeanDiff)
	}
	// Differences 0.01, 0.05, 0.00 (t = 1.45): not distinguishable, nor
	// when the runner-up wins one seed.
	c = confidence(obj, scored("a", 0.10, 0.10, 0.10), scored("b", 0.11, 0.15, 0.10))
	if c.Distinguishable || c.Tied || c.Wins != 2 {
		t.Errorf("confidence %+v", c)
	}
	c = confidence(obj, scored("a", 0.10, 0.10), scored("b", 0.10, 0.10))
	if !c.Tied || c.Distinguishable {
		t.Errorf("tie: %+v", c)
	}
	c = confidence(obj, scored("a", 0.10, 0.10, 0.10), scored("b", 0.11, 0.11, 0.11))
	if !c.Distinguishable || !math.IsInf(c.T, 1) {
		t.Errorf("a constant difference: %+v", c)
	}
	// Bounded: a runner-up over the bound is beaten whatever the noise.
	b := scored("b", 0.01, 0.01)
	b.sc.violation = 0.1
	c = confidence(Objective{Goal: MinFNR, Bound: 0.1}, scored("a", 0.5, 0.5), b)
	if !c.Distinguishable || c.RunnerUpFeasible {
		t.Errorf("bounded: %+v", c)
	}
	if c := confidence(obj, scored("a", 0.1), nil); c.RunnerUp != "" || c.Statement == "" {
		t.Errorf("alone: %+v", c)
	}
}

func TestThinBits(t *testing.T) {
	for _, tc := range []struct {
		elements, mem, coarse int
		want                  uint
	}{
		{1_000_000, 64 << 13, 1 << 18, 2}, // 1M keys to 250k, 64 KiB to 16 KiB
		{100_000, 64 << 13, 1 << 18, 0},   // small sample: no thinning
		{1_000_000, 16 << 13, 1 << 18, 1}, // 16 KiB can only halve to 8 KiB
		{1_000_000, 8 << 13, 1 << 18, 0},  // 8 KiB: none
		{50_000_000, 1 << 30, 1 << 18, 8}, // 128 MiB: 1/256 brings 50M to 195k
	} {
		if got := thinBits(tc.elements, tc.mem, tc.coarse, minCoarseMemBits); got != tc.want {
			t.Errorf("thinBits(%d, %d, %d) = %d, want %d", tc.elements, tc.mem, tc.coarse, got, tc.want)
		}
	}
}

// Every family but exact is in the grid, every point builds at 64 KiB,
// replay's default is a point, a bounded objective adds its bound to the
// families whose parameter is an FP target, and thinning scales mem and
// bdbf's window only.
func TestGrid(t *testing.T) {
	specs := Grid(64<<13, Objective{Goal: MinFNR, Bound: 0.007})
	fams := map[string]bool{}
	for _, s := range specs {
		f, err := filters.New(s, 1)
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		fam, _, _ := strings.Cut(s, ":")
		fams[fam] = true
		if f.SizeBits() > 64<<13 {
			t.Errorf("%s holds %d bits, more than 64 KiB", s, f.SizeBits())
		}
	}
	for _, n := range filters.Names() {
		if n != "exact" && !fams[n] {
			t.Errorf("family %s not in the grid", n)
		}
	}
	if fams["exact"] {
		t.Error("exact is in the grid")
	}
	for _, want := range []string{DefaultSpec("64KiB"), "sbf:mem=64KiB,max=1,k=2,fps=0.007", "a2:mem=64KiB,fpr=0.007", "fpbuffer:mem=64KiB,q=0.007"} {
		if !slices.Contains(specs, want) {
			t.Errorf("grid lacks %s", want)
		}
	}
	p := point{family: "bdbf", params: []param{{"window", "4096"}}}
	if got := p.spec(64<<13, 3); got != "bdbf:mem=8KiB,window=512" {
		t.Errorf("thinned bdbf: %s", got)
	}
	p = point{family: "qht", params: []param{{"buckets", "4"}, {"fpbits", "12"}}}
	if got := p.spec(64<<13, 2); got != "qht:mem=16KiB,buckets=4,fpbits=12" {
		t.Errorf("thinned qht: %s", got)
	}
}

package tune

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// candidate is one grid point through the search.
type candidate struct {
	point     point
	family    string
	spec      string // at full memory, as generated
	isDefault bool

	coarse   tally
	coarseSt status

	seeds   []tally // by seed index
	seedSt  []status
	canon   string // canonical full spec, once a seed has run
	nsPerOp float64
	sc      score
}

// complete reports whether every seed ran to the end.
func (c *candidate) complete() bool {
	for _, s := range c.seedSt {
		if s != done {
			return false
		}
	}
	return len(c.seedSt) > 0
}

// failed returns why the candidate is not complete: the first seed that
// did not run to the end says.
func (c *candidate) failed() status {
	for _, st := range c.seedSt {
		if st != done {
			return st
		}
	}
	return done
}

// better orders two scored candidates under obj: those that meet the bound
// first; among them the lower minimised value, then the lower other rate,
// then the faster; among the others the smaller excess over the bound.
// The spec breaks the last ties, so the order is total.
func better(a, b score, nsA, nsB float64, specA, specB string) int {
	switch {
	case a.feasible() != b.feasible():
		if a.feasible() {
			return -1
		}
		return 1
	case !a.feasible():
		if c := cmp.Compare(a.violation, b.violation); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(a.value, b.value); c != 0 {
		return c
	}
	if c := cmp.Compare(a.secondary, b.secondary); c != 0 {
		return c
	}
	if c := cmp.Compare(nsA, nsB); c != 0 {
		return c
	}
	return cmp.Compare(specA, specB)
}

// coarseSlack is how far over the bound a coarse (thinned, one-seed)
// measurement may be and still count as meeting it: three binomial
// standard deviations of a rate at the bound measured over n events, so a
// filter sitting at the bound is pruned by sampling noise with
// probability about 0.1%.
func coarseSlack(obj Objective, n int) float64 {
	if !obj.bounded() || n == 0 {
		return 0
	}
	b := obj.Bound
	return 3 * math.Sqrt(max(b*(1-b), 1/float64(n))/float64(n))
}

// prune keeps, of the candidates whose coarse run finished, the best keep
// of each family by their coarse score, plus every candidate marked
// isDefault, in a dispatch order for the refine phase: the defaults first,
// then round-robin over the families by rank (each family's best, then
// each family's second, ...), so that if the budget runs out, what was
// refined is the best of every family. slack is added to the bound of a
// bounded objective (coarseSlack).
func prune(cands []*candidate, keep int, obj Objective, slack float64) []*candidate {
	byFamily := map[string][]*candidate{}
	var families []string
	var out []*candidate
	for _, c := range cands {
		if c.isDefault {
			out = append(out, c)
		}
		if c.coarseSt != done {
			continue
		}
		c.sc = obj.scoreOf([]tally{c.coarse}, slack)
		if _, ok := byFamily[c.family]; !ok {
			families = append(families, c.family)
		}
		byFamily[c.family] = append(byFamily[c.family], c)
	}
	for _, f := range families {
		slices.SortStableFunc(byFamily[f], func(a, b *candidate) int {
			return better(a.sc, b.sc, 0, 0, a.spec, b.spec)
		})
	}
	for r := range keep {
		for _, f := range families {
			if fc := byFamily[f]; r < len(fc) && !fc[r].isDefault {
				out = append(out, fc[r])
			}
		}
	}
	return out
}

// Stat summarises one rate over the seeds.
type Stat struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"` // sample standard deviation between seeds (0 with one seed)
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

func statOf(v []float64) Stat {
	s := Stat{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, x := range v {
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
	}
	if len(v) == 1 {
		s.Mean = v[0]
	} else {
		s.Mean, s.SD = stat.MeanStdDev(v, nil)
	}
	return s
}

// Confidence compares the best candidate with the runner-up over the
// seeds. The seeds are paired (both filters saw the same hashes and
// shards), so the test is a paired t-test on the per-seed differences of
// the objective's value, two-sided at 5%.
type Confidence struct {
	Best     string  `json:"best"`
	RunnerUp string  `json:"runner_up,omitempty"`
	Seeds    int     `json:"seeds"`
	MeanDiff float64 `json:"mean_diff"` // runner-up minus best, mean over seeds
	// Wins counts the seeds on which the best did strictly better.
	Wins int `json:"wins"`
	// T is the paired t statistic and Critical its 97.5% Student
	// quantile for Seeds-1 degrees of freedom (T is +Inf when the
	// difference is the same non-zero value on every seed).
	T        float64 `json:"t"`
	Critical float64 `json:"critical"`
	// Tied: both made the same errors on every seed. Distinguishable: the
	// best is better on every seed and T exceeds Critical. With one seed
	// neither can be said.
	Tied            bool `json:"tied"`
	Distinguishable bool `json:"distinguishable"`
	// RunnerUpFeasible is false when only the best meets a bounded
	// objective's bound, which settles the order whatever the noise.
	RunnerUpFeasible bool `json:"runner_up_feasible"`
	// TieBreak says how a tie at the top was broken, when there was one
	// (see Run): at which reduced memory the tied filters were run again.
	TieBreak  string `json:"tie_break,omitempty"`
	Statement string `json:"statement"`
}

// confidence compares a (ranked first) with b (second) under obj.
func confidence(obj Objective, a, b *candidate) Confidence {
	c := Confidence{Best: a.canon, Seeds: len(a.sc.perSeed)}
	if b == nil {
		c.Statement = "no other filter finished: nothing to compare with"
		return c
	}
	c.RunnerUp, c.RunnerUpFeasible = b.canon, b.sc.feasible()
	if !a.sc.feasible() {
		c.Statement = fmt.Sprintf("no filter meets %s on every seed: this one comes closest", obj)
		return c
	}
	if a.sc.feasible() && !b.sc.feasible() {
		c.Distinguishable = true
		c.Statement = fmt.Sprintf("the runner-up %s does not meet the bound on every seed", b.canon)
		return c
	}
	d := make([]float64, c.Seeds)
	allZero := true
	for i := range d {
		d[i] = b.sc.perSeed[i] - a.sc.perSeed[i]
		if d[i] > 0 {
			c.Wins++
		}
		if d[i] != 0 {
			allZero = false
		}
	}
	c.MeanDiff = stat.Mean(d, nil)
	if allZero {
		c.Tied = true
		c.Statement = fmt.Sprintf("tied with %s: both make the same errors on every seed at this memory", b.canon)
		return c
	}
	if c.Seeds < 2 {
		c.Statement = fmt.Sprintf("one seed: cannot tell it from %s (run with more seeds)", b.canon)
		return c
	}
	c.Critical = distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(c.Seeds - 1)}.Quantile(0.975)
	sd := stat.StdDev(d, nil)
	switch {
	case sd == 0:
		c.T = math.Inf(1)
	default:
		c.T = c.MeanDiff / (sd / math.Sqrt(float64(c.Seeds)))
	}
	c.Distinguishable = c.Wins == c.Seeds && c.T > c.Critical
	if c.Distinguishable {
		c.Statement = fmt.Sprintf("better than %s on every seed (%s lower by %.3g percentage points, paired t = %.3g > %.3g): distinguishable at 5%%",
			b.canon, obj.valueName(), 100*c.MeanDiff, c.T, c.Critical)
	} else {
		c.Statement = fmt.Sprintf("within noise of %s (%s lower by %.3g percentage points on average, better on %d of %d seeds, paired t = %.3g, needs > %.3g): either will do",
			b.canon, obj.valueName(), 100*c.MeanDiff, c.Wins, c.Seeds, c.T, c.Critical)
	}
	return c
}

// valueName names the minimised quantity.
func (o Objective) valueName() string {
	switch o.Goal {
	case MinFNR:
		return "FNR"
	case MinFPR:
		return "FPR"
	}
	return "error rate"
}

// tied reports whether a and b made the same errors on every seed: the
// same minimised value and the same other rate.
func tied(a, b *candidate) bool {
	return slices.Equal(a.sc.perSeed, b.sc.perSeed) && a.sc.secondary == b.sc.secondary
}

// leadingTies returns how many candidates at the head of ranked are tied
// with the first.
func leadingTies(ranked []*candidate) int {
	n := min(1, len(ranked))
	for n < len(ranked) && tied(ranked[0], ranked[n]) {
		n++
	}
	return n
}

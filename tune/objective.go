package tune

import (
	"encoding"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Goal is what an Objective minimises.
type Goal uint8

// Goals. The zero Goal is MinErrors.
const (
	// MinErrors minimises the wrong answers per key, (FP + FN) / keys:
	// every false positive is a flow not reported, every false negative a
	// flow reported again, and both cost one wrong record.
	MinErrors Goal = iota
	// MinFNR minimises the FNR among the filters whose FPR is at most the
	// bound on every seed.
	MinFNR
	// MinFPR minimises the FPR among the filters whose FNR is at most the
	// bound on every seed.
	MinFPR
)

// Objective is how tune ranks filters: a Goal, and for MinFNR and MinFPR
// the bound on the other rate.
type Objective struct {
	Goal  Goal
	Bound float64 // in [0, 1]; MinFNR: the FPR bound, MinFPR: the FNR bound
}

// ParseObjective reads "min-errors", "min-fnr:fpr<=X" or "min-fpr:fnr<=X",
// where X is a rate in [0, 1] or a percentage ("fpr<=1%" is fpr<=0.01).
// Errors wrap ErrObjective.
func ParseObjective(s string) (Objective, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "min-errors" || t == "" {
		return Objective{Goal: MinErrors}, nil
	}
	name, cond, ok := strings.Cut(t, ":")
	var goal Goal
	var rate string
	switch name {
	case "min-fnr":
		goal, rate = MinFNR, "fpr"
	case "min-fpr":
		goal, rate = MinFPR, "fnr"
	default:
		return Objective{}, fmt.Errorf("tune: objective %q: %w: want min-errors, min-fnr:fpr<=X or min-fpr:fnr<=X", s, ErrObjective)
	}
	lhs, x, found := strings.Cut(cond, "<=")
	if !ok || !found || strings.TrimSpace(lhs) != rate {
		return Objective{}, fmt.Errorf("tune: objective %q: %w: %s needs a bound, %s:%s<=X", s, ErrObjective, name, name, rate)
	}
	x = strings.TrimSpace(x)
	scale := 1.0
	if v, pct := strings.CutSuffix(x, "%"); pct {
		x, scale = strings.TrimSpace(v), 0.01
	}
	v, err := strconv.ParseFloat(x, 64)
	if err != nil || math.IsNaN(v) {
		return Objective{}, fmt.Errorf("tune: objective %q: %w: bound %q is not a number", s, ErrObjective, x)
	}
	v *= scale
	if v < 0 || v > 1 {
		return Objective{}, fmt.Errorf("tune: objective %q: %w: bound %g is not a rate in [0, 1]", s, ErrObjective, v)
	}
	return Objective{Goal: goal, Bound: v}, nil
}

// String gives the objective back in the form ParseObjective reads.
func (o Objective) String() string {
	b := strconv.FormatFloat(o.Bound, 'g', -1, 64)
	switch o.Goal {
	case MinFNR:
		return "min-fnr:fpr<=" + b
	case MinFPR:
		return "min-fpr:fnr<=" + b
	}
	return "min-errors"
}

// MarshalText implements encoding.TextMarshaler (JSON output, flags).
func (o Objective) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseObjective, so
// an Objective binds to a flag with flag.TextVar.
func (o *Objective) UnmarshalText(b []byte) error {
	v, err := ParseObjective(string(b))
	if err != nil {
		return err
	}
	*o = v
	return nil
}

// bounded reports whether the objective constrains one rate.
func (o Objective) bounded() bool { return o.Goal != MinErrors }

// score is one candidate's standing under an objective: the value it
// minimises and, for bounded objectives, how far its worst seed is over
// the bound (0 when it meets it on every seed).
type score struct {
	value     float64 // mean over seeds of the minimised quantity
	secondary float64 // mean of the other rate (tie-break)
	violation float64 // max over seeds of (bounded rate - bound), clamped at 0
	perSeed   []float64
}

func (s score) feasible() bool { return s.violation == 0 }

// scoreOf scores the per-seed tallies of one candidate. slack widens the
// bound (the coarse phase uses it so that sampling noise on a thinned
// sample does not prune a filter that sits just under the bound).
func (o Objective) scoreOf(ms []tally, slack float64) score {
	s := score{perSeed: make([]float64, len(ms))}
	n := float64(len(ms))
	for i, m := range ms {
		fpr, fnr := m.fpr(), m.fnr()
		var v, sec, bounded float64
		switch o.Goal {
		case MinFNR:
			v, sec, bounded = fnr, fpr, fpr
		case MinFPR:
			v, sec, bounded = fpr, fnr, fnr
		default:
			v, sec = m.errorRate(), fpr+fnr
		}
		s.perSeed[i] = v
		s.value += v / n
		s.secondary += sec / n
		if o.bounded() {
			s.violation = max(s.violation, bounded-o.Bound-slack)
		}
	}
	return s
}

var (
	_ encoding.TextMarshaler   = Objective{}
	_ encoding.TextUnmarshaler = (*Objective)(nil)
)

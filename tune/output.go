package tune

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// TextRows is how many ranked filters WriteText lists (all are in the
// JSON).
const TextRows = 20

// WriteJSON writes the result as one indented JSON object.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes what a user reads: the sample, the ranked table (spec,
// FPR, FNR, error rate, ns/op, as mean ± standard deviation over the
// seeds, in percent), the references, and the pick with its confidence and
// a replay command to paste.
func (r *Result) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	for _, s := range r.Samples {
		ew.printf("sample %s: %d keys, %d distinct, %d window(s)", s.Name, s.Elements, s.Distinct, s.Windows)
		if s.Unkeyed+s.Late+s.Corrupt > 0 {
			ew.printf(" (not keyed, as replay: %d unparsed, %d late, %d corrupt)", s.Unkeyed, s.Late, s.Corrupt)
		}
		ew.printf("\n")
	}
	key := r.Key
	if r.Prefix != "" {
		key += "/" + r.Prefix
	}
	if r.Decap != "" {
		key += " inside tunnels (--decap " + r.Decap + ")"
	}
	ew.printf("key %s, window %s, %d workers, %s per shard, objective %s, seeds %s\n",
		key, r.Window, r.Workers, r.Mem, r.Objective, seedList(r.Seeds))
	s := r.Search
	if s.Exhaustive {
		ew.printf("searched %d grid points exhaustively", s.Grid)
	} else if s.Thinning > 1 {
		ew.printf("searched %d grid points on 1/%d of the keys (%d keys, %s per shard, one seed), refined the best %d filters on the whole sample",
			s.Coarse, s.Thinning, s.CoarseKeys, s.CoarseMem, s.Refined)
	} else {
		ew.printf("searched %d grid points on the whole sample with one seed, refined the best %d with every seed", s.Coarse, s.Refined)
	}
	ew.printf(" in %.1f s (read %.1f, coarse %.1f, refine %.1f)", s.Seconds, s.LoadSeconds, s.CoarseSeconds, s.RefineSeconds)
	if s.Invalid+s.TooSlow+s.Unfinished > 0 {
		ew.printf(" (%d invalid at this size, %d too slow, %d cut by the budget)", s.Invalid, s.TooSlow, s.Unfinished)
	}
	ew.printf("\n\n")

	width := len("filter")
	rows := r.Ranked[:min(len(r.Ranked), TextRows)]
	for _, c := range rows {
		width = max(width, len(c.Spec))
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "rank\t%-*s\tFPR %%\tFNR %%\terrors %%\tns/op\t\n", width, "filter")
	row := func(rank string, c *Candidate, note string) {
		mark := ""
		if !c.Feasible {
			mark = " (over the bound)"
		}
		fmt.Fprintf(tw, "%s\t%-*s\t%s\t%s\t%s\t%.1f\t%s%s\n", rank, width, c.Spec, pct(c.FPR), pct(c.FNR), pct(c.ErrorRate), c.NsPerOp, note, mark)
	}
	for i := range rows {
		note := ""
		if r.Default != nil && rows[i].Spec == r.Default.Spec {
			note = "  replay default"
		}
		row(fmt.Sprint(i+1), &rows[i], note)
	}
	if len(r.Ranked) > len(rows) {
		fmt.Fprintf(tw, "\t%-*s\t\t\t\t\t\n", width, fmt.Sprintf("(%d more: --format json)", len(r.Ranked)-len(rows)))
	}
	if d := r.Default; d != nil && !containsSpec(rows, d.Spec) {
		row("ref", d, "  replay default")
	}
	if e := r.Exact; e != nil {
		row("ref", e, "  ground truth, unbounded memory")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	best, ok := r.Best()
	if len(r.Ranked) == 0 {
		ew.printf("\nno filter finished\n")
		return ew.err
	}
	ew.printf("\nbest: %s\n", best.Spec)
	if !ok {
		ew.printf("  warning: it does not meet %s on every seed; no filter does at %s per shard\n", r.Objective, r.Mem)
	}
	ew.printf("  FPR %s, FNR %s over %d seeds (mean ± sd, [min, max])\n", rateSpread(best.FPR), rateSpread(best.FNR), len(best.Seeds))
	if len(best.Seeds) > 0 {
		sr := best.Seeds[0]
		ew.printf("  replay --seed %d makes exactly FP %d, FN %d (of %d distinct, %d duplicates)\n", sr.Seed, sr.FalsePositives, sr.FalseNegatives, sr.Distinct, sr.Duplicates)
	}
	if d := r.Default; d != nil && d.Spec != best.Spec {
		ew.printf("  replay default %s: FPR %s, FNR %s\n", d.Spec, rateSpread(d.FPR), rateSpread(d.FNR))
	}
	ew.printf("  confidence: %s\n", r.Confidence.Statement)
	if r.Confidence.TieBreak != "" {
		ew.printf("  tie-break: %s\n", r.Confidence.TieBreak)
	}
	ew.printf("  paste: --filter %s\n", best.Spec)
	prefix := ""
	if r.Prefix != "" {
		prefix = " --prefix " + r.Prefix
	}
	if r.Decap != "" {
		prefix += " --decap " + r.Decap
	}
	ew.printf("  e.g.:  flowdedup replay --key %s%s --window %s --workers %d --filter %s FILE...\n", r.Key, prefix, r.Window, r.Workers, best.Spec)
	return ew.err
}

func containsSpec(cs []Candidate, spec string) bool {
	for _, c := range cs {
		if c.Spec == spec {
			return true
		}
	}
	return false
}

func seedList(seeds []uint64) string {
	parts := make([]string, len(seeds))
	for i, s := range seeds {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, ", ")
}

// pct prints a rate as a percentage, mean ± standard deviation.
func pct(s Stat) string {
	return fmt.Sprintf("%.4f ± %.4f", 100*s.Mean, 100*s.SD)
}

func rateSpread(s Stat) string {
	return fmt.Sprintf("%.4f%% ± %.4f [%.4f, %.4f]", 100*s.Mean, 100*s.SD, 100*s.Min, 100*s.Max)
}

// errWriter keeps the first write error, so a long report is checked once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }

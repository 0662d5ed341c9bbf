package eval

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

// Formats lists the output formats Write accepts.
var Formats = []string{"text", "json", "csv"}

// Write renders results as a text table, JSON lines or CSV. The text
// table gives FPR and FNR in percent, as tune's does; JSON and CSV give
// them as fractions (fpr, fnr in [0, 1]), as tune's JSON does.
func Write(w io.Writer, format string, results []Result) error {
	switch format {
	case "", "text":
		return writeText(w, results)
	case "json":
		enc := json.NewEncoder(w)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	case "csv":
		return writeCSV(w, results)
	}
	return fmt.Errorf("eval: unknown format %q (known: text, json, csv)", format)
}

func writeText(w io.Writer, results []Result) error {
	if len(results) == 0 {
		return nil
	}
	r0 := results[0]
	fmt.Fprintf(w, "stream %s, runs %d, seed %d\n", r0.Stream, r0.Runs, r0.Seed)
	// Numbers align right; the filter column is padded here so that it
	// reads left-aligned (tabwriter aligns every column the same way).
	width := len("filter")
	for _, r := range results {
		width = max(width, len(r.Filter))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tmemory\telements\tdistinct\tduplicates\tFP\tFN\tFPR %%\tFNR %%\tns/op\t\n", width, "filter")
	for _, r := range results {
		fmt.Fprintf(tw, "%-*s\t%s\t%s\t%s\t%s\t%s\t%s\t%.4f\t%.4f\t%.1f\t\n",
			width, r.Filter, memText(r.MemoryBits), num(r.Elements), num(r.Distinct), num(r.Duplicates),
			num(r.FalsePositives), num(r.FalseNegatives), 100*r.FPR, 100*r.FNR, r.NsPerOp)
	}
	return tw.Flush()
}

func writeCSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"filter", "stream", "memory_bits", "runs", "seed", "elements", "distinct", "duplicates",
		"false_positives", "false_negatives", "fpr", "fnr", "ns_per_op"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, r := range results {
		cw.Write([]string{r.Filter, r.Stream, strconv.Itoa(r.MemoryBits), strconv.Itoa(r.Runs),
			strconv.FormatUint(r.Seed, 10), f(r.Elements), f(r.Distinct), f(r.Duplicates),
			f(r.FalsePositives), f(r.FalseNegatives), f(r.FPR), f(r.FNR), f(r.NsPerOp)})
	}
	cw.Flush()
	return cw.Error()
}

// num prints a count averaged over runs: whole when it is whole.
func num(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func memText(bits int) string {
	switch {
	case bits >= 8<<20:
		return fmt.Sprintf("%.1fMiB", float64(bits)/(8<<20))
	case bits >= 8<<10:
		return fmt.Sprintf("%.1fKiB", float64(bits)/(8<<10))
	}
	return fmt.Sprintf("%dbit", bits)
}

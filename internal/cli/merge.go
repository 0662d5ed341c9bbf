package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/netwide"
	"github.com/flowdedup/flowdedup/report"
)

// mergeFormats are merge's output formats.
var mergeFormats = []string{"text", "json", "csv"}

// MergeConfig holds the flags of `flowdedup merge`.
type MergeConfig struct {
	By     time.Duration
	Format string
}

// BindFlags registers the merge flags on fs.
func (c *MergeConfig) BindFlags(fs *pflag.FlagSet) {
	durationFlag(fs, &c.By, "by", "merge all windows of each period `D`, aligned on the epoch as windows are, e.g. --by 1h for the hours of 1-minute windows; every window must lie within one period (0: merge summaries of the same window)")
	fs.StringVar(&c.Format, "format", c.Format, "output format: text | json (one object per line) | csv")
}

const mergeLong = `Merges the window summaries of many routers (--summary files of replay or run with
--summary-sketch) into network-wide distinct counts: for each window, or each
--by period, the distinct keys seen anywhere, a key seen by several routers or in
several windows counting once. The estimate is that of the union of the summaries'
HyperLogLog sketches, with the error of one sketch (0.81% standard error at the
default precision) however many are merged; beside it are the sums of the routers'
own estimates and distinct counts, which count a shared key once per router.

Columns: start and end of the window or period (RFC 3339, UTC), observers (the
summaries' --observer, or the file name for summaries without one), summaries
merged, distinct_estimate (the merged estimate), sum_distinct_estimate and
sum_distinct (the sums of the routers' distinct_estimate and distinct), and
key: the key kind the summaries count, as --key spells it (src, dst, pair,
5tuple; empty when no summary says). json and csv have key last; text says it
on a line of its own ("key: src") above the table.

Routers must share --sketch-seed, and the sketches their precision; summaries
without a sketch, or of different seeds, are errors rather than a wrong number.
So are summaries of different key kinds (one router's --key src, another's
--key dst): the error names both kinds and the file and line of each. Summaries
that do not say their kind (written by a flowdedup from before summaries had
"key") are taken to count the others' kind, with a note on standard error.
FILE - reads standard input.`

const mergeExamples = `  flowdedup merge r1.jsonl r2.jsonl r3.jsonl
  flowdedup merge --by 1h --format csv summaries/*.jsonl > hourly.csv
  ssh r1 cat /var/log/flowdedup/summary.jsonl | flowdedup merge --by 24h - r2.jsonl
`

func mergeCommand() command {
	return command{
		use:     "merge [--by D] [--format text|json|csv] SUMMARY_FILE...",
		short:   "network-wide distinct counts from the window summaries of many routers",
		long:    mergeLong,
		example: mergeExamples,
		bind: func(cmd *cobra.Command) runFunc {
			cfg := MergeConfig{Format: "text"}
			cfg.BindFlags(cmd.Flags())
			complete(cmd, "format", mergeFormats...)
			return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				return runMerge(ctx, &cfg, args, cmd.InOrStdin(), stdout, stderr)
			}
		},
	}
}

// runMerge merges the summaries of files ("-" is stdin) as cfg says and
// writes the groups to stdout.
func runMerge(ctx context.Context, cfg *MergeConfig, files []string, stdin io.Reader, stdout, stderr io.Writer) error {
	switch {
	case len(files) == 0:
		return usagef("no summary file given")
	case cfg.By < 0:
		return usagef("--by must not be negative")
	case !slices.Contains(mergeFormats, cfg.Format):
		return usagef("--format %q: want %s", cfg.Format, orList(mergeFormats))
	}
	if n := countOf(files, "-"); n > 1 {
		return usagef("standard input (-) given %d times: it can be read once", n)
	}
	m, err := netwide.New(netwide.Options{By: cfg.By})
	if err != nil {
		return usageError{err}
	}
	for _, name := range files {
		if err := mergeFile(ctx, m, name, stdin); err != nil {
			return err
		}
	}
	groups, err := m.Groups()
	if err != nil {
		return err
	}
	if n := m.SkippedEmpty(); n > 0 {
		fmt.Fprintf(stderr, "flowdedup merge: %d summaries without a key crossed a --by period boundary and were left out\n", n)
	}
	switch n := m.UnknownKind(); {
	case n == 0:
	case m.Kind().IsValid():
		fmt.Fprintf(stderr, "flowdedup merge: %d summaries do not say which --key they count (an older flowdedup's): taken to count %v as the others do\n", n, m.Kind())
	default:
		fmt.Fprintf(stderr, "flowdedup merge: no summary says which --key it counts (an older flowdedup's): the merge cannot check that all count the same\n")
	}
	return writeGroups(stdout, cfg.Format, m.Kind(), groups)
}

func countOf(names []string, name string) int {
	n := 0
	for _, s := range names {
		if s == name {
			n++
		}
	}
	return n
}

// mergeFile adds the summaries of file name to m. Errors name the file,
// and the line of the summary at fault.
func mergeFile(ctx context.Context, m *netwide.Merger, name string, stdin io.Reader) error {
	r, observer := stdin, name
	if name == "-" {
		observer = "stdin"
	} else {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	sr := report.NewSummaryReader(r)
	var s report.Summary
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		err := sr.Read(&s)
		if err == io.EOF {
			return nil
		}
		var se *report.SummaryError
		switch {
		case errors.As(err, &se):
			return fmt.Errorf("%s:%d: %w", observer, se.Line, se.Err)
		case err != nil:
			return fmt.Errorf("%s: %w", observer, err)
		}
		ns := netwide.Summary{
			Observer: s.Observer, StartNs: s.StartNs, EndNs: s.EndNs,
			Distinct: s.Distinct, DistinctEstimate: s.DistinctEstimate, Sketch: s.Sketch,
			Key: s.Key, Source: observer + ":" + strconv.Itoa(sr.Line()),
		}
		if ns.Observer == "" {
			ns.Observer = observer
		}
		if err := m.Add(&ns); err != nil {
			return err
		}
	}
}

// mergeRow is one group as merge writes it; the JSON field order is the
// CSV column order.
type mergeRow struct {
	Start               string   `json:"start"`
	End                 string   `json:"end"`
	Observers           []string `json:"observers"`
	Summaries           int      `json:"summaries"`
	DistinctEstimate    uint64   `json:"distinct_estimate"`
	SumDistinctEstimate uint64   `json:"sum_distinct_estimate"`
	SumDistinct         uint64   `json:"sum_distinct"`
	Key                 string   `json:"key"` // as --key spells it; "" when unknown
}

var mergeColumns = []string{"start", "end", "observers", "summaries", "distinct_estimate", "sum_distinct_estimate", "sum_distinct", "key"}

func newMergeRow(g *netwide.Group) mergeRow {
	return mergeRow{
		Start: rfc3339(g.StartNs), End: rfc3339(g.EndNs), Observers: g.Observers, Summaries: g.Summaries,
		DistinctEstimate: g.Estimate, SumDistinctEstimate: g.SumEstimates, SumDistinct: g.SumDistinct,
		Key: kindName(g.Key),
	}
}

// kindName spells k as --key does, or "" for an unknown kind.
func kindName(k flow.KeyKind) string {
	if !k.IsValid() {
		return ""
	}
	return k.String()
}

func rfc3339(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// writeGroups writes the groups in format: text (a line saying the key
// kind, then aligned columns, the observers last), json (one object per
// line) or csv (a header line, the observers joined by spaces). kind is the
// key kind of the summaries, for the text's first line.
func writeGroups(w io.Writer, format string, kind flow.KeyKind, groups []netwide.Group) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		for i := range groups {
			if err := enc.Encode(newMergeRow(&groups[i])); err != nil {
				return err
			}
		}
		return nil
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write(mergeColumns)
		for i := range groups {
			r := newMergeRow(&groups[i])
			cw.Write([]string{r.Start, r.End, strings.Join(r.Observers, " "), strconv.Itoa(r.Summaries),
				strconv.FormatUint(r.DistinctEstimate, 10), strconv.FormatUint(r.SumDistinctEstimate, 10), strconv.FormatUint(r.SumDistinct, 10), r.Key})
		}
		cw.Flush()
		return cw.Error()
	}
	if name := kindName(kind); name != "" {
		fmt.Fprintf(w, "key: %s\n", name)
	} else {
		fmt.Fprintln(w, "key: unknown (the summaries do not say)")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "start\tend\tsummaries\tdistinct_estimate\tsum_distinct_estimate\tsum_distinct\tobservers")
	for i := range groups {
		r := newMergeRow(&groups[i])
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", r.Start, r.End, r.Summaries,
			r.DistinctEstimate, r.SumDistinctEstimate, r.SumDistinct, strings.Join(r.Observers, ","))
	}
	return tw.Flush()
}

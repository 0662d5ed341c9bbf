package cli

import (
	"bytes"
	"cmp"
	"container/heap"
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
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/report"
	"github.com/flowdedup/flowdedup/sketch"
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
FILE - reads standard input.

merge streams: it reads all files at once, each in time order as flowdedup
writes them, and writes a window as soon as no file can add to it, so its
memory depends on the number of files, not of windows (three routers of 8000
one-minute windows: 30 to 42 MiB). A file that goes back to a window already
written is an error naming its line; so is a sketch of a higher precision
than flowdedup writes (14). text aligns its columns, so it prints when all is
read; json and csv print as they go, and an error stops them where it is
found (exit status 1).`

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
//
// It streams: the files are read at once, each in its order, the summary
// that starts first going next (a k-way merge on window start, as
// flowdedup writes each file in time order), and a group goes out as soon
// as no input can add to it. Memory is a summary and the open groups (a
// sketch each) per input, however many windows the files hold. An error
// stops the output where it is found, with the file and line.
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
	m, err := netwide.New(netwide.Options{By: cfg.By, MaxPrecision: sketch.DefaultPrecision})
	if err != nil {
		return usageError{err}
	}
	ins := make(mergeInputs, 0, len(files))
	defer func() {
		for _, in := range ins {
			in.close()
		}
	}()
	for _, name := range files {
		in, err := openMergeInput(name, stdin)
		if err != nil {
			return err
		}
		in.order = len(ins)
		ins = append(ins, in)
	}
	// Each input's first summary, before anything is written: the errors
	// of a file's first line (a wrong kind, seed or format) come before
	// any output.
	next := make(mergeInputs, 0, len(ins))
	for _, in := range ins {
		ok, err := in.read()
		if err != nil {
			return err
		}
		if ok {
			next = append(next, in)
		}
	}
	heap.Init(&next)
	out := newGroupWriter(stdout, cfg.Format)
	for n := 0; len(next) > 0; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		in := next[0]
		if err := m.Flush(in.s.StartNs, out.group); err != nil {
			return err
		}
		if err := m.Add(&in.s); err != nil {
			return err
		}
		ok, err := in.read()
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(&next, 0)
		} else {
			heap.Pop(&next)
		}
	}
	groups, err := m.Groups()
	if err != nil {
		return err
	}
	for i := range groups {
		if err := out.group(&groups[i]); err != nil {
			return err
		}
	}
	if err := out.close(m.Kind(), m.Prefix()); err != nil {
		return err
	}
	if n := m.SkippedEmpty(); n > 0 {
		fmt.Fprintf(stderr, "flowdedup merge: %d summaries without a key crossed a --by period boundary and were left out\n", n)
	}
	switch n := m.UnknownKind(); {
	case n == 0:
	case m.Kind().IsValid():
		fmt.Fprintf(stderr, "flowdedup merge: %d summaries do not say which --key they count (an older flowdedup's): taken to count %v as the others do\n", n, kindName(m.Kind(), m.Prefix()))
	default:
		fmt.Fprintf(stderr, "flowdedup merge: no summary says which --key it counts (an older flowdedup's): the merge cannot check that all count the same\n")
	}
	return nil
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

// mergeInput is one summary file being read: s holds its next summary.
type mergeInput struct {
	name  string // as errors name it: the file, or "stdin"
	f     *os.File
	sr    *report.SummaryReader
	rs    record.Summary
	s     netwide.Summary
	order int // the input's place on the command line: ties go in that order
}

func openMergeInput(name string, stdin io.Reader) (*mergeInput, error) {
	in := &mergeInput{name: name}
	r := stdin
	if name == "-" {
		in.name = "stdin"
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		in.f, r = f, f
	}
	in.sr = report.NewSummaryReader(r)
	return in, nil
}

func (in *mergeInput) close() {
	if in.f != nil {
		in.f.Close()
	}
}

// read reads the input's next summary into in.s, and reports false at the
// end of the input. Errors name the file, and the line at fault.
func (in *mergeInput) read() (bool, error) {
	err := in.sr.Read(&in.rs)
	if err == io.EOF {
		return false, nil
	}
	var se *report.SummaryError
	switch {
	case errors.As(err, &se):
		return false, fmt.Errorf("%s:%d: %w", in.name, se.Line, se.Err)
	case err != nil:
		return false, fmt.Errorf("%s: %w", in.name, err)
	}
	s := &in.rs
	in.s = netwide.Summary{
		Observer: cmp.Or(s.Observer, in.name), StartNs: s.StartNs, EndNs: s.EndNs,
		Distinct: s.Distinct, DistinctEstimate: s.DistinctEstimate, Sketch: s.Sketch,
		Key: s.Key, Prefix: s.Prefix, Source: in.name + ":" + strconv.Itoa(in.sr.Line()),
	}
	return true, nil
}

// mergeInputs is a heap of inputs by the start of their next summary, then
// their place on the command line.
type mergeInputs []*mergeInput

func (h mergeInputs) Len() int { return len(h) }
func (h mergeInputs) Less(i, j int) bool {
	a, b := h[i], h[j]
	return a.s.StartNs < b.s.StartNs || a.s.StartNs == b.s.StartNs && a.order < b.order
}
func (h mergeInputs) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeInputs) Push(x any)   { *h = append(*h, x.(*mergeInput)) }
func (h *mergeInputs) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
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
	Key                 string   `json:"key"` // as --key spells it, then /V4LEN,V6LEN for networks; "" when unknown
}

var mergeColumns = []string{"start", "end", "observers", "summaries", "distinct_estimate", "sum_distinct_estimate", "sum_distinct", "key"}

func newMergeRow(g *netwide.Group) mergeRow {
	return mergeRow{
		Start: rfc3339(g.StartNs), End: rfc3339(g.EndNs), Observers: g.Observers, Summaries: g.Summaries,
		DistinctEstimate: g.Estimate, SumDistinctEstimate: g.SumEstimates, SumDistinct: g.SumDistinct,
		Key: kindName(g.Key, g.Prefix),
	}
}

// kindName spells k as --key does, followed by /V4LEN,V6LEN for keys by
// network (as summaries do: src/24,64), or "" for an unknown kind.
func kindName(k flow.KeyKind, m flow.Mask) string {
	if !k.IsValid() {
		return ""
	}
	return flow.KeySpec{Kind: k, Mask: m}.String()
}

func rfc3339(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// groupWriter writes groups as they come, in format: text (a line saying
// the key kind, then aligned columns, the observers last), json (one
// object per line) or csv (a header line, the observers joined by
// spaces). json and csv go out group by group; text aligns its columns
// over all rows, so it keeps its lines (about 120 bytes a group) until
// close, which says the key kind above them.
type groupWriter struct {
	w      io.Writer
	format string
	enc    *json.Encoder
	cw     *csv.Writer
	text   bytes.Buffer // text: the rows, tab-separated
}

func newGroupWriter(w io.Writer, format string) *groupWriter {
	g := &groupWriter{w: w, format: format}
	switch format {
	case "json":
		g.enc = json.NewEncoder(w)
	case "csv":
		g.cw = csv.NewWriter(w)
		g.cw.Write(mergeColumns)
	}
	return g
}

func (g *groupWriter) group(gr *netwide.Group) error {
	r := newMergeRow(gr)
	switch g.format {
	case "json":
		return g.enc.Encode(r)
	case "csv":
		g.cw.Write([]string{r.Start, r.End, strings.Join(r.Observers, " "), strconv.Itoa(r.Summaries),
			strconv.FormatUint(r.DistinctEstimate, 10), strconv.FormatUint(r.SumDistinctEstimate, 10), strconv.FormatUint(r.SumDistinct, 10), r.Key})
		return g.cw.Error()
	}
	fmt.Fprintf(&g.text, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", r.Start, r.End, r.Summaries,
		r.DistinctEstimate, r.SumDistinctEstimate, r.SumDistinct, strings.Join(r.Observers, ","))
	return nil
}

// close writes what is left; kind and prefix are what the summaries
// count, for the text's first line.
func (g *groupWriter) close(kind flow.KeyKind, prefix flow.Mask) error {
	switch g.format {
	case "json":
		return nil
	case "csv":
		g.cw.Flush()
		return g.cw.Error()
	}
	if name := kindName(kind, prefix); name != "" {
		fmt.Fprintf(g.w, "key: %s\n", name)
	} else {
		fmt.Fprintln(g.w, "key: unknown (the summaries do not say)")
	}
	tw := tabwriter.NewWriter(g.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "start\tend\tsummaries\tdistinct_estimate\tsum_distinct_estimate\tsum_distinct\tobservers")
	tw.Write(g.text.Bytes())
	return tw.Flush()
}

package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/pipeline"
)

// Config says where a Reporter writes. The Reporter does not close any of
// the writers.
type Config struct {
	Out     io.Writer    // distinct-flow records; nil writes none
	Format  string       // record format, one of Formats; "" is jsonl
	Kind    flow.KeyKind // key kind of the records
	Summary io.Writer    // window summaries, one JSON line each; nil writes none
	Totals  io.Writer    // run totals, one text line on Close (stderr); nil writes none
}

// Reporter is the pipeline.Sink of the CLI: it writes records, window
// summaries and, on Close, run totals.
//
// The records of a window are flushed before its summary is written, so a
// summary on disk implies its records are too. The first error of any
// writer stops the Reporter: it is returned by that call and by every
// later one, Close included. Close still writes the totals, which count
// every window given to Window.
//
// A Reporter is used from one goroutine, as pipeline.Sink says.
type Reporter struct {
	records *RecordWriter
	summary *SummaryWriter
	out     io.Writer // for totals
	totals  pipeline.WindowSummary
	windows uint64
	err     error
	closed  bool
}

var _ pipeline.Sink = (*Reporter)(nil)

// New returns a Reporter writing as cfg says. Format and Kind are checked
// even when Out is nil.
func New(cfg Config) (*Reporter, error) {
	if _, err := parseFormat(cfg.Format); err != nil {
		return nil, err
	}
	if !cfg.Kind.IsValid() {
		return nil, fmt.Errorf("report: %w: %v", flow.ErrBadKind, cfg.Kind)
	}
	r := &Reporter{out: cfg.Totals}
	if cfg.Out != nil {
		var err error
		if r.records, err = NewRecordWriter(cfg.Out, cfg.Format, cfg.Kind); err != nil {
			return nil, err
		}
	}
	if cfg.Summary != nil {
		r.summary = NewSummaryWriter(cfg.Summary)
	}
	r.totals.MalformedBy = make(map[string]uint64)
	r.totals.SkippedBy = make(map[string]uint64)
	r.totals.DroppedBy = make(map[string]uint64)
	return r, nil
}

// Record writes the distinct-flow record rec (buffered).
func (r *Reporter) Record(rec *pipeline.Record) error {
	if r.err != nil || r.records == nil {
		return r.err
	}
	r.err = r.records.Record(rec)
	return r.err
}

// Window flushes the records and writes the summary of the closed window s.
func (r *Reporter) Window(s *pipeline.WindowSummary) error {
	if r.err != nil {
		return r.err
	}
	r.add(s)
	if r.records != nil {
		if r.err = r.records.Flush(); r.err != nil {
			return r.err
		}
	}
	if r.summary != nil {
		r.err = r.summary.Window(s)
	}
	return r.err
}

// Flush writes the buffered records.
func (r *Reporter) Flush() error {
	if r.err != nil || r.records == nil {
		return r.err
	}
	r.err = r.records.Flush()
	return r.err
}

// Close flushes the records and writes the run totals. It returns the
// first error of the Reporter's life; calls after Close return an error.
func (r *Reporter) Close() error {
	if r.closed {
		return errFirst(r.err, errClosed)
	}
	r.closed = true
	if r.err == nil && r.records != nil {
		r.err = r.records.Flush()
	}
	if r.out != nil {
		line := appendTotals(nil, &r.totals, r.windows)
		tw := wholeWriter{w: r.out, op: "totals"}
		r.err = errFirst(r.err, tw.write(line, 1))
	}
	err := r.err
	r.err = errFirst(err, errClosed)
	return err
}

func (r *Reporter) add(s *pipeline.WindowSummary) {
	t := &r.totals
	t.Packets += s.Packets
	t.Malformed += s.Malformed
	t.Skipped += s.Skipped
	t.Keys += s.Keys
	t.Prefiltered += s.Prefiltered
	t.Distinct += s.Distinct
	t.Dropped += s.Dropped
	for reason, n := range s.MalformedBy {
		t.MalformedBy[reason] += n
	}
	for reason, n := range s.SkippedBy {
		t.SkippedBy[reason] += n
	}
	for reason, n := range s.DroppedBy {
		t.DroppedBy[reason] += n
	}
	r.windows++
}

// appendTotals appends the one-line run totals:
//
//	totals: packets 1000, malformed 3 (bad_header 1, truncated 2), skipped 2 (not_ip 2), keys 995, distinct 120, dropped 0, windows 2
func appendTotals(b []byte, t *pipeline.WindowSummary, windows uint64) []byte {
	b = append(b, "totals: packets "...)
	b = strconv.AppendUint(b, t.Packets, 10)
	b = append(b, ", malformed "...)
	b = appendCountBy(b, t.Malformed, t.MalformedBy)
	b = append(b, ", skipped "...)
	b = appendCountBy(b, t.Skipped, t.SkippedBy)
	b = append(b, ", keys "...)
	b = strconv.AppendUint(b, t.Keys, 10)
	if t.Prefiltered != 0 {
		b = append(b, " (prefiltered in the kernel "...)
		b = strconv.AppendUint(b, t.Prefiltered, 10)
		b = append(b, ')')
	}
	b = append(b, ", distinct "...)
	b = strconv.AppendUint(b, t.Distinct, 10)
	b = append(b, ", dropped "...)
	b = appendCountBy(b, t.Dropped, t.DroppedBy)
	b = append(b, ", windows "...)
	b = strconv.AppendUint(b, windows, 10)
	return append(b, '\n')
}

// appendCountBy appends n and, when any is not zero, the counts by reason
// in sorted order: "3 (bad_header 1, truncated 2)".
func appendCountBy(b []byte, n uint64, by map[string]uint64) []byte {
	b = strconv.AppendUint(b, n, 10)
	sep := " ("
	for _, reason := range slices.Sorted(maps.Keys(by)) {
		if by[reason] == 0 {
			continue
		}
		b = fmt.Appendf(b, "%s%s %d", sep, reason, by[reason])
		sep = ", "
	}
	if sep != " (" {
		b = append(b, ')')
	}
	return b
}

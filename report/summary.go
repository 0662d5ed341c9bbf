package report

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/flowdedup/flowdedup/record"
)

// A SummaryWriter writes one JSON line per closed window (the --summary
// file; docs/architecture.md#records-and-summaries says what a user may
// rely on):
//
//	{"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T01:00:00Z","packets":1000,"malformed":3,"skipped":2,"keys":995,"prefiltered":0,"distinct":120,"dropped":0,"malformed_by":{"bad_header":1,"truncated":2},"skipped_by":{"not_ip":2},"dropped_by":{},"final":false,"observer":"r1","filter":"qht:mem=64MiB,buckets=4,fpbits=12","key":"src","late":0,"late_by":{},"distinct_estimate":121,"export_dropped":{}}
//
// Times are RFC 3339 in UTC as in records. skipped counts frames without an
// IP key (record.WindowSummary.Skipped). malformed_by, skipped_by,
// dropped_by and late_by map reasons to counts, in sorted order, and are {}
// rather than null when empty; final is true for the last window of a run.
// The fields after final came later and are appended, so the older ones
// keep their place: observer and filter (Summary.Observer, Summary.Filter;
// left out when empty), late (packets that came after their window had
// closed), distinct_estimate (the window's HyperLogLog estimate), sketch
// (that HyperLogLog's binary form in standard base64, only when the
// pipeline kept it) and export_dropped (Summary.ExportDropped: by
// destination, then by reason; {} when nothing was lost). key (Summary.Key,
// the key kind the window counts, spelt as --key takes it: src, dst, pair
// or 5tuple; for keys by network, followed by / and the prefix lengths,
// Summary.Prefix, as in src/24,64: flow.KeySpec's text) came last but sits
// beside filter, the other field that says how the run counted; it is left
// out when the kind is not valid (unknown).
//
// The last line, after the final window's, is the run totals (Totals,
// AppendRunTotals): {"run_totals":{...}}, written by the Reporter's Close
// once the exports have drained, so that it counts every record an export
// could not deliver, which the window summaries (export_dropped, what was
// known when each was written) cannot all carry.
//
// Each line goes to the destination in one Write as soon as its window
// closes: nothing is buffered, so a summary is on disk (in the page cache;
// there is no fsync) when Window returns. The first write error is returned
// by every later call. [SummaryReader] reads the lines back.
//
// A SummaryWriter is a synchronous [Destination]: its Records, Flush and Close do
// nothing (it does not close its destination).
type SummaryWriter struct {
	out wholeWriter
}

var _ record.Destination = (*SummaryWriter)(nil)

// NewSummaryWriter returns a SummaryWriter writing to w. It does not close w.
func NewSummaryWriter(w io.Writer) *SummaryWriter {
	return &SummaryWriter{out: wholeWriter{w: w, op: "summary"}}
}

// Window writes the summary of the closed window s.
func (sw *SummaryWriter) Window(s *record.Summary) error {
	if sw.out.err != nil {
		return sw.out.err
	}
	return sw.out.write(record.AppendSummary(nil, s), 1)
}

// Totals writes the run totals line (AppendRunTotals), the last line of
// the output; the Reporter's Close calls it after the exports' drain.
func (sw *SummaryWriter) Totals(t *RunTotals) error {
	if sw.out.err != nil {
		return sw.out.err
	}
	return sw.out.write(AppendRunTotals(nil, t), 1)
}

// Records does nothing: a summary file holds no records.
func (sw *SummaryWriter) Records(*record.Batch) error { return sw.out.err }

// Flush returns the writer's error, if any: nothing is buffered.
func (sw *SummaryWriter) Flush() error { return sw.out.err }

// Close returns the writer's error, if any. It does not close the
// destination.
func (sw *SummaryWriter) Close() error { return sw.out.err }

// MaxSummaryLine bounds a summary line a SummaryReader accepts: a line with
// the largest sketch the sketch package makes (precision 18, 256 KiB,
// about 350 KiB in base64) and many export destinations fits.
const MaxSummaryLine = 1 << 20

// A SummaryError is a line a SummaryReader could not read as a summary.
type SummaryError struct {
	Line int   // 1-based
	Err  error // what is wrong with it; wraps ErrSummary
}

func (e *SummaryError) Error() string {
	return "report: summary line " + strconv.Itoa(e.Line) + ": " + e.Err.Error()
}

func (e *SummaryError) Unwrap() error { return e.Err }

// A SummaryReader reads the JSON lines a SummaryWriter writes (a --summary
// file) back into Summaries, for `flowdedup merge`.
//
// It is strict: a line that is not one JSON object, that lacks a field
// every summary has (window_start, window_end, packets, malformed, skipped,
// keys, distinct, dropped, final), whose field has the wrong type (a
// negative or fractional count, a sketch that is not base64), whose times
// are not RFC 3339 or end before they start, or that is longer than
// MaxSummaryLine, is a *SummaryError naming its line. Blank lines are
// skipped, and so is the run totals line (an object whose one field is
// run_totals, see SummaryWriter), which counts no window. Fields it does not know are ignored, so that summaries of a
// newer flowdedup, which appends fields, can still be read; fields added
// after the first version (prefiltered, observer, filter, key, late,
// late_by, distinct_estimate, sketch, export_dropped) are zero when absent:
// a summary without key is of an unknown kind (Summary.Key zero). A key
// that is not one of src, dst, pair and 5tuple, optionally by network
// (src/24,64), is a *SummaryError, not an unknown kind: it would be one
// that a merge could not check.
type SummaryReader struct {
	sc   *bufio.Scanner
	line int
	err  error
}

// NewSummaryReader returns a SummaryReader reading r.
func NewSummaryReader(r io.Reader) *SummaryReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxSummaryLine)
	return &SummaryReader{sc: sc}
}

// Read reads the next summary into s, overwriting it. At the end of the
// input it returns io.EOF; after any other error it returns that error
// again.
func (sr *SummaryReader) Read(s *record.Summary) error {
	if sr.err != nil {
		return sr.err
	}
	for sr.sc.Scan() {
		sr.line++
		line := sr.sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := record.ParseSummary(line, s); err != nil {
			if errors.Is(err, record.ErrRunTotals) {
				continue
			}
			sr.err = &SummaryError{Line: sr.line, Err: err}
			return sr.err
		}
		return nil
	}
	switch err := sr.sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		sr.err = &SummaryError{Line: sr.line + 1, Err: fmt.Errorf("%w: longer than %d bytes", record.ErrSummary, MaxSummaryLine)}
	case err != nil:
		sr.err = fmt.Errorf("report: reading summaries: %w", err)
	default:
		sr.err = io.EOF
	}
	return sr.err
}

// Line returns the line number (1-based) of the summary the last
// successful Read returned, for messages that name it ("file:line").
func (sr *SummaryReader) Line() int { return sr.line }

// ReadSummaries reads every summary of r (see SummaryReader).
func ReadSummaries(r io.Reader) ([]record.Summary, error) {
	sr := NewSummaryReader(r)
	var all []record.Summary
	for {
		var s record.Summary
		err := sr.Read(&s)
		if err == io.EOF {
			return all, nil
		}
		if err != nil {
			return all, err
		}
		all = append(all, s)
	}
}

package report

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/flowdedup/flowdedup/flow"
)

// A SummaryWriter writes one JSON line per closed window (the --summary
// file; docs/architecture.md#records-and-summaries says what a user may
// rely on):
//
//	{"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T01:00:00Z","packets":1000,"malformed":3,"skipped":2,"keys":995,"prefiltered":0,"distinct":120,"dropped":0,"malformed_by":{"bad_header":1,"truncated":2},"skipped_by":{"not_ip":2},"dropped_by":{},"final":false,"observer":"r1","filter":"qht:mem=64MiB,buckets=4,fpbits=12","key":"src","late":0,"late_by":{},"distinct_estimate":121,"export_dropped":{}}
//
// Times are RFC 3339 in UTC as in records. skipped counts frames without an
// IP key (pipeline.WindowSummary.Skipped). malformed_by, skipped_by,
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

var _ Destination = (*SummaryWriter)(nil)

// NewSummaryWriter returns a SummaryWriter writing to w. It does not close w.
func NewSummaryWriter(w io.Writer) *SummaryWriter {
	return &SummaryWriter{out: wholeWriter{w: w, op: "summary"}}
}

// summaryLine is the JSON form of a Summary. Field order is the order of
// the line: new fields go at the end, but for key, which sits beside filter.
type summaryLine struct {
	WindowStart      string                       `json:"window_start"`
	WindowEnd        string                       `json:"window_end"`
	Packets          uint64                       `json:"packets"`
	Malformed        uint64                       `json:"malformed"`
	Skipped          uint64                       `json:"skipped"`
	Keys             uint64                       `json:"keys"`
	Prefiltered      uint64                       `json:"prefiltered"`
	Distinct         uint64                       `json:"distinct"`
	Dropped          uint64                       `json:"dropped"`
	MalformedBy      map[string]uint64            `json:"malformed_by"`
	SkippedBy        map[string]uint64            `json:"skipped_by"`
	DroppedBy        map[string]uint64            `json:"dropped_by"`
	Final            bool                         `json:"final"`
	Observer         string                       `json:"observer,omitempty"`
	Filter           string                       `json:"filter,omitempty"`
	Key              string                       `json:"key,omitempty"`
	Late             uint64                       `json:"late"`
	LateBy           map[string]uint64            `json:"late_by"`
	DistinctEstimate uint64                       `json:"distinct_estimate"`
	Sketch           []byte                       `json:"sketch,omitempty"` // standard base64
	ExportDropped    map[string]map[string]uint64 `json:"export_dropped"`
	Collect          *CollectCounts               `json:"collect,omitempty"`
}

// orEmpty returns m, or an empty map for nil: {} reads better than null.
func orEmpty(m map[string]uint64) map[string]uint64 {
	if m == nil {
		return map[string]uint64{}
	}
	return m
}

// keyName returns the --key spelling of k, followed by /V4LEN,V6LEN for
// keys by network, or "" (the field left out) for an invalid kind.
func keyName(k flow.KeyKind, m flow.Mask) string {
	if !k.IsValid() {
		return ""
	}
	return flow.KeySpec{Kind: k, Mask: m}.String()
}

// AppendSummary appends the JSON line of s, newline included: the line
// --summary writes, which delivery's spool files hold too.
func AppendSummary(b []byte, s *Summary) []byte {
	dropped := s.ExportDropped
	if dropped == nil {
		dropped = map[string]map[string]uint64{}
	}
	line := summaryLine{
		WindowStart:      string(appendTime(nil, s.StartNs)),
		WindowEnd:        string(appendTime(nil, s.EndNs)),
		Packets:          s.Packets,
		Malformed:        s.Malformed,
		Skipped:          s.Skipped,
		Keys:             s.Keys,
		Prefiltered:      s.Prefiltered,
		Distinct:         s.Distinct,
		Dropped:          s.Dropped,
		MalformedBy:      orEmpty(s.MalformedBy),
		SkippedBy:        orEmpty(s.SkippedBy),
		DroppedBy:        orEmpty(s.DroppedBy),
		Final:            s.Final,
		Observer:         s.Observer,
		Filter:           s.Filter,
		Key:              keyName(s.Key, s.Prefix),
		Late:             s.Late,
		LateBy:           orEmpty(s.LateBy),
		DistinctEstimate: s.DistinctEstimate,
		Sketch:           s.Sketch,
		ExportDropped:    dropped,
		Collect:          s.Collect,
	}
	j, err := json.Marshal(&line)
	if err != nil {
		// Strings, numbers, bytes and maps of them: Marshal cannot fail
		// (invalid UTF-8 in a string is replaced, not an error).
		panic("report: encoding a summary: " + err.Error())
	}
	b = append(b, j...)
	return append(b, '\n')
}

// Window writes the summary of the closed window s.
func (sw *SummaryWriter) Window(s *Summary) error {
	if sw.out.err != nil {
		return sw.out.err
	}
	return sw.out.write(AppendSummary(nil, s), 1)
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
func (sw *SummaryWriter) Records(*Batch) error { return sw.out.err }

// Flush returns the writer's error, if any: nothing is buffered.
func (sw *SummaryWriter) Flush() error { return sw.out.err }

// Close returns the writer's error, if any. It does not close the
// destination.
func (sw *SummaryWriter) Close() error { return sw.out.err }

// MaxSummaryLine bounds a summary line a SummaryReader accepts: a line with
// the largest sketch the sketch package makes (precision 18, 256 KiB,
// about 350 KiB in base64) and many export destinations fits.
const MaxSummaryLine = 1 << 20

// ErrSummary is wrapped by the errors of a SummaryReader for a line that
// is not a summary.
var ErrSummary = errors.New("malformed summary")

// ErrRunTotals is returned by ParseSummary for the run totals line
// ({"run_totals":{...}}, see SummaryWriter): a line of a summary output
// that is no window's summary. SummaryReader skips it.
var ErrRunTotals = errors.New("report: the run totals, not a window summary")

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
func (sr *SummaryReader) Read(s *Summary) error {
	if sr.err != nil {
		return sr.err
	}
	for sr.sc.Scan() {
		sr.line++
		line := sr.sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := ParseSummary(line, s); err != nil {
			if errors.Is(err, ErrRunTotals) {
				continue
			}
			sr.err = &SummaryError{Line: sr.line, Err: err}
			return sr.err
		}
		return nil
	}
	switch err := sr.sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		sr.err = &SummaryError{Line: sr.line + 1, Err: fmt.Errorf("%w: longer than %d bytes", ErrSummary, MaxSummaryLine)}
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
func ReadSummaries(r io.Reader) ([]Summary, error) {
	sr := NewSummaryReader(r)
	var all []Summary
	for {
		var s Summary
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

// summaryIn is a summaryLine as read: pointers tell the required fields
// that are missing from those that are zero.
type summaryIn struct {
	WindowStart      *string                      `json:"window_start"`
	WindowEnd        *string                      `json:"window_end"`
	Packets          *uint64                      `json:"packets"`
	Malformed        *uint64                      `json:"malformed"`
	Skipped          *uint64                      `json:"skipped"`
	Keys             *uint64                      `json:"keys"`
	Prefiltered      uint64                       `json:"prefiltered"`
	Distinct         *uint64                      `json:"distinct"`
	Dropped          *uint64                      `json:"dropped"`
	MalformedBy      map[string]uint64            `json:"malformed_by"`
	SkippedBy        map[string]uint64            `json:"skipped_by"`
	DroppedBy        map[string]uint64            `json:"dropped_by"`
	Final            *bool                        `json:"final"`
	Observer         string                       `json:"observer"`
	Filter           string                       `json:"filter"`
	Key              *string                      `json:"key"`
	Late             uint64                       `json:"late"`
	LateBy           map[string]uint64            `json:"late_by"`
	DistinctEstimate uint64                       `json:"distinct_estimate"`
	Sketch           *string                      `json:"sketch"`
	ExportDropped    map[string]map[string]uint64 `json:"export_dropped"`
	RunTotals        json.RawMessage              `json:"run_totals"`
}

// ParseSummary reads one summary line (without its newline) into s. The
// run totals line is ErrRunTotals.
func ParseSummary(line []byte, s *Summary) error {
	if t := bytes.TrimLeft(line, " \t\r"); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrSummary)
	}
	var in summaryIn
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("%w: %v", ErrSummary, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: more after the JSON object", ErrSummary)
	}
	if len(in.RunTotals) > 0 && in.RunTotals[0] == '{' && in.WindowStart == nil {
		return ErrRunTotals
	}
	for _, f := range []struct {
		name    string
		missing bool
	}{
		{"window_start", in.WindowStart == nil}, {"window_end", in.WindowEnd == nil},
		{"packets", in.Packets == nil}, {"malformed", in.Malformed == nil}, {"skipped", in.Skipped == nil},
		{"keys", in.Keys == nil}, {"distinct", in.Distinct == nil}, {"dropped", in.Dropped == nil},
		{"final", in.Final == nil},
	} {
		if f.missing {
			return fmt.Errorf("%w: no %s", ErrSummary, f.name)
		}
	}
	start, err := parseTime("window_start", *in.WindowStart)
	if err != nil {
		return err
	}
	end, err := parseTime("window_end", *in.WindowEnd)
	if err != nil {
		return err
	}
	if end < start {
		return fmt.Errorf("%w: window_end %s is before window_start %s", ErrSummary, *in.WindowEnd, *in.WindowStart)
	}
	*s = Summary{Observer: in.Observer, Filter: in.Filter, ExportDropped: in.ExportDropped}
	w := &s.WindowSummary
	w.StartNs, w.EndNs = start, end
	w.Packets, w.Malformed, w.Skipped = *in.Packets, *in.Malformed, *in.Skipped
	w.Keys, w.Prefiltered, w.Distinct, w.Dropped = *in.Keys, in.Prefiltered, *in.Distinct, *in.Dropped
	w.MalformedBy, w.SkippedBy, w.DroppedBy = in.MalformedBy, in.SkippedBy, in.DroppedBy
	w.Final = *in.Final
	w.Late, w.LateBy = in.Late, in.LateBy
	w.DistinctEstimate = in.DistinctEstimate
	if in.Key != nil {
		spec, err := flow.ParseKeySpec(*in.Key)
		if err != nil {
			return fmt.Errorf("%w: key: %w", ErrSummary, err)
		}
		s.Key, s.Prefix = spec.Kind, spec.Mask
	}
	if in.Sketch != nil {
		if w.Sketch, err = base64.StdEncoding.DecodeString(*in.Sketch); err != nil {
			return fmt.Errorf("%w: sketch is not standard base64: %v", ErrSummary, err)
		}
	}
	return nil
}

// parseTime reads an RFC 3339 time (as appendTime writes it) into Unix ns.
// Times outside the years 1678 to 2262, which Unix ns cannot hold, are
// errors.
func parseTime(field, v string) (int64, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q is not an RFC 3339 time", ErrSummary, field, v)
	}
	ns := t.UnixNano()
	if !time.Unix(0, ns).Equal(t) {
		return 0, fmt.Errorf("%w: %s %q is out of range", ErrSummary, field, v)
	}
	return ns, nil
}

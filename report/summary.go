package report

import (
	"encoding/json"
	"io"

	"github.com/flowdedup/flowdedup/pipeline"
)

// A SummaryWriter writes one JSON line per closed window (the --summary
// file of DESIGN.md section 6):
//
//	{"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T01:00:00Z","packets":1000,"malformed":3,"skipped":2,"keys":995,"prefiltered":0,"distinct":120,"dropped":0,"malformed_by":{"bad_header":1,"truncated":2},"skipped_by":{"not_ip":2},"dropped_by":{},"final":false}
//
// Times are RFC 3339 in UTC as in records. skipped counts frames without an
// IP key (pipeline.WindowSummary.Skipped). malformed_by, skipped_by and
// dropped_by map reasons to counts, in sorted order, and are {} rather than
// null when empty; final is true for the last window of a run.
//
// Each line goes to the destination in one Write as soon as its window
// closes: nothing is buffered, so a summary is on disk (in the page cache;
// there is no fsync) when Window returns. The first write error is returned
// by every later call.
type SummaryWriter struct {
	out wholeWriter
}

// NewSummaryWriter returns a SummaryWriter writing to w. It does not close w.
func NewSummaryWriter(w io.Writer) *SummaryWriter {
	return &SummaryWriter{out: wholeWriter{w: w, op: "summary"}}
}

// summaryLine is the JSON form of a pipeline.WindowSummary. Field order is
// the order of the line.
type summaryLine struct {
	WindowStart string            `json:"window_start"`
	WindowEnd   string            `json:"window_end"`
	Packets     uint64            `json:"packets"`
	Malformed   uint64            `json:"malformed"`
	Skipped     uint64            `json:"skipped"`
	Keys        uint64            `json:"keys"`
	Prefiltered uint64            `json:"prefiltered"`
	Distinct    uint64            `json:"distinct"`
	Dropped     uint64            `json:"dropped"`
	MalformedBy map[string]uint64 `json:"malformed_by"`
	SkippedBy   map[string]uint64 `json:"skipped_by"`
	DroppedBy   map[string]uint64 `json:"dropped_by"`
	Final       bool              `json:"final"`
}

// orEmpty returns m, or an empty map for nil: {} reads better than null.
func orEmpty(m map[string]uint64) map[string]uint64 {
	if m == nil {
		return map[string]uint64{}
	}
	return m
}

// Window writes the summary of the closed window s.
func (sw *SummaryWriter) Window(s *pipeline.WindowSummary) error {
	if sw.out.err != nil {
		return sw.out.err
	}
	line := summaryLine{
		WindowStart: string(appendTime(nil, s.StartNs)),
		WindowEnd:   string(appendTime(nil, s.EndNs)),
		Packets:     s.Packets,
		Malformed:   s.Malformed,
		Skipped:     s.Skipped,
		Keys:        s.Keys,
		Prefiltered: s.Prefiltered,
		Distinct:    s.Distinct,
		Dropped:     s.Dropped,
		MalformedBy: orEmpty(s.MalformedBy),
		SkippedBy:   orEmpty(s.SkippedBy),
		DroppedBy:   orEmpty(s.DroppedBy),
		Final:       s.Final,
	}
	b, err := json.Marshal(&line) // cannot fail: strings and numbers only
	if err != nil {
		return err
	}
	return sw.out.write(append(b, '\n'), 1)
}

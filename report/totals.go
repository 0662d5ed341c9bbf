package report

import (
	"encoding/json"
	"maps"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// RunTotals are a run's totals, which the Reporter's Close hands to the
// summary outputs after the export drain (and writes as text on stderr):
// the sums of every window's counts, the input files found damaged, and
// what each export delivered and lost, by reason, shutdown losses
// included, which no window summary can carry (they are known only when
// the drain ends).
type RunTotals struct {
	// Windows counts the summaries; the counts are their sums. StartNs is
	// the first window's start, EndNs the last window's end (0 when there
	// was none), Final is not used.
	record.WindowSummary
	Windows uint64

	Observer string
	Filter   string
	Key      flow.KeyKind
	Prefix   flow.Mask // the prefix lengths of the keys (Summary.Prefix)
	// DamagedFiles counts input files found damaged, by reason (replay:
	// "empty", "truncated", "damaged"); nil for other runs.
	DamagedFiles map[string]uint64
	// Exports are the export destinations' counts once they were closed.
	Exports []record.ExportStats
}

// Lost returns how many records and window summaries the exports did not
// deliver, over every destination and reason (what is left in a spool for
// the next run is not lost).
func (t *RunTotals) Lost() uint64 {
	var n uint64
	for _, st := range t.Exports {
		for _, d := range st.Dropped {
			n += d
		}
	}
	return n
}

// A totalsDestination is a synchronous Destination that also takes the run
// totals, once, after the export drain and before Close (the summary
// outputs).
type totalsDestination interface {
	record.Destination
	Totals(t *RunTotals) error
}

var (
	_ totalsDestination = (*SummaryWriter)(nil)
	_ totalsDestination = (*SummaryFiles)(nil)
)

// The JSON line of the run totals, the last line of a --summary output:
//
//	{"run_totals":{"windows":2,"window_start":"...","window_end":"...","packets":1000,...,"exports":{"ipfix://127.0.0.1:4739":{"sent":0,"sent_windows":0,"dropped":1514,"dropped_by":{"shutdown":1514},"spooled":0,"spooled_windows":0}}}}
//
// Its one field, run_totals, is no field of a window summary, so that a
// reader of summaries tells it apart (SummaryReader skips it) and a tool
// that sums a field of every line (jq '.packets') does not count the run
// twice.
type runTotalsLine struct {
	RunTotals runTotalsJSON `json:"run_totals"`
}

type runTotalsJSON struct {
	Windows      uint64                      `json:"windows"`
	WindowStart  string                      `json:"window_start,omitempty"`
	WindowEnd    string                      `json:"window_end,omitempty"`
	Packets      uint64                      `json:"packets"`
	Malformed    uint64                      `json:"malformed"`
	Skipped      uint64                      `json:"skipped"`
	Keys         uint64                      `json:"keys"`
	Prefiltered  uint64                      `json:"prefiltered"`
	Distinct     uint64                      `json:"distinct"`
	Dropped      uint64                      `json:"dropped"`
	MalformedBy  map[string]uint64           `json:"malformed_by"`
	SkippedBy    map[string]uint64           `json:"skipped_by"`
	DroppedBy    map[string]uint64           `json:"dropped_by"`
	Late         uint64                      `json:"late"`
	LateBy       map[string]uint64           `json:"late_by"`
	Observer     string                      `json:"observer,omitempty"`
	Filter       string                      `json:"filter,omitempty"`
	Key          string                      `json:"key,omitempty"`
	DamagedFiles map[string]uint64           `json:"damaged_files,omitempty"`
	Exports      map[string]exportTotalsJSON `json:"exports"`
}

type exportTotalsJSON struct {
	Sent           uint64            `json:"sent"`
	SentWindows    uint64            `json:"sent_windows"`
	Dropped        uint64            `json:"dropped"`
	DroppedBy      map[string]uint64 `json:"dropped_by"`
	Spooled        int               `json:"spooled"`
	SpooledWindows int               `json:"spooled_windows"`
}

// AppendRunTotals appends the JSON line of t, newline included: the line
// a --summary output ends with (see runTotalsLine).
func AppendRunTotals(b []byte, t *RunTotals) []byte {
	j := runTotalsJSON{
		Windows:      t.Windows,
		Packets:      t.Packets,
		Malformed:    t.Malformed,
		Skipped:      t.Skipped,
		Keys:         t.Keys,
		Prefiltered:  t.Prefiltered,
		Distinct:     t.Distinct,
		Dropped:      t.Dropped,
		MalformedBy:  record.OrEmpty(t.MalformedBy),
		SkippedBy:    record.OrEmpty(t.SkippedBy),
		DroppedBy:    record.OrEmpty(t.DroppedBy),
		Late:         t.Late,
		LateBy:       record.OrEmpty(t.LateBy),
		Observer:     t.Observer,
		Filter:       t.Filter,
		Key:          record.KeyName(t.Key, t.Prefix),
		DamagedFiles: t.DamagedFiles,
		Exports:      make(map[string]exportTotalsJSON, len(t.Exports)),
	}
	if t.Windows > 0 {
		j.WindowStart = string(appendTime(nil, t.StartNs))
		j.WindowEnd = string(appendTime(nil, t.EndNs))
	}
	for _, st := range t.Exports {
		var dropped uint64
		for _, n := range st.Dropped {
			dropped += n
		}
		by := make(map[string]uint64)
		for r, n := range st.Dropped {
			if n != 0 {
				by[r] = n
			}
		}
		j.Exports[st.Dest] = exportTotalsJSON{
			Sent: st.Sent, SentWindows: st.SentWindows, Dropped: dropped, DroppedBy: by,
			Spooled: st.Spooled, SpooledWindows: st.SpooledWins,
		}
	}
	out, err := json.Marshal(runTotalsLine{RunTotals: j})
	if err != nil {
		panic("report: encoding the run totals: " + err.Error()) // strings, numbers and maps of them
	}
	return append(append(b, out...), '\n')
}

// runTotals returns the Reporter's totals, with the exports' counts (read
// after they were closed) and the damaged files.
func (r *Reporter) runTotals() *RunTotals {
	t := &RunTotals{WindowSummary: r.totals, Windows: r.windows, Observer: r.sum.Observer, Filter: r.sum.Filter, Key: r.sum.Key, Prefix: r.sum.Prefix}
	t.StartNs, t.EndNs = r.firstNs, r.lastNs
	t.MalformedBy, t.SkippedBy = maps.Clone(r.totals.MalformedBy), maps.Clone(r.totals.SkippedBy)
	t.DroppedBy, t.LateBy = maps.Clone(r.totals.DroppedBy), maps.Clone(r.totals.LateBy)
	if r.damaged != nil {
		t.DamagedFiles = r.damaged()
	}
	for _, q := range r.exports {
		t.Exports = append(t.Exports, q.Stats())
	}
	return t
}

package record

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/flowdedup/flowdedup/flow"
)

// Summary is a closed window's summary as the Reporter writes it: the
// pipeline's counts and what the Reporter adds to them.
type Summary struct {
	WindowSummary

	// Observer names this observation point (--observer; default the host
	// name), so that summaries of many routers can be told apart.
	Observer string
	// Filter is the effective filter spec of every shard.
	Filter string
	// Key is the key kind the window counts (--key), so that summaries
	// counting different things are not merged. Zero (not a valid kind)
	// means unknown: a summary of a flowdedup that did not write it.
	Key flow.KeyKind
	// Prefix is the prefix lengths the keys' addresses are masked to
	// (--prefix), the zero Mask for hosts: with Key, what the window
	// counts.
	Prefix flow.Mask
	// ExportDropped counts, for this window, what each export destination
	// could not deliver: by destination (its URL without credentials), then
	// by reason (queue_full, spool_full, rejected, ...). Empty when nothing
	// was lost.
	ExportDropped map[string]map[string]uint64
	// Collect holds what flowdedup collect counted since the previous
	// summary (Config.Annotate fills it); nil for replay and run.
	Collect *CollectCounts
	// Spread is the window's top fan-out and fan-in hosts (--spread;
	// docs/spread.md), nil when not asked for.
	Spread *Spread
}

// Spread is a window's hosts that appear in the most distinct keys
// (--spread, package spread): the sources in the most keys (with --key
// pair, those that contacted the most distinct destinations; with
// 5tuple, in the most distinct flows) and the destinations likewise. A
// side is nil when not asked for, and an empty non-nil list when asked
// for in a window without keys. Entries are largest Distinct first, equal
// ones in address order.
type Spread struct {
	Src []SpreadEntry
	Dst []SpreadEntry
}

// SpreadEntry is one host of a Spread: its address (or network, in CIDR
// form, with --prefix), written as the records write it, and its count of
// distinct keys in the window, Distinct, which never undercounts and
// overcounts by at most Error (the Space-Saving guarantee): the true
// count is between Distinct-Error and Distinct. Error is 0 when the
// counters had room for every host of the window.
type SpreadEntry struct {
	Addr     string `json:"addr"`
	Distinct uint64 `json:"distinct"`
	Error    uint64 `json:"error"`
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
	Spread           *spreadLine                  `json:"spread,omitempty"`
}

// spreadLine is the JSON form of a Spread: a side not asked for is left
// out, one asked for and empty is [].
type spreadLine struct {
	Src *[]SpreadEntry `json:"src,omitempty"`
	Dst *[]SpreadEntry `json:"dst,omitempty"`
}

func newSpreadLine(sp *Spread) *spreadLine {
	if sp == nil {
		return nil
	}
	var l spreadLine
	if sp.Src != nil {
		l.Src = &sp.Src
	}
	if sp.Dst != nil {
		l.Dst = &sp.Dst
	}
	return &l
}

// OrEmpty returns m, or an empty map for nil: {} reads better than null in
// a summary's and the run totals' by-reason maps.
func OrEmpty(m map[string]uint64) map[string]uint64 {
	if m == nil {
		return map[string]uint64{}
	}
	return m
}

// KeyName returns the --key spelling of k, followed by /V4LEN,V6LEN for
// keys by network, or "" (the field left out) for an invalid kind: the key
// field of a summary and of the run totals.
func KeyName(k flow.KeyKind, m flow.Mask) string {
	if !k.IsValid() {
		return ""
	}
	return flow.KeySpec{Kind: k, Mask: m}.String()
}

// AppendSummary appends the JSON line of s, newline included: the line
// --summary writes, which export's spool files hold too.
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
		MalformedBy:      OrEmpty(s.MalformedBy),
		SkippedBy:        OrEmpty(s.SkippedBy),
		DroppedBy:        OrEmpty(s.DroppedBy),
		Final:            s.Final,
		Observer:         s.Observer,
		Filter:           s.Filter,
		Key:              KeyName(s.Key, s.Prefix),
		Late:             s.Late,
		LateBy:           OrEmpty(s.LateBy),
		DistinctEstimate: s.DistinctEstimate,
		Sketch:           s.Sketch,
		ExportDropped:    dropped,
		Collect:          s.Collect,
		Spread:           newSpreadLine(s.Spread),
	}
	j, err := json.Marshal(&line)
	if err != nil {
		// Strings, numbers, bytes and maps of them: Marshal cannot fail
		// (invalid UTF-8 in a string is replaced, not an error).
		panic("record: encoding a summary: " + err.Error())
	}
	b = append(b, j...)
	return append(b, '\n')
}

// ErrSummary is wrapped by the errors of a SummaryReader for a line that
// is not a summary.
var ErrSummary = errors.New("malformed summary")

// ErrRunTotals is returned by ParseSummary for the run totals line
// ({"run_totals":{...}}, see SummaryWriter): a line of a summary output
// that is no window's summary. SummaryReader skips it.
var ErrRunTotals = errors.New("record: the run totals, not a window summary")

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
	Spread           *spreadLine                  `json:"spread"`
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
	if in.Spread != nil {
		if s.Spread, err = parseSpread(in.Spread); err != nil {
			return err
		}
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

// parseSpread checks a summary's spread member: each address an IP address
// or a network in CIDR form, no error above its count, and the entries by
// count, largest first. A side given as [] (asked for, nothing seen) is a
// non-nil empty list; null or left out is nil (not asked for).
func parseSpread(l *spreadLine) (*Spread, error) {
	sp := &Spread{}
	for _, side := range []struct {
		name string
		in   *[]SpreadEntry
		out  *[]SpreadEntry
	}{{"src", l.Src, &sp.Src}, {"dst", l.Dst, &sp.Dst}} {
		if side.in == nil {
			continue
		}
		list := *side.in
		if list == nil {
			list = []SpreadEntry{}
		}
		for i, e := range list {
			if _, err := netip.ParseAddr(e.Addr); err != nil {
				if _, perr := netip.ParsePrefix(e.Addr); perr != nil {
					return nil, fmt.Errorf("%w: spread %s[%d]: addr %q is neither an IP address nor a network", ErrSummary, side.name, i, e.Addr)
				}
			}
			if e.Error > e.Distinct {
				return nil, fmt.Errorf("%w: spread %s[%d]: error %d above distinct %d", ErrSummary, side.name, i, e.Error, e.Distinct)
			}
			if i > 0 && list[i-1].Distinct < e.Distinct {
				return nil, fmt.Errorf("%w: spread %s: not largest first (%d after %d)", ErrSummary, side.name, e.Distinct, list[i-1].Distinct)
			}
		}
		*side.out = list
	}
	return sp, nil
}

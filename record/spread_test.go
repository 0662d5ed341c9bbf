package record

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// base is a summary line as flowdedup wrote it before --spread, without
// its closing brace: the spread member goes after everything else.
const base = `{"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T01:00:00Z","packets":10,"malformed":0,"skipped":0,"keys":10,"prefiltered":0,"distinct":7,"dropped":0,"malformed_by":{},"skipped_by":{},"dropped_by":{},"final":true,"key":"pair","late":0,"late_by":{},"distinct_estimate":7,"export_dropped":{}`

func baseSummary() Summary {
	var s Summary
	s.StartNs, s.EndNs = 1767225600e9, 1767229200e9
	s.Packets, s.Keys, s.Distinct, s.DistinctEstimate, s.Final = 10, 10, 7, 7, true
	s.Key = 3 // flow.KeyPair
	s.MalformedBy, s.SkippedBy, s.DroppedBy, s.LateBy = map[string]uint64{}, map[string]uint64{}, map[string]uint64{}, map[string]uint64{}
	s.ExportDropped = map[string]map[string]uint64{}
	return s
}

// TestSpreadLine: the spread member is the line's last, as written by
// hand here; a side not asked for is left out, an empty one is []; a
// summary without Spread writes the line of before, byte for byte; each
// reads back as it was.
func TestSpreadLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spread *Spread
		want   string
	}{
		{"none", nil, base + "}\n"},
		{"both", &Spread{
			Src: []SpreadEntry{{Addr: "10.0.0.1", Distinct: 5}, {Addr: "10.0.0.2", Distinct: 1}},
			Dst: []SpreadEntry{{Addr: "2001:db8::1", Distinct: 3, Error: 1}},
		}, base + `,"spread":{"src":[{"addr":"10.0.0.1","distinct":5,"error":0},{"addr":"10.0.0.2","distinct":1,"error":0}],"dst":[{"addr":"2001:db8::1","distinct":3,"error":1}]}}` + "\n"},
		{"dst only, empty", &Spread{Dst: []SpreadEntry{}}, base + `,"spread":{"dst":[]}}` + "\n"},
		{"networks", &Spread{Src: []SpreadEntry{{Addr: "10.1.2.0/24", Distinct: 9}}}, base + `,"spread":{"src":[{"addr":"10.1.2.0/24","distinct":9,"error":0}]}}` + "\n"},
	} {
		s := baseSummary()
		s.Spread = tc.spread
		got := string(AppendSummary(nil, &s))
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
			continue
		}
		var back Summary
		if err := ParseSummary([]byte(strings.TrimSuffix(got, "\n")), &back); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(back.Spread, tc.spread) {
			t.Errorf("%s: read back %+v, want %+v", tc.name, back.Spread, tc.spread)
		}
	}
}

func TestSpreadLineErrors(t *testing.T) {
	for _, member := range []string{
		`{"src":[{"addr":"example.com","distinct":1,"error":0}]}`,
		`{"src":[{"addr":"10.0.0.1","distinct":1,"error":2}]}`,
		`{"dst":[{"addr":"10.0.0.1","distinct":1,"error":0},{"addr":"10.0.0.2","distinct":2,"error":0}]}`,
		`{"dst":[{"addr":"10.0.0.1","distinct":-1,"error":0}]}`,
		`{"dst":{"addr":"10.0.0.1"}}`,
		`[1]`,
	} {
		var s Summary
		if err := ParseSummary([]byte(base+`,"spread":`+member+`}`), &s); !errors.Is(err, ErrSummary) {
			t.Errorf("spread %s: %v, want ErrSummary", member, err)
		}
	}
	// null or {} reads as asked for nothing, never a panic.
	for _, member := range []string{`null`, `{}`, `{"src":null}`} {
		var s Summary
		if err := ParseSummary([]byte(base+`,"spread":`+member+`}`), &s); err != nil {
			t.Errorf("spread %s: %v", member, err)
		}
		if s.Spread != nil && (s.Spread.Src != nil || s.Spread.Dst != nil) {
			t.Errorf("spread %s: %+v", member, s.Spread)
		}
	}
}

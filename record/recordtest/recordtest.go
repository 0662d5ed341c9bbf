// Package recordtest holds fixtures of package record for the tests of the
// packages that write and read its values (report's summary lines,
// export's spool files), as net/http/httptest serves net/http's: one
// fixture, so that a field added to record.Summary is added to every
// round trip's test at once.
package recordtest

import (
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// Unset lists the fields of record.Summary that FullSummary leaves unset:
// Windowed (a summary line always has a window), Prefix (--key with
// prefix lengths), Collect (flowdedup collect's counters) and Spread
// (--spread), whose own tests set them.
var Unset = []string{"Windowed", "Prefix", "Collect", "Spread"}

// FullSummary returns a window summary with every field set (and every
// map and slice not empty), so that a round trip that lost one would
// show, but those of Unset, which the tests of what they add set
// themselves. Each call returns a copy of its own: a test may change it.
func FullSummary() record.Summary {
	return record.Summary{
		WindowSummary: record.WindowSummary{
			StartNs: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(),
			EndNs:   time.Date(2026, 1, 1, 0, 1, 0, 1, time.UTC).UnixNano(),
			Packets: 1010, Malformed: 3, Keys: 990, Distinct: 120, Dropped: 7,
			MalformedBy: map[string]uint64{"truncated": 2, "bad_header": 1},
			DroppedBy:   map[string]uint64{"ring_full": 7},
			Final:       true,
			Skipped:     5, SkippedBy: map[string]uint64{"not_ip": 5},
			Prefiltered: 40,
			Late:        5, LateBy: map[string]uint64{"window_closed": 5},
			DistinctEstimate: 121,
			Sketch:           []byte{0x01, 0x0e, 0x00, 0xff, 0x80},
		},
		Observer: "r1.example.net",
		Filter:   "qht:mem=64MiB,buckets=4,fpbits=12",
		Key:      flow.KeyDst,
		ExportDropped: map[string]map[string]uint64{
			"ipfix://127.0.0.1:4739": {"queue_full": 3, "shutdown": 1},
		},
	}
}

package report_test

import (
	"net/netip"
	"os"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/report"
)

func ExampleNewRecordWriter() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := record.Record{
		Key: flow.MakeKey(flow.Key5Tuple,
			netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 6, 1234, 80),
		TimeNs:      start.Add(1500 * time.Millisecond).UnixNano(),
		WindowNs:    start.UnixNano(),
		WindowEndNs: start.Add(time.Hour).UnixNano(),
		Windowed:    true,
	}
	for _, format := range report.Formats {
		w, err := report.NewRecordWriter(os.Stdout, format, flow.Key5Tuple)
		if err != nil {
			panic(err)
		}
		w.Record(&rec)
		if err := w.Flush(); err != nil {
			panic(err)
		}
	}
	// Output:
	// {"ts":"2026-01-01T00:00:01.5Z","src":"10.0.0.1","dst":"10.0.0.2","proto":6,"proto_name":"tcp","sport":1234,"dport":80,"window":"2026-01-01T00:00:00Z"}
	// ts,src,dst,proto,proto_name,sport,dport,window
	// 2026-01-01T00:00:01.5Z,10.0.0.1,10.0.0.2,6,tcp,1234,80,2026-01-01T00:00:00Z
	// 2026-01-01T00:00:01.5Z  tcp 10.0.0.1:1234 > 10.0.0.2:80
}

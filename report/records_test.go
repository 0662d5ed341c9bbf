package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

func at(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UnixNano()
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// recordCase is one record with its expected form in every format, written
// by hand from docs/architecture.md#records-and-summaries and the format
// comments, not by running
// the writer.
type recordCase struct {
	name   string
	rec    record.Record
	jsonl  string
	csvRow string
	text   string
}

// windowed returns rec in the hour-long window starting at start.
func windowed(rec record.Record, start string) record.Record {
	rec.WindowNs = at(start)
	rec.WindowEndNs = rec.WindowNs + int64(time.Hour)
	rec.Windowed = true
	return rec
}

var recordCases = []recordCase{
	{
		name: "src/v4/window",
		rec: windowed(record.Record{
			Key:    flow.MakeKey(flow.KeySrc, addr("10.0.0.1"), addr("10.0.0.2"), 6, 1234, 80),
			TimeNs: at("2026-01-01T00:00:01.5Z"),
		}, "2026-01-01T00:00:00Z"),
		jsonl:  `{"ts":"2026-01-01T00:00:01.5Z","src":"10.0.0.1","window":"2026-01-01T00:00:00Z"}`,
		csvRow: `2026-01-01T00:00:01.5Z,10.0.0.1,2026-01-01T00:00:00Z`,
		text:   `2026-01-01T00:00:01.5Z  10.0.0.1`,
	},
	{
		name: "src/v4-mapped-v6",
		rec: record.Record{
			Key:    flow.MakeKey(flow.KeySrc, addr("::ffff:10.0.0.1"), netip.Addr{}, 0, 0, 0),
			TimeNs: at("2026-01-01T00:00:01Z"),
		},
		jsonl:  `{"ts":"2026-01-01T00:00:01Z","src":"::ffff:10.0.0.1"}`,
		csvRow: `2026-01-01T00:00:01Z,::ffff:10.0.0.1,`,
		text:   `2026-01-01T00:00:01Z  ::ffff:10.0.0.1`,
	},
	{
		name: "dst/v6/nowindow",
		rec: record.Record{
			Key:    flow.MakeKey(flow.KeyDst, addr("2001:db8::1"), addr("2001:db8::2"), 17, 53, 53),
			TimeNs: at("2026-01-01T00:00:01.000000001Z"),
		},
		jsonl:  `{"ts":"2026-01-01T00:00:01.000000001Z","dst":"2001:db8::2"}`,
		csvRow: `2026-01-01T00:00:01.000000001Z,2001:db8::2,`,
		text:   `2026-01-01T00:00:01.000000001Z  2001:db8::2`,
	},
	{
		name: "pair/v4/window",
		rec: windowed(record.Record{
			Key:    flow.MakeKey(flow.KeyPair, addr("10.0.0.1"), addr("10.0.0.2"), 0, 0, 0),
			TimeNs: at("2026-01-01T00:59:59Z"),
		}, "2026-01-01T00:00:00Z"),
		jsonl:  `{"ts":"2026-01-01T00:59:59Z","src":"10.0.0.1","dst":"10.0.0.2","window":"2026-01-01T00:00:00Z"}`,
		csvRow: `2026-01-01T00:59:59Z,10.0.0.1,10.0.0.2,2026-01-01T00:00:00Z`,
		text:   `2026-01-01T00:59:59Z  10.0.0.1 > 10.0.0.2`,
	},
	{
		name: "pair/v6",
		rec: record.Record{
			Key:    flow.MakeKey(flow.KeyPair, addr("2001:db8::1"), addr("2001:db8:0:1::"), 0, 0, 0),
			TimeNs: at("2026-02-28T12:00:00.01Z"),
		},
		jsonl:  `{"ts":"2026-02-28T12:00:00.01Z","src":"2001:db8::1","dst":"2001:db8:0:1::"}`,
		csvRow: `2026-02-28T12:00:00.01Z,2001:db8::1,2001:db8:0:1::,`,
		text:   `2026-02-28T12:00:00.01Z  2001:db8::1 > 2001:db8:0:1::`,
	},
	{
		name: "5tuple/tcp/v4/window",
		rec: windowed(record.Record{
			Key:    flow.MakeKey(flow.Key5Tuple, addr("10.0.0.1"), addr("10.0.0.2"), 6, 1234, 80),
			TimeNs: at("2026-01-01T00:00:01.5Z"),
		}, "2026-01-01T00:00:00Z"),
		jsonl:  `{"ts":"2026-01-01T00:00:01.5Z","src":"10.0.0.1","dst":"10.0.0.2","proto":6,"proto_name":"tcp","sport":1234,"dport":80,"window":"2026-01-01T00:00:00Z"}`,
		csvRow: `2026-01-01T00:00:01.5Z,10.0.0.1,10.0.0.2,6,tcp,1234,80,2026-01-01T00:00:00Z`,
		text:   `2026-01-01T00:00:01.5Z  tcp 10.0.0.1:1234 > 10.0.0.2:80`,
	},
	{
		name: "5tuple/udp/v6",
		rec: record.Record{
			Key:    flow.MakeKey(flow.Key5Tuple, addr("2001:db8::1"), addr("2001:db8::2"), 17, 53, 5353),
			TimeNs: at("2026-03-04T05:06:07.123456789Z"),
		},
		jsonl:  `{"ts":"2026-03-04T05:06:07.123456789Z","src":"2001:db8::1","dst":"2001:db8::2","proto":17,"proto_name":"udp","sport":53,"dport":5353}`,
		csvRow: `2026-03-04T05:06:07.123456789Z,2001:db8::1,2001:db8::2,17,udp,53,5353,`,
		text:   `2026-03-04T05:06:07.123456789Z  udp [2001:db8::1]:53 > [2001:db8::2]:5353`,
	},
	{
		name: "5tuple/icmp6/v6/noports/window",
		rec: windowed(record.Record{
			Key:    flow.MakeKey(flow.Key5Tuple, addr("fe80::1"), addr("ff02::1"), 58, 0, 0),
			TimeNs: at("2026-01-01T00:00:02Z"),
		}, "2026-01-01T00:00:00Z"),
		jsonl:  `{"ts":"2026-01-01T00:00:02Z","src":"fe80::1","dst":"ff02::1","proto":58,"proto_name":"icmp6","window":"2026-01-01T00:00:00Z"}`,
		csvRow: `2026-01-01T00:00:02Z,fe80::1,ff02::1,58,icmp6,,,2026-01-01T00:00:00Z`,
		text:   `2026-01-01T00:00:02Z  icmp6 fe80::1 > ff02::1`,
	},
	{
		name: "5tuple/icmp/v4/noports",
		rec: record.Record{
			Key:    flow.MakeKey(flow.Key5Tuple, addr("192.0.2.1"), addr("192.0.2.254"), 1, 0, 0),
			TimeNs: at("2026-01-01T00:00:02.75Z"),
		},
		jsonl:  `{"ts":"2026-01-01T00:00:02.75Z","src":"192.0.2.1","dst":"192.0.2.254","proto":1,"proto_name":"icmp"}`,
		csvRow: `2026-01-01T00:00:02.75Z,192.0.2.1,192.0.2.254,1,icmp,,,`,
		text:   `2026-01-01T00:00:02.75Z  icmp 192.0.2.1 > 192.0.2.254`,
	},
	{
		name: "5tuple/gre/v4/named",
		rec: record.Record{
			Key:    flow.MakeKey(flow.Key5Tuple, addr("192.0.2.1"), addr("198.51.100.7"), 47, 0, 0),
			TimeNs: at("2026-01-01T00:00:03.25Z"),
		},
		jsonl:  `{"ts":"2026-01-01T00:00:03.25Z","src":"192.0.2.1","dst":"198.51.100.7","proto":47,"proto_name":"gre"}`,
		csvRow: `2026-01-01T00:00:03.25Z,192.0.2.1,198.51.100.7,47,gre,,,`,
		text:   `2026-01-01T00:00:03.25Z  gre 192.0.2.1 > 198.51.100.7`,
	},
	{
		name: "5tuple/unassigned/v4/unnamed",
		rec: record.Record{
			Key:    flow.MakeKey(flow.Key5Tuple, addr("192.0.2.1"), addr("198.51.100.7"), 200, 0, 0),
			TimeNs: at("2026-01-01T00:00:03.25Z"),
		},
		jsonl:  `{"ts":"2026-01-01T00:00:03.25Z","src":"192.0.2.1","dst":"198.51.100.7","proto":200}`,
		csvRow: `2026-01-01T00:00:03.25Z,192.0.2.1,198.51.100.7,200,,,,`,
		text:   `2026-01-01T00:00:03.25Z  200 192.0.2.1 > 198.51.100.7`,
	},
	{
		// The longest record: full-length IPv6 addresses, 5-digit ports,
		// nine fractional digits and a window.
		name: "5tuple/sctp/v6/longest",
		rec: windowed(record.Record{
			Key: flow.MakeKey(flow.Key5Tuple, addr("2001:db8:ffff:ffff:ffff:ffff:ffff:fffe"),
				addr("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"), 132, 65535, 65534),
			TimeNs: at("2026-12-31T23:59:59.999999999Z"),
		}, "2026-12-31T23:00:00Z"),
		jsonl:  `{"ts":"2026-12-31T23:59:59.999999999Z","src":"2001:db8:ffff:ffff:ffff:ffff:ffff:fffe","dst":"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff","proto":132,"proto_name":"sctp","sport":65535,"dport":65534,"window":"2026-12-31T23:00:00Z"}`,
		csvRow: `2026-12-31T23:59:59.999999999Z,2001:db8:ffff:ffff:ffff:ffff:ffff:fffe,2001:db8:ffff:ffff:ffff:ffff:ffff:ffff,132,sctp,65535,65534,2026-12-31T23:00:00Z`,
		text:   `2026-12-31T23:59:59.999999999Z  sctp [2001:db8:ffff:ffff:ffff:ffff:ffff:fffe]:65535 > [2001:db8:ffff:ffff:ffff:ffff:ffff:ffff]:65534`,
	},
	{
		// A window that starts at the epoch is still a window: "windows
		// off" is Windowed false, not WindowNs == 0.
		name: "src/v4/epoch-window",
		rec: windowed(record.Record{
			Key:    flow.MakeKey(flow.KeySrc, addr("10.1.2.3"), netip.Addr{}, 0, 0, 0),
			TimeNs: 1000,
		}, "1970-01-01T00:00:00Z"),
		jsonl:  `{"ts":"1970-01-01T00:00:00.000001Z","src":"10.1.2.3","window":"1970-01-01T00:00:00Z"}`,
		csvRow: `1970-01-01T00:00:00.000001Z,10.1.2.3,1970-01-01T00:00:00Z`,
		text:   `1970-01-01T00:00:00.000001Z  10.1.2.3`,
	},
	{
		// A window that ends at the epoch, [-1h, 0), is a window too:
		// its end is 0 (issue 25: a v5 record 1 ms before 1970 lost
		// its window and stopped a time pattern).
		name: "src/v4/window-ending-at-epoch",
		rec: windowed(record.Record{
			Key:    flow.MakeKey(flow.KeySrc, addr("10.1.2.3"), netip.Addr{}, 0, 0, 0),
			TimeNs: -1_000_000,
		}, "1969-12-31T23:00:00Z"),
		jsonl:  `{"ts":"1969-12-31T23:59:59.999Z","src":"10.1.2.3","window":"1969-12-31T23:00:00Z"}`,
		csvRow: `1969-12-31T23:59:59.999Z,10.1.2.3,1969-12-31T23:00:00Z`,
		text:   `1969-12-31T23:59:59.999Z  10.1.2.3`,
	},
	{
		// The last window Unix ns reach: its end saturates at
		// math.MaxInt64.
		name: "dst/v4/last-window",
		rec: record.Record{
			Key:      flow.MakeKey(flow.KeyDst, netip.Addr{}, addr("10.1.2.3"), 0, 0, 0),
			TimeNs:   math.MaxInt64,
			WindowNs: at("2262-04-11T23:00:00Z"), WindowEndNs: math.MaxInt64, Windowed: true,
		},
		jsonl:  `{"ts":"2262-04-11T23:47:16.854775807Z","dst":"10.1.2.3","window":"2262-04-11T23:00:00Z"}`,
		csvRow: `2262-04-11T23:47:16.854775807Z,10.1.2.3,2262-04-11T23:00:00Z`,
		text:   `2262-04-11T23:47:16.854775807Z  10.1.2.3`,
	},
	{
		// Without windows there is no window field, whatever the time.
		name: "src/v4/no-window-before-1970",
		rec: record.Record{
			Key:    flow.MakeKey(flow.KeySrc, addr("10.1.2.3"), netip.Addr{}, 0, 0, 0),
			TimeNs: -1_000_000,
		},
		jsonl:  `{"ts":"1969-12-31T23:59:59.999Z","src":"10.1.2.3"}`,
		csvRow: `1969-12-31T23:59:59.999Z,10.1.2.3,`,
		text:   `1969-12-31T23:59:59.999Z  10.1.2.3`,
	},
}

// network returns k masked to /24 and /64 (--prefix 24,64).
func network(k flow.Key) flow.Key {
	m, err := flow.ParseMask("24,64")
	if err != nil {
		panic(err)
	}
	m.Apply(&k)
	return k
}

// networkCases are records of keys by network: CIDR text in every format.
var networkCases = []recordCase{
	{
		name: "src/v4/network",
		rec: windowed(record.Record{
			Key:    network(flow.MakeKey(flow.KeySrc, addr("10.1.2.3"), netip.Addr{}, 0, 0, 0)),
			TimeNs: at("2026-01-01T00:00:01.5Z"),
		}, "2026-01-01T00:00:00Z"),
		jsonl:  `{"ts":"2026-01-01T00:00:01.5Z","src":"10.1.2.0/24","window":"2026-01-01T00:00:00Z"}`,
		csvRow: `2026-01-01T00:00:01.5Z,10.1.2.0/24,2026-01-01T00:00:00Z`,
		text:   `2026-01-01T00:00:01.5Z  10.1.2.0/24`,
	},
	{
		name: "dst/v6/network",
		rec: record.Record{
			Key:    network(flow.MakeKey(flow.KeyDst, netip.Addr{}, addr("2001:db8:1:2:aaaa::1"), 0, 0, 0)),
			TimeNs: at("2026-01-01T00:00:01Z"),
		},
		jsonl:  `{"ts":"2026-01-01T00:00:01Z","dst":"2001:db8:1:2::/64"}`,
		csvRow: `2026-01-01T00:00:01Z,2001:db8:1:2::/64,`,
		text:   `2026-01-01T00:00:01Z  2001:db8:1:2::/64`,
	},
	{
		name: "5tuple/v6/network",
		rec: record.Record{
			Key:    network(flow.MakeKey(flow.Key5Tuple, addr("2001:db8:1:2::1"), addr("2001:db8:3:4::1"), 17, 53, 5353)),
			TimeNs: at("2026-01-01T00:00:01Z"),
		},
		jsonl:  `{"ts":"2026-01-01T00:00:01Z","src":"2001:db8:1:2::/64","dst":"2001:db8:3:4::/64","proto":17,"proto_name":"udp","sport":53,"dport":5353}`,
		csvRow: `2026-01-01T00:00:01Z,2001:db8:1:2::/64,2001:db8:3:4::/64,17,udp,53,5353,`,
		text:   `2026-01-01T00:00:01Z  udp [2001:db8:1:2::/64]:53 > [2001:db8:3:4::/64]:5353`,
	},
}

var csvHeaderWant = map[flow.KeyKind]string{
	flow.KeySrc:    "ts,src,window",
	flow.KeyDst:    "ts,dst,window",
	flow.KeyPair:   "ts,src,dst,window",
	flow.Key5Tuple: "ts,src,dst,proto,proto_name,sport,dport,window",
}

// writeAll writes recs with a new writer and returns the output.
func writeAll(t *testing.T, format string, kind flow.KeyKind, recs ...record.Record) string {
	t.Helper()
	return writeRecords(t, format, kind, false, recs...)
}

// writeRecords writes recs with a new writer, told SetSegments when segs,
// checks that nothing reaches the output before Flush, and returns it.
func writeRecords(t *testing.T, format string, kind flow.KeyKind, segs bool, recs ...record.Record) string {
	t.Helper()
	var out bytes.Buffer
	rw, err := NewRecordWriter(&out, format, kind)
	if err != nil {
		t.Fatal(err)
	}
	if segs {
		if err := rw.SetSegments(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range recs {
		if err := rw.Record(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if out.Len() != 0 {
		t.Errorf("%d bytes written before Flush; want all buffered", out.Len())
	}
	if err := rw.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestRecordFormats(t *testing.T) {
	for _, tc := range append(recordCases, networkCases...) {
		t.Run(tc.name, func(t *testing.T) {
			kind := tc.rec.Key.Kind()
			if got := writeAll(t, "jsonl", kind, tc.rec); got != tc.jsonl+"\n" {
				t.Errorf("jsonl:\n got %s\nwant %s", got, tc.jsonl)
			}
			if got := writeAll(t, "", kind, tc.rec); got != tc.jsonl+"\n" {
				t.Errorf(`format "": got %s, want jsonl`, got)
			}
			want := csvHeaderWant[kind] + "\n" + tc.csvRow + "\n"
			if got := writeAll(t, "csv", kind, tc.rec); got != want {
				t.Errorf("csv:\n got %s\nwant %s", got, want)
			}
			if got := writeAll(t, "text", kind, tc.rec); got != tc.text+"\n" {
				t.Errorf("text:\n got %s\nwant %s", got, tc.text)
			}
			if n := len(tc.jsonl) + 1; n > maxRecordLen {
				t.Errorf("record of %d bytes exceeds maxRecordLen %d", n, maxRecordLen)
			}
		})
	}
}

func TestCSVHeaderOnly(t *testing.T) {
	for kind, header := range csvHeaderWant {
		if got := writeAll(t, "csv", kind); got != header+"\n" {
			t.Errorf("%v: no records gave %q, want the header %q", kind, got, header)
		}
	}
}

// jsonRecord is the jsonl schema; decoding with DisallowUnknownFields
// checks that nothing else is written.
type jsonRecord struct {
	TS        time.Time  `json:"ts"`
	Src       netip.Addr `json:"src"`
	Dst       netip.Addr `json:"dst"`
	Proto     *uint8     `json:"proto"`
	ProtoName string     `json:"proto_name"`
	Sport     *uint16    `json:"sport"`
	Dport     *uint16    `json:"dport"`
	Window    *time.Time `json:"window"`
}

func TestJSONRoundTrip(t *testing.T) {
	for _, tc := range recordCases {
		k := tc.rec.Key
		line := writeAll(t, "jsonl", k.Kind(), tc.rec)
		if !json.Valid([]byte(line)) {
			t.Errorf("%s: invalid JSON %s", tc.name, line)
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var got jsonRecord
		if err := dec.Decode(&got); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got.TS.UnixNano() != tc.rec.TimeNs || got.TS.Location() != time.UTC {
			t.Errorf("%s: ts %v, want %v UTC", tc.name, got.TS, time.Unix(0, tc.rec.TimeNs))
		}
		if got.Src != k.Src() || got.Dst != k.Dst() {
			t.Errorf("%s: src %v dst %v, want %v %v", tc.name, got.Src, got.Dst, k.Src(), k.Dst())
		}
		if (got.Proto != nil) != (k.Kind() == flow.Key5Tuple) || got.Proto != nil && *got.Proto != k.Proto() {
			t.Errorf("%s: proto %v, want %d", tc.name, got.Proto, k.Proto())
		}
		if (got.Sport != nil) != k.HasPorts() || (got.Dport != nil) != k.HasPorts() {
			t.Errorf("%s: sport %v dport %v with HasPorts %v", tc.name, got.Sport, got.Dport, k.HasPorts())
		} else if k.HasPorts() && (*got.Sport != k.SrcPort() || *got.Dport != k.DstPort()) {
			t.Errorf("%s: ports %d > %d, want %d > %d", tc.name, *got.Sport, *got.Dport, k.SrcPort(), k.DstPort())
		}
		if (got.Window != nil) != tc.rec.Windowed || got.Window != nil && got.Window.UnixNano() != tc.rec.WindowNs {
			t.Errorf("%s: window %v, want start %d (end %d)", tc.name, got.Window, tc.rec.WindowNs, tc.rec.WindowEndNs)
		}
	}
}

func TestCSVParses(t *testing.T) {
	for kind := flow.KeySrc; kind <= flow.Key5Tuple; kind++ {
		var recs []record.Record
		for _, tc := range recordCases {
			if tc.rec.Key.Kind() == kind {
				recs = append(recs, tc.rec)
			}
		}
		rows, err := csv.NewReader(strings.NewReader(writeAll(t, "csv", kind, recs...))).ReadAll()
		if err != nil {
			t.Fatalf("%v: %v", kind, err)
		}
		if len(rows) != len(recs)+1 {
			t.Fatalf("%v: %d rows, want a header and %d records", kind, len(rows), len(recs))
		}
		// encoding/csv checks that every row has the header's field count.
	}
}

func TestRecordWriterErrors(t *testing.T) {
	if _, err := NewRecordWriter(io.Discard, "xml", flow.KeySrc); !errors.Is(err, ErrFormat) {
		t.Errorf("format xml: %v, want ErrFormat", err)
	}
	if _, err := NewRecordWriter(io.Discard, "jsonl", 0); !errors.Is(err, flow.ErrBadKind) {
		t.Errorf("kind 0: %v, want flow.ErrBadKind", err)
	}
	rw, err := NewRecordWriter(io.Discard, "jsonl", flow.KeySrc)
	if err != nil {
		t.Fatal(err)
	}
	rec := record.Record{Key: flow.MakeKey(flow.KeyDst, netip.Addr{}, addr("10.0.0.1"), 0, 0, 0)}
	if err := rw.Record(&rec); !errors.Is(err, flow.ErrBadKind) {
		t.Errorf("dst key to a src writer: %v, want flow.ErrBadKind", err)
	}
	if err := rw.Record(&record.Record{}); !errors.Is(err, flow.ErrBadKind) {
		t.Errorf("zero key: %v, want flow.ErrBadKind", err)
	}
}

func TestRecordNoAllocs(t *testing.T) {
	for _, format := range Formats {
		for _, tc := range append(recordCases, networkCases...) {
			rw, err := NewRecordWriter(io.Discard, format, tc.rec.Key.Kind())
			if err != nil {
				t.Fatal(err)
			}
			rec := tc.rec
			// 2000 records of 30 to 250 bytes span several buffer flushes.
			allocs := testing.AllocsPerRun(2000, func() {
				if err := rw.Record(&rec); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%s %s: %v allocations per record, want 0", format, tc.name, allocs)
			}
		}
	}
}

// chunkRecorder keeps every Write it is given apart.
type chunkRecorder struct{ chunks [][]byte }

func (c *chunkRecorder) Write(p []byte) (int, error) {
	c.chunks = append(c.chunks, bytes.Clone(p))
	return len(p), nil
}

// TestBufferedWholeRecords checks that records reach the destination in
// order, in chunks of about 64 KiB that each end at a record boundary.
func TestBufferedWholeRecords(t *testing.T) {
	var dst chunkRecorder
	rw, err := NewRecordWriter(&dst, "jsonl", flow.Key5Tuple)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	const n = 10000
	for i := range n {
		tc := recordCases[i%len(recordCases)]
		if tc.rec.Key.Kind() != flow.Key5Tuple {
			continue
		}
		if err := rw.Record(&tc.rec); err != nil {
			t.Fatal(err)
		}
		want.WriteString(tc.jsonl + "\n")
	}
	if err := rw.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(dst.chunks) < 2 {
		t.Fatalf("%d chunks; want the buffer to have filled", len(dst.chunks))
	}
	for i, c := range dst.chunks {
		if c[len(c)-1] != '\n' {
			t.Errorf("chunk %d does not end at a record boundary", i)
		}
		if i < len(dst.chunks)-1 && (len(c) < bufSize || len(c) > bufSize+maxRecordLen) {
			t.Errorf("chunk %d is %d bytes, want 64 KiB plus less than a record", i, len(c))
		}
	}
	if got := bytes.Join(dst.chunks, nil); !bytes.Equal(got, want.Bytes()) {
		t.Errorf("output differs from the records written in order")
	}
}

func BenchmarkRecord(b *testing.B) {
	for _, format := range Formats {
		b.Run(format, func(b *testing.B) {
			tc := recordCases[6] // 5tuple/udp/v6
			rw, err := NewRecordWriter(io.Discard, format, tc.rec.Key.Kind())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				rw.Record(&tc.rec)
			}
		})
	}
}

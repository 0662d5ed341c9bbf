package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// seg returns k in segment vni, which must be valid.
func seg(k flow.Key, vni uint32) flow.Key {
	s := k.WithSegment(vni)
	if !s.IsValid() {
		panic("invalid segment")
	}
	return s
}

// segmentCases are records of keys with a segment (taken inside VXLAN or
// Geneve), with their forms written by hand from NewRecordWriter's
// comment: jsonl with "vni" after the key's fields, csvRow as a writer
// told SetSegments writes it (a vni column before window), text starting
// "vni N ".
var segmentCases = []recordCase{
	{
		name: "src/v4/vni100/window",
		rec: windowed(record.Record{
			Key:    seg(flow.MakeKey(flow.KeySrc, addr("10.0.0.1"), netip.Addr{}, 0, 0, 0), 100),
			TimeNs: at("2026-01-01T00:00:01.5Z"),
		}, "2026-01-01T00:00:00Z"),
		jsonl:  `{"ts":"2026-01-01T00:00:01.5Z","src":"10.0.0.1","vni":100,"window":"2026-01-01T00:00:00Z"}`,
		csvRow: `2026-01-01T00:00:01.5Z,10.0.0.1,100,2026-01-01T00:00:00Z`,
		text:   `2026-01-01T00:00:01.5Z  vni 100 10.0.0.1`,
	},
	{
		name: "src/v4/vni200",
		rec: record.Record{
			Key:    seg(flow.MakeKey(flow.KeySrc, addr("10.0.0.1"), netip.Addr{}, 0, 0, 0), 200),
			TimeNs: at("2026-01-01T00:00:01.5Z"),
		},
		jsonl:  `{"ts":"2026-01-01T00:00:01.5Z","src":"10.0.0.1","vni":200}`,
		csvRow: `2026-01-01T00:00:01.5Z,10.0.0.1,200,`,
		text:   `2026-01-01T00:00:01.5Z  vni 200 10.0.0.1`,
	},
	{
		name: "dst/v6/vni0",
		rec: record.Record{
			Key:    seg(flow.MakeKey(flow.KeyDst, netip.Addr{}, addr("2001:db8::2"), 0, 0, 0), 0),
			TimeNs: at("2026-01-01T00:00:01Z"),
		},
		jsonl:  `{"ts":"2026-01-01T00:00:01Z","dst":"2001:db8::2","vni":0}`,
		csvRow: `2026-01-01T00:00:01Z,2001:db8::2,0,`,
		text:   `2026-01-01T00:00:01Z  vni 0 2001:db8::2`,
	},
	{
		name: "pair/v4/vni-max",
		rec: record.Record{
			Key:    seg(flow.MakeKey(flow.KeyPair, addr("10.0.0.1"), addr("10.0.0.2"), 0, 0, 0), 16777215),
			TimeNs: at("2026-01-01T00:59:59Z"),
		},
		jsonl:  `{"ts":"2026-01-01T00:59:59Z","src":"10.0.0.1","dst":"10.0.0.2","vni":16777215}`,
		csvRow: `2026-01-01T00:59:59Z,10.0.0.1,10.0.0.2,16777215,`,
		text:   `2026-01-01T00:59:59Z  vni 16777215 10.0.0.1 > 10.0.0.2`,
	},
	{
		name: "5tuple/tcp/v4/vni100/window",
		rec: windowed(record.Record{
			Key:    seg(flow.MakeKey(flow.Key5Tuple, addr("10.0.0.1"), addr("10.0.0.2"), 6, 1234, 80), 100),
			TimeNs: at("2026-01-01T00:00:01.5Z"),
		}, "2026-01-01T00:00:00Z"),
		jsonl:  `{"ts":"2026-01-01T00:00:01.5Z","src":"10.0.0.1","dst":"10.0.0.2","proto":6,"proto_name":"tcp","sport":1234,"dport":80,"vni":100,"window":"2026-01-01T00:00:00Z"}`,
		csvRow: `2026-01-01T00:00:01.5Z,10.0.0.1,10.0.0.2,6,tcp,1234,80,100,2026-01-01T00:00:00Z`,
		text:   `2026-01-01T00:00:01.5Z  vni 100 tcp 10.0.0.1:1234 > 10.0.0.2:80`,
	},
	{
		name: "5tuple/icmp/v4/noports/vni7",
		rec: record.Record{
			Key:    seg(flow.MakeKey(flow.Key5Tuple, addr("192.0.2.1"), addr("192.0.2.254"), 1, 0, 0), 7),
			TimeNs: at("2026-01-01T00:00:02.75Z"),
		},
		jsonl:  `{"ts":"2026-01-01T00:00:02.75Z","src":"192.0.2.1","dst":"192.0.2.254","proto":1,"proto_name":"icmp","vni":7}`,
		csvRow: `2026-01-01T00:00:02.75Z,192.0.2.1,192.0.2.254,1,icmp,,,7,`,
		text:   `2026-01-01T00:00:02.75Z  vni 7 icmp 192.0.2.1 > 192.0.2.254`,
	},
	{
		// The longest record with a segment: recordCases' longest, in the
		// largest VNI.
		name: "5tuple/sctp/v6/longest/vni-max",
		rec: windowed(record.Record{
			Key: seg(flow.MakeKey(flow.Key5Tuple, addr("2001:db8:ffff:ffff:ffff:ffff:ffff:fffe"),
				addr("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"), 132, 65535, 65534), 16777215),
			TimeNs: at("2026-12-31T23:59:59.999999999Z"),
		}, "2026-12-31T23:00:00Z"),
		jsonl:  `{"ts":"2026-12-31T23:59:59.999999999Z","src":"2001:db8:ffff:ffff:ffff:ffff:ffff:fffe","dst":"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff","proto":132,"proto_name":"sctp","sport":65535,"dport":65534,"vni":16777215,"window":"2026-12-31T23:00:00Z"}`,
		csvRow: `2026-12-31T23:59:59.999999999Z,2001:db8:ffff:ffff:ffff:ffff:ffff:fffe,2001:db8:ffff:ffff:ffff:ffff:ffff:ffff,132,sctp,65535,65534,16777215,2026-12-31T23:00:00Z`,
		text:   `2026-12-31T23:59:59.999999999Z  vni 16777215 sctp [2001:db8:ffff:ffff:ffff:ffff:ffff:fffe]:65535 > [2001:db8:ffff:ffff:ffff:ffff:ffff:ffff]:65534`,
	},
	{
		name: "src/v4/network/vni100",
		rec: record.Record{
			Key:    seg(network(flow.MakeKey(flow.KeySrc, addr("10.1.2.3"), netip.Addr{}, 0, 0, 0)), 100),
			TimeNs: at("2026-01-01T00:00:01Z"),
		},
		jsonl:  `{"ts":"2026-01-01T00:00:01Z","src":"10.1.2.0/24","vni":100}`,
		csvRow: `2026-01-01T00:00:01Z,10.1.2.0/24,100,`,
		text:   `2026-01-01T00:00:01Z  vni 100 10.1.2.0/24`,
	},
}

// csvSegHeaderWant is the csv header of a writer told SetSegments.
var csvSegHeaderWant = map[flow.KeyKind]string{
	flow.KeySrc:    "ts,src,vni,window",
	flow.KeyDst:    "ts,dst,vni,window",
	flow.KeyPair:   "ts,src,dst,vni,window",
	flow.Key5Tuple: "ts,src,dst,proto,proto_name,sport,dport,vni,window",
}

// writeSegs writes recs with a new writer told SetSegments and returns the
// output.
func writeSegs(t *testing.T, format string, kind flow.KeyKind, recs ...record.Record) string {
	t.Helper()
	return writeRecords(t, format, kind, true, recs...)
}

// TestSegmentRecordFormats: a key with a segment shows its VNI in every
// format, with or without SetSegments for jsonl and text (which carry it
// whatever), and in the vni column of a csv writer told SetSegments.
func TestSegmentRecordFormats(t *testing.T) {
	for _, tc := range segmentCases {
		t.Run(tc.name, func(t *testing.T) {
			kind := tc.rec.Key.Kind()
			for _, segs := range []bool{false, true} {
				write := writeAll
				if segs {
					write = writeSegs
				}
				if got := write(t, "jsonl", kind, tc.rec); got != tc.jsonl+"\n" {
					t.Errorf("jsonl (SetSegments %v):\n got %s\nwant %s", segs, got, tc.jsonl)
				}
				if got := write(t, "text", kind, tc.rec); got != tc.text+"\n" {
					t.Errorf("text (SetSegments %v):\n got %s\nwant %s", segs, got, tc.text)
				}
			}
			want := csvSegHeaderWant[kind] + "\n" + tc.csvRow + "\n"
			if got := writeSegs(t, "csv", kind, tc.rec); got != want {
				t.Errorf("csv:\n got %s\nwant %s", got, want)
			}
			if n := len(tc.jsonl) + 1; n > maxRecordLen {
				t.Errorf("record of %d bytes exceeds maxRecordLen %d", n, maxRecordLen)
			}
		})
	}
}

// TestSegmentsKeepUnsegmented: keys without a segment are written as
// before segments existed, by a writer told SetSegments too (jsonl and
// text byte for byte; csv the same row with an empty vni before window).
func TestSegmentsKeepUnsegmented(t *testing.T) {
	for _, tc := range append(recordCases, networkCases...) {
		kind := tc.rec.Key.Kind()
		if got := writeSegs(t, "jsonl", kind, tc.rec); got != tc.jsonl+"\n" {
			t.Errorf("%s jsonl:\n got %s\nwant %s", tc.name, got, tc.jsonl)
		}
		if got := writeSegs(t, "text", kind, tc.rec); got != tc.text+"\n" {
			t.Errorf("%s text:\n got %s\nwant %s", tc.name, got, tc.text)
		}
		// The row without segments is tc.csvRow: its last field is the
		// window; the vni, empty, goes before it.
		cut := strings.LastIndexByte(tc.csvRow, ',')
		want := csvSegHeaderWant[kind] + "\n" + tc.csvRow[:cut] + ",," + tc.csvRow[cut+1:] + "\n"
		if got := writeSegs(t, "csv", kind, tc.rec); got != want {
			t.Errorf("%s csv:\n got %s\nwant %s", tc.name, got, want)
		}
	}
}

// TestCSVSegmentsParse reads a csv of records with and without segments
// by column name, as ClickHouse's CSVWithNames and pandas do: every row
// has the header's columns, vni is the VNI or empty.
func TestCSVSegmentsParse(t *testing.T) {
	for kind := flow.KeySrc; kind <= flow.Key5Tuple; kind++ {
		var recs []record.Record
		var vnis []string
		for _, tc := range append(segmentCases, recordCases...) {
			if tc.rec.Key.Kind() == kind {
				recs = append(recs, tc.rec)
				v := ""
				if n, ok := tc.rec.Key.Segment(); ok {
					v = strconv.FormatUint(uint64(n), 10)
				}
				vnis = append(vnis, v)
			}
		}
		r := csv.NewReader(strings.NewReader(writeSegs(t, "csv", kind, recs...)))
		rows, err := r.ReadAll() // checks every row has the header's field count
		if err != nil {
			t.Fatalf("%v: %v", kind, err)
		}
		if len(rows) != len(recs)+1 {
			t.Fatalf("%v: %d rows, want a header and %d records", kind, len(rows), len(recs))
		}
		col := slices.Index(rows[0], "vni")
		if col < 0 {
			t.Fatalf("%v: header %v has no vni", kind, rows[0])
		}
		for i, row := range rows[1:] {
			if row[col] != vnis[i] {
				t.Errorf("%v row %d: vni %q, want %q", kind, i, row[col], vnis[i])
			}
		}
	}
}

// TestCSVSegmentsHeaders: the header with and without SetSegments and
// SetObservers, in either order, and with no record.
func TestCSVSegmentsHeaders(t *testing.T) {
	for kind := flow.KeySrc; kind <= flow.Key5Tuple; kind++ {
		if got := writeSegs(t, "csv", kind); got != csvSegHeaderWant[kind]+"\n" {
			t.Errorf("%v: no records gave %q, want the header %q", kind, got, csvSegHeaderWant[kind])
		}
		for _, segsFirst := range []bool{false, true} {
			var out bytes.Buffer
			rw, err := NewRecordWriter(&out, "csv", kind)
			if err != nil {
				t.Fatal(err)
			}
			if segsFirst {
				rw.SetSegments()
				rw.SetObservers(names{1: "r1"})
			} else {
				rw.SetObservers(names{1: "r1"})
				rw.SetSegments()
			}
			rw.Flush()
			if want := csvSegHeaderWant[kind] + ",exporter\n"; out.String() != want {
				t.Errorf("%v (segments first %v): header %q, want %q", kind, segsFirst, out.String(), want)
			}
		}
		if got := writeSegs(t, "jsonl", kind); got != "" {
			t.Errorf("%v: jsonl without records wrote %q", kind, got)
		}
	}
}

// TestSegmentErrors: a csv writer not told SetSegments refuses a key with
// a segment rather than drop its VNI, and writes nothing of it; jsonl and
// text take it; SetSegments after a record is an error.
func TestSegmentErrors(t *testing.T) {
	rec := segmentCases[0].rec
	var out bytes.Buffer
	rw, err := NewRecordWriter(&out, "csv", flow.KeySrc)
	if err != nil {
		t.Fatal(err)
	}
	err = rw.Record(&rec)
	if !errors.Is(err, ErrSegment) || !strings.Contains(err.Error(), "vni 100") {
		t.Errorf("segment key to a csv writer without SetSegments: %v, want ErrSegment naming vni 100", err)
	}
	plain := recordCases[0].rec
	if err := rw.Record(&plain); err != nil {
		t.Fatal(err)
	}
	rw.Flush()
	if want := csvHeaderWant[flow.KeySrc] + "\n" + recordCases[0].csvRow + "\n"; out.String() != want {
		t.Errorf("after the refusal: %q, want %q", out.String(), want)
	}
	if err := rw.SetSegments(); err == nil {
		t.Error("SetSegments after a record: no error")
	}
	for _, f := range []string{"jsonl", "text"} {
		rw, _ := NewRecordWriter(io.Discard, f, flow.KeySrc)
		if err := rw.Record(&rec); err != nil {
			t.Errorf("%s without SetSegments: %v", f, err)
		}
	}
}

// TestJSONSegmentRoundTrip: encoding/json reads the vni back as the key's
// segment, and no vni for keys without one.
func TestJSONSegmentRoundTrip(t *testing.T) {
	for _, tc := range append(segmentCases, recordCases...) {
		k := tc.rec.Key
		if k.Bits() >= 0 {
			continue // src is a network: not a netip.Addr
		}
		line := writeAll(t, "jsonl", k.Kind(), tc.rec)
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var got struct {
			TS        time.Time  `json:"ts"`
			Src       netip.Addr `json:"src"`
			Dst       netip.Addr `json:"dst"`
			Proto     *uint8     `json:"proto"`
			ProtoName string     `json:"proto_name"`
			Sport     *uint16    `json:"sport"`
			Dport     *uint16    `json:"dport"`
			VNI       *uint32    `json:"vni"`
			Window    *time.Time `json:"window"`
		}
		if err := dec.Decode(&got); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		vni, ok := k.Segment()
		if (got.VNI != nil) != ok || ok && *got.VNI != vni {
			t.Errorf("%s: vni %v, want %d (segment %v)", tc.name, got.VNI, vni, ok)
		}
		if got.Src != k.Src() || got.Dst != k.Dst() {
			t.Errorf("%s: src %v dst %v, want %v %v", tc.name, got.Src, got.Dst, k.Src(), k.Dst())
		}
	}
}

// TestSegmentRecordNoAllocs: writing a record with a segment does not
// allocate, in any format.
func TestSegmentRecordNoAllocs(t *testing.T) {
	for _, format := range Formats {
		for _, tc := range segmentCases {
			rw, err := NewRecordWriter(io.Discard, format, tc.rec.Key.Kind())
			if err != nil {
				t.Fatal(err)
			}
			rw.SetSegments()
			rec := tc.rec
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

package clickhouse_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/export/clickhouse"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/report"
)

var kinds = []flow.KeyKind{flow.KeySrc, flow.KeyDst, flow.KeyPair, flow.Key5Tuple}

// base is the time of the first generated record.
var base = time.Date(2026, 1, 31, 23, 58, 0, 0, time.UTC)

// newDestination returns a Destination of records of kind to database db of the
// server at addr, closed when t ends.
func newDestination(t testing.TB, addr, db string, kind flow.KeyKind, observer string) *clickhouse.Destination {
	t.Helper()
	e, err := clickhouse.New(clickhouse.Config{Address: addr, Database: db, Kind: kind, Observer: observer, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// addrPair returns the i-th source and destination of a family: IPv4,
// IPv6, or IPv4-mapped IPv6 (which stays IPv6 in a key).
func addrPair(i int, family int) (netip.Addr, netip.Addr) {
	switch family {
	case 0:
		return netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
	case 1:
		s := netip.MustParseAddr("2001:db8::").As16()
		d := netip.MustParseAddr("2001:db8:ffff:1::").As16()
		s[14], s[15] = byte(i>>8), byte(i)
		d[15] = byte(i)
		return netip.AddrFrom16(s), netip.AddrFrom16(d)
	default:
		return netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 51, 14: 100, 15: byte(i)}),
			netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: 203, 13: 0, 14: 113, 15: byte(i)})
	}
}

// records returns n records of kind: IPv4, IPv6 and IPv4-mapped keys in
// turn, 5-tuples of protocols with ports and without (ICMP, ICMPv6, GRE),
// times with nanoseconds, in 1-minute windows that cross a month boundary
// (so a batch spans two partitions of the tables).
func records(kind flow.KeyKind, n, seed int) []record.Record {
	protos := []uint8{6, 17, 1, 132, 47, 136}
	recs := make([]record.Record, n)
	for i := range recs {
		j := i + seed*n
		src, dst := addrPair(j, i%3)
		proto := protos[i%len(protos)]
		if proto == 1 && src.Is6() {
			proto = 58
		}
		ts := base.UnixNano() + int64(i)*1_000_003_917 + int64(j%7)*123_456_789
		recs[i] = record.Record{
			Key:         flow.MakeKey(kind, src, dst, proto, uint16(1024+j), uint16(j%3*1000+53)),
			TimeNs:      ts,
			WindowNs:    ts - ts%60e9,
			WindowEndNs: ts - ts%60e9 + 60e9,
			Windowed:    true,
		}
	}
	return recs
}

// row is a row of flows as the tests read it back, with times as
// numbers.
type row struct {
	Observer     string
	Window       int64 // seconds
	TS           int64 // nanoseconds: ts and ts_ns together
	Key          string
	Src, Dst     string
	Proto        uint8
	Sport, Dport uint16
	Kind         string
	Batch        uint64
	VNI          uint32 // vni, and has_vni as Seg
	Seg          bool
}

func (r row) String() string {
	return fmt.Sprintf("%q w=%d ts=%d %q src=%q dst=%q p=%d %d>%d %s b=%d vni=%d/%v", r.Observer, r.Window, r.TS, r.Key, r.Src, r.Dst, r.Proto, r.Sport, r.Dport, r.Kind, r.Batch, r.VNI, r.Seg)
}

// readFlows returns every row of db.flows, sorted by their text.
func readFlows(t testing.TB, ch *servers.ClickHouse, db string) []string {
	t.Helper()
	out := ch.Query(t, "SELECT observer, toUnixTimestamp(window), toUnixTimestamp(ts), ts_ns, key, src, dst, proto, sport, dport, kind, batch, vni, has_vni FROM "+db+".flows FORMAT TabSeparated")
	var rows []string
	for line := range strings.Lines(out) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(f) != 14 {
			t.Fatalf("flows row %q: %d fields", line, len(f))
		}
		for i := range f {
			f[i] = unescapeTSV(f[i])
		}
		var r row
		var sec, ns, p, sp, dp uint64
		var err error
		parse := func(s string, v *uint64) {
			if err == nil {
				*v, err = strconv.ParseUint(s, 10, 64)
			}
		}
		var w uint64
		parse(f[1], &w)
		parse(f[2], &sec)
		parse(f[3], &ns)
		parse(f[7], &p)
		parse(f[8], &sp)
		parse(f[9], &dp)
		parse(f[11], &r.Batch)
		var vni, seg uint64
		parse(f[12], &vni)
		parse(f[13], &seg)
		r.VNI, r.Seg = uint32(vni), seg == 1
		if err != nil {
			t.Fatalf("flows row %q: %v", line, err)
		}
		if ns >= 1e9 {
			t.Fatalf("flows row %q: ts_ns %d is not within a second", line, ns)
		}
		r.Observer, r.Window, r.TS = f[0], int64(w), int64(sec)*1e9+int64(ns)
		r.Key, r.Src, r.Dst, r.Proto, r.Sport, r.Dport, r.Kind = f[4], f[5], f[6], uint8(p), uint16(sp), uint16(dp), f[10]
		rows = append(rows, r.String())
	}
	slices.Sort(rows)
	return rows
}

// unescapeTSV undoes TabSeparated's escapes.
func unescapeTSV(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case '0':
			b.WriteByte(0)
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// wantRows returns the rows records should become, sorted by their text:
// src, dst, ports and times as the jsonl record writer prints them (the
// text form section 7 asks for), the key as flow.Key.String.
func wantRows(t testing.TB, kind flow.KeyKind, observer string, batch uint64, recs []record.Record) []string {
	t.Helper()
	var jsonl bytes.Buffer
	w, err := report.NewRecordWriter(&jsonl, "jsonl", kind)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if err := w.Record(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var rows []string
	i := 0
	for line := range bytes.Lines(jsonl.Bytes()) {
		var j struct {
			TS, Src, Dst, Window string
			Proto                uint8
			Sport, Dport         uint16
		}
		if err := json.Unmarshal(line, &j); err != nil {
			t.Fatal(err)
		}
		ts, err := time.Parse(time.RFC3339Nano, j.TS)
		if err != nil {
			t.Fatal(err)
		}
		var win int64
		if j.Window != "" {
			wt, err := time.Parse(time.RFC3339Nano, j.Window)
			if err != nil {
				t.Fatal(err)
			}
			win = wt.Unix()
		}
		r := row{Observer: observer, Window: win, TS: ts.UnixNano(), Key: recs[i].Key.String(), Src: j.Src, Dst: j.Dst,
			Proto: j.Proto, Sport: j.Sport, Dport: j.Dport, Kind: kind.String(), Batch: batch}
		r.VNI, r.Seg = recs[i].Key.Segment()
		rows = append(rows, r.String())
		i++
	}
	if i != len(recs) {
		t.Fatalf("jsonl has %d records, want %d", i, len(recs))
	}
	slices.Sort(rows)
	return rows
}

// diffRows fails t with the rows only one side has.
func diffRows(t testing.TB, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	count := map[string]int{}
	for _, r := range want {
		count[r]++
	}
	for _, r := range got {
		count[r]--
	}
	var msg strings.Builder
	n := 0
	for r, c := range count {
		if c != 0 && n < 10 {
			fmt.Fprintf(&msg, "\n  %+d × %s", -c, r)
			n++
		}
	}
	t.Fatalf("flows holds %d rows, want %d; differences (+ extra, - missing):%s", len(got), len(want), msg.String())
}

// queryUint runs a query whose answer is one number.
func queryUint(t testing.TB, ch *servers.ClickHouse, sql string) uint64 {
	t.Helper()
	out := strings.TrimSpace(ch.Query(t, sql))
	n, err := strconv.ParseUint(out, 10, 64)
	if err != nil {
		t.Fatalf("%s: answer %q: %v", sql, out, err)
	}
	return n
}

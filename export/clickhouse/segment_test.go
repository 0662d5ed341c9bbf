package clickhouse_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
	"github.com/flowdedup/flowdedup/record"
)

// hostsPerSegmentSQL is the query docs/export.md gives for counting hosts
// per segment (with DB for the database).
const hostsPerSegmentSQL = "SELECT has_vni, vni, uniqExact(src) AS hosts FROM DB.flows FINAL " +
	"GROUP BY has_vni, vni ORDER BY has_vni, vni FORMAT TabSeparated"

// segmentRecords returns the records of two tenants reusing the same
// addresses, 10.0.0.1 to 10.0.0.3, in VNI 100 and VNI 200, of 10.0.0.1 in
// VNI 0 (a valid VXLAN segment), and of 10.0.0.1 and 10.0.0.9 outside any
// tunnel: 3 + 3 + 1 + 2 source keys, all distinct.
func segmentRecords(kind flow.KeyKind) []record.Record {
	a := func(last byte) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, last}) }
	dst := netip.MustParseAddr("192.0.2.53")
	var keys []flow.Key
	for _, vni := range []uint32{100, 200} {
		for i := byte(1); i <= 3; i++ {
			keys = append(keys, flow.MakeKey(kind, a(i), dst, 17, 4000, 53).WithSegment(vni))
		}
	}
	keys = append(keys, flow.MakeKey(kind, a(1), dst, 17, 4000, 53).WithSegment(0),
		flow.MakeKey(kind, a(1), dst, 17, 4000, 53), flow.MakeKey(kind, a(9), dst, 17, 4000, 53))
	recs := make([]record.Record, len(keys))
	for i, k := range keys {
		ts := base.UnixNano() + int64(i)*1e9
		recs[i] = record.Record{Key: k, TimeNs: ts, WindowNs: base.UnixNano(), WindowEndNs: base.UnixNano() + 60e9, Windowed: true}
	}
	return recs
}

// Two tenants' identical addresses in VNI 100 and VNI 200 are rows of
// their own, with their VNIs in vni and 1 in has_vni; VNI 0 is told from
// no segment by has_vni; the key's text starts with "vni N " as
// flow.Key.String writes it; and docs/export.md's query counts the hosts
// of each segment.
func TestSegmentRows(t *testing.T) {
	ch := servers.StartClickHouse(t)
	for _, kind := range []flow.KeyKind{flow.KeySrc, flow.Key5Tuple} {
		t.Run(kind.String(), func(t *testing.T) {
			db := "seg_" + strings.ReplaceAll(kind.String(), "5", "five")
			e := newDestination(t, ch.Addr, db, kind, "r")
			recs := segmentRecords(kind)
			if err := e.Records(&record.Batch{ID: 7, Records: recs}); err != nil {
				t.Fatal(err)
			}
			diffRows(t, readFlows(t, ch, db), wantRows(t, kind, "r", 7, recs))

			// By hand: the rows' src, vni and has_vni, and the key's text.
			got := ch.Query(t, "SELECT src, vni, has_vni, key FROM "+db+".flows ORDER BY has_vni, vni, src FORMAT TabSeparated")
			want := []string{"10.0.0.1\t0\t0", "10.0.0.9\t0\t0", "10.0.0.1\t0\t1", "10.0.0.1\t100\t1", "10.0.0.2\t100\t1", "10.0.0.3\t100\t1",
				"10.0.0.1\t200\t1", "10.0.0.2\t200\t1", "10.0.0.3\t200\t1"}
			lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
			if len(lines) != len(want) {
				t.Fatalf("flows rows:\n%s\nwant %d", got, len(want))
			}
			for i, l := range lines {
				f := strings.Split(l, "\t")
				if strings.Join(f[:3], "\t") != want[i] {
					t.Errorf("row %d: %q, want %q", i, l, want[i])
				}
				wantPrefix := ""
				if f[2] == "1" {
					wantPrefix = "vni " + f[1] + " "
				}
				if rest, ok := strings.CutPrefix(f[3], wantPrefix); !ok || strings.HasPrefix(rest, "vni") {
					t.Errorf("row %d: key %q, want it to start with %q", i, f[3], wantPrefix)
				}
			}

			// Hosts per segment: 2 outside tunnels, 1 in VNI 0, 3 in
			// each tenant's; 9 in all, counted by (has_vni, vni, src).
			hosts := ch.Query(t, strings.ReplaceAll(hostsPerSegmentSQL, "DB", db))
			if want := "0\t0\t2\n1\t0\t1\n1\t100\t3\n1\t200\t3\n"; hosts != want {
				t.Errorf("hosts per segment:\n%s\nwant\n%s", hosts, want)
			}
			if n := queryUint(t, ch, "SELECT uniqExact(has_vni, vni, src) FROM "+db+".flows FINAL"); n != 9 {
				t.Errorf("%d hosts across segments, want 9", n)
			}
			if n := queryUint(t, ch, "SELECT uniqExact(src) FROM "+db+".flows FINAL"); n != 4 {
				t.Errorf("%d addresses whatever the segment, want 4", n)
			}
		})
	}
}

// A flows table made by the release before segments (without vni and
// has_vni) gains both columns at the first write, keeps its rows, which
// read as outside any segment (0, 0), and takes rows with VNIs; a table
// that already has vni gains has_vni alone.
func TestSegmentColumnsAdded(t *testing.T) {
	ch := servers.StartClickHouse(t)
	// The CREATE TABLE of the release before, as it wrote it.
	const oldFlows = " (`observer` String, `window` DateTime('UTC'), `ts` DateTime('UTC'), `ts_ns` UInt32, `key` String, " +
		"`src` String, `dst` String, `proto` UInt8, `sport` UInt16, `dport` UInt16, `kind` String, `batch` UInt64) " +
		"ENGINE = ReplacingMergeTree PARTITION BY toYYYYMM(`window`) ORDER BY (`window`, `observer`, `src`, `dst`, `kind`, `key`, `ts`, `ts_ns`)"
	for _, tc := range []struct {
		db, extra string
	}{{"old", ""}, {"half", "ALTER TABLE half.flows ADD COLUMN vni UInt32"}} {
		t.Run(tc.db, func(t *testing.T) {
			ch.Query(t, "CREATE DATABASE "+tc.db)
			ch.Query(t, "CREATE TABLE "+tc.db+".flows"+oldFlows)
			if tc.extra != "" {
				ch.Query(t, tc.extra)
			}
			// Two rows an earlier release wrote.
			ch.Query(t, "INSERT INTO "+tc.db+".flows (observer, window, ts, ts_ns, key, src, dst, proto, sport, dport, kind, batch) VALUES "+
				"('r', 1769903880, 1769903881, 5, '10.0.0.1', '10.0.0.1', '', 0, 0, 0, 'src', 1), "+
				"('r', 1769903880, 1769903882, 6, '10.0.0.2', '10.0.0.2', '', 0, 0, 0, 'src', 1)")
			e := newDestination(t, ch.Addr, tc.db, flow.KeySrc, "r")
			recs := segmentRecords(flow.KeySrc)
			if err := e.Records(&record.Batch{ID: 2, Records: recs}); err != nil {
				t.Fatal(err)
			}
			cols := ch.Query(t, "SELECT name, type FROM system.columns WHERE database = '"+tc.db+"' AND table = 'flows' AND name IN ('vni', 'has_vni') ORDER BY name FORMAT TabSeparated")
			if cols != "has_vni\tUInt8\nvni\tUInt32\n" {
				t.Errorf("added columns:\n%s", cols)
			}
			if n := queryUint(t, ch, "SELECT count() FROM "+tc.db+".flows WHERE batch = 1 AND vni = 0 AND has_vni = 0"); n != 2 {
				t.Errorf("%d of the earlier rows read as outside any segment, want 2", n)
			}
			if n := queryUint(t, ch, "SELECT count() FROM "+tc.db+".flows"); n != uint64(2+len(recs)) {
				t.Errorf("%d rows, want %d", n, 2+len(recs))
			}
			got := readFlows(t, ch, tc.db)
			got = slices.DeleteFunc(got, func(r string) bool { return strings.Contains(r, " b=1 ") })
			diffRows(t, got, wantRows(t, flow.KeySrc, "r", 2, recs))
			// A second Destination finds the columns there: nothing to add.
			e2 := newDestination(t, ch.Addr, tc.db, flow.KeySrc, "r")
			if err := e2.Records(&record.Batch{ID: 3, Records: recs[:1]}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

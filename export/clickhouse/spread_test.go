package clickhouse_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/report"
)

// TestSpreadRows: a Reporter with --spread src:3 --spread dst:2 feeds a
// Destination the records of two windows; the spread table's rows are the
// summaries' spread lists, entry for entry (read back from the summary
// lines the same Reporter wrote), with the observer, window, side and
// kind. A summary given again (a retry) leaves the same rows once merged
// (FINAL); a window without records, and a run without --spread, write
// none. The table is made beside flows and windows, with the columns and
// sort key the docs give.
func TestSpreadRows(t *testing.T) {
	ch := servers.StartClickHouse(t)
	e := newDestination(t, ch.Addr, "spr", flow.KeyPair, "r1")
	var sum bytes.Buffer
	rep, err := report.New(report.Config{Kind: flow.KeyPair, Summary: &sum, Observer: "edge-1",
		Destinations: []record.Destination{e}, Spread: report.SpreadConfig{Src: 3, Dst: 2, Counters: 100, Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	w1 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	w2 := w1 + int64(time.Hour)
	rec := func(src, dst string, win int64) {
		r := record.Record{Key: flow.MakeKey(flow.KeyPair, netip.MustParseAddr(src), netip.MustParseAddr(dst), 0, 0, 0),
			TimeNs: win, WindowNs: win, WindowEndNs: win + int64(time.Hour), Windowed: true}
		if err := rep.Record(&r); err != nil {
			t.Fatal(err)
		}
	}
	// Window 1: 10.0.0.1 to 4 hosts, 10.0.0.2 to 2, 2001:db8::7 to 1;
	// 192.0.2.1 from 3 sources. Window 2: one pair.
	for _, p := range [][2]string{{"10.0.0.1", "192.0.2.1"}, {"10.0.0.1", "192.0.2.2"}, {"10.0.0.1", "192.0.2.3"}, {"10.0.0.1", "192.0.2.4"},
		{"10.0.0.2", "192.0.2.1"}, {"10.0.0.2", "192.0.2.5"}, {"2001:db8::7", "2001:db8::1"}, {"10.0.0.3", "192.0.2.1"}} {
		rec(p[0], p[1], w1)
	}
	rec("10.9.9.9", "192.0.2.99", w2)
	wins := []record.WindowSummary{
		{StartNs: w1, EndNs: w2, Windowed: true, Distinct: 8},
		{StartNs: w2, EndNs: w2 + int64(time.Hour), Windowed: true, Distinct: 1},
		{StartNs: w2 + int64(time.Hour), EndNs: w2 + 2*int64(time.Hour), Windowed: true, Final: true},
	}
	for i := range wins {
		if err := rep.Window(&wins[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := rep.Close(); err != nil {
		t.Fatal(err)
	}
	sums, err := report.ReadSummaries(strings.NewReader(sum.String()))
	if err != nil || len(sums) != 3 {
		t.Fatalf("%d summaries, %v", len(sums), err)
	}
	// The rows the summaries say, in the query's order.
	var want []string
	for _, s := range sums {
		for _, side := range []struct {
			name string
			list []record.SpreadEntry
		}{{"dst", s.Spread.Dst}, {"src", s.Spread.Src}} {
			for _, en := range side.list {
				want = append(want, fmt.Sprintf("edge-1\t%d\t%s\t%s\t%d\t%d\tpair", s.StartNs/1e9, side.name, en.Addr, en.Distinct, en.Error))
			}
		}
	}
	slices.Sort(want)
	// And by hand, window 1's: so that a Reporter bug does not hide.
	if !slices.Contains(want, fmt.Sprintf("edge-1\t%d\tsrc\t10.0.0.1\t4\t0\tpair", w1/1e9)) ||
		!slices.Contains(want, fmt.Sprintf("edge-1\t%d\tdst\t192.0.2.1\t3\t0\tpair", w1/1e9)) || len(want) != 3+2+1+1 {
		t.Fatalf("the summaries' spreads are not the hand-counted ones: %q", want)
	}
	query := "SELECT observer, toUnixTimestamp(window), side, addr, distinct, error, kind FROM spr.spread FINAL ORDER BY observer, window, side, addr FORMAT TabSeparated"
	check := func(when string) {
		t.Helper()
		got := strings.Split(strings.TrimSuffix(ch.Query(t, query), "\n"), "\n")
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: spread rows\n%s\nwant\n%s", when, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	check("after the run")
	// A retry of window 1's summary whose windows row is gone (as when
	// the spread insert landed and the windows insert did not): the
	// rows are written again and replace their copies.
	if st := e.Stats(); st.SpreadRows != 7 {
		t.Errorf("SpreadRows %d, want 7", st.SpreadRows)
	}
	ch.Query(t, "TRUNCATE TABLE spr.windows")
	again := newDestination(t, ch.Addr, "spr", flow.KeyPair, "r1") // the Reporter closed e
	if err := again.Window(&sums[0]); err != nil {
		t.Fatal(err)
	}
	check("after a retry")
	if st := again.Stats(); st.SpreadRows != 5 {
		t.Errorf("SpreadRows %d, want window 1's 5 again", st.SpreadRows)
	}
	// docs/spread.md's queries, as printed there but for the database:
	// the exact one over flows, and the lower bounds over spread. Window 1
	// by hand: 10.0.0.1 to 4 destinations, 10.0.0.2 to 2, 10.0.0.3 and
	// 2001:db8::7 to 1; the hour of window 2: 10.9.9.9 to 1.
	exact := ch.Query(t, "SELECT toStartOfHour(window) AS hour, src, uniqExact(dst) AS destinations FROM spr.flows WHERE kind = 'pair' "+
		"GROUP BY hour, src ORDER BY hour, destinations DESC, src LIMIT 10 BY hour FORMAT TabSeparated")
	if want := "2026-03-01 10:00:00\t10.0.0.1\t4\n2026-03-01 10:00:00\t10.0.0.2\t2\n2026-03-01 10:00:00\t10.0.0.3\t1\n2026-03-01 10:00:00\t2001:db8::7\t1\n" +
		"2026-03-01 11:00:00\t10.9.9.9\t1\n"; exact != want {
		t.Errorf("docs' flows query:\n%s\nwant\n%s", exact, want)
	}
	bound := ch.Query(t, "SELECT toStartOfHour(window) AS hour, addr, max(`distinct` - `error`) AS at_least, groupUniqArray(observer) AS routers "+
		"FROM spr.spread FINAL WHERE side = 'src' AND kind = 'pair' GROUP BY hour, addr ORDER BY hour, at_least DESC, addr LIMIT 10 BY hour FORMAT TabSeparated")
	if want := "2026-03-01 10:00:00\t10.0.0.1\t4\t['edge-1']\n2026-03-01 10:00:00\t10.0.0.2\t2\t['edge-1']\n2026-03-01 10:00:00\t10.0.0.3\t1\t['edge-1']\n" +
		"2026-03-01 11:00:00\t10.9.9.9\t1\t['edge-1']\n"; bound != want {
		t.Errorf("docs' spread query:\n%s\nwant\n%s", bound, want)
	}
	create := ch.Query(t, "SHOW CREATE TABLE spr.spread")
	for _, w := range []string{"observer String", "window DateTime(", "side String", "addr String", "distinct UInt64", "error UInt64", "kind String", "ReplacingMergeTree", "ORDER BY (window, observer, side, addr, kind)"} {
		if !strings.Contains(create, w) {
			t.Errorf("SHOW CREATE TABLE spr.spread lacks %q:\n%s", w, create)
		}
	}

	// Without --spread, nothing in spread.
	e2 := newDestination(t, ch.Addr, "nospr", flow.KeyPair, "r2")
	if err := e2.Window(&record.Summary{WindowSummary: wins[0]}); err != nil {
		t.Fatal(err)
	}
	if n := queryUint(t, ch, "SELECT count() FROM nospr.spread"); n != 0 {
		t.Errorf("%d spread rows without --spread", n)
	}
}

// An existing database with flows and windows of before (no spread
// table) gets spread created beside them on the first write.
func TestSpreadTableAdded(t *testing.T) {
	ch := servers.StartClickHouse(t)
	e := newDestination(t, ch.Addr, "old", flow.KeyPair, "r")
	if err := e.Records(&record.Batch{ID: 1, Records: records(flow.KeyPair, 3, 0)}); err != nil {
		t.Fatal(err)
	}
	ch.Query(t, "DROP TABLE old.spread")
	e2 := newDestination(t, ch.Addr, "old", flow.KeyPair, "r")
	if err := e2.Records(&record.Batch{ID: 2, Records: records(flow.KeyPair, 3, 1)}); err != nil {
		t.Fatal(err)
	}
	if n := queryUint(t, ch, "SELECT count() FROM system.tables WHERE database = 'old' AND name = 'spread'"); n != 1 {
		t.Errorf("old.spread was not created")
	}
	if n := queryUint(t, ch, "SELECT count() FROM old.flows"); n != 6 {
		t.Errorf("%d flows rows, want 6", n)
	}
}

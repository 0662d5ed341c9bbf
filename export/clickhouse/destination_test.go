package clickhouse_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/export/clickhouse"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/record"
)

// Every key kind, IPv4, IPv6 and IPv4-mapped, with and without ports,
// comes back from the table as the jsonl writer prints it, to the
// nanosecond, in batches that span two months (two partitions).
func TestRecordsRoundTrip(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	for _, kind := range kinds {
		t.Run(kind.String(), func(t *testing.T) {
			db := "rt_" + strings.ReplaceAll(kind.String(), "5", "five")
			e := newDestination(t, ch.Addr, db, kind, "router-1")
			var want []string
			for id := uint64(1); id <= 3; id++ {
				recs := records(kind, 200, int(id))
				if err := e.Records(&record.Batch{ID: id << 40, Records: recs}); err != nil {
					t.Fatal(err)
				}
				want = append(want, wantRows(t, kind, "router-1", id<<40, recs)...)
			}
			slices.Sort(want)
			diffRows(t, readFlows(t, ch, db), want)
			st := e.Stats()
			if st.Batches != 3 || st.Rows != 600 || st.Checks != 0 {
				t.Errorf("stats %+v: want 3 batches, 600 rows, no checks", st)
			}
			// The batches spanned the month boundary: both partitions
			// exist.
			parts := ch.Query(t, "SELECT DISTINCT partition FROM system.parts WHERE database = '"+db+"' AND table = 'flows' AND active ORDER BY partition FORMAT TabSeparated")
			if parts != "202601\n202602\n" {
				t.Errorf("partitions of flows: %q, want 202601 and 202602", parts)
			}
		})
	}
}

// Times at the ends of the DateTime range, a time on a whole second,
// windows off (window 0), an empty observer and one that needs quoting in
// SQL.
func TestRecordsEdges(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	a := netip.MustParseAddr("192.0.2.1")
	maxNs := int64(math.MaxUint32)*1e9 + 999_999_999
	recs := []record.Record{
		{Key: flow.MakeKey(flow.KeySrc, a, a, 0, 0, 0), TimeNs: 0},
		{Key: flow.MakeKey(flow.KeySrc, a, a, 0, 0, 0), TimeNs: 1_700_000_000e9},
		{Key: flow.MakeKey(flow.KeySrc, a, a, 0, 0, 0), TimeNs: maxNs, WindowNs: int64(math.MaxUint32) * 1e9, WindowEndNs: maxNs, Windowed: true},
		// The same key at the same nanosecond twice (a filter may report
		// a key again): two rows.
		{Key: flow.MakeKey(flow.KeySrc, a, a, 0, 0, 0), TimeNs: 5e9 + 1},
		{Key: flow.MakeKey(flow.KeySrc, a, a, 0, 0, 0), TimeNs: 5e9 + 1},
	}
	for _, observer := range []string{"", `it's a "router" \ with	tab`} {
		db := fmt.Sprintf("edges%d", len(observer))
		e := newDestination(t, ch.Addr, db, flow.KeySrc, observer)
		b := &record.Batch{ID: 7, Records: recs}
		if err := e.Records(b); err != nil {
			t.Fatal(err)
		}
		diffRows(t, readFlows(t, ch, db), wantRows(t, flow.KeySrc, observer, 7, recs))
		// A retry finds every row, the duplicate pair included, and the
		// quoted observer matches.
		b.Retry = true
		if err := e.Records(b); err != nil {
			t.Fatal(err)
		}
		diffRows(t, readFlows(t, ch, db), wantRows(t, flow.KeySrc, observer, 7, recs))
		if st := e.Stats(); st.RowsFound != uint64(len(recs)) || st.Rows != uint64(len(recs)) {
			t.Errorf("observer %q: stats %+v: want %d rows inserted once and found once", observer, st, len(recs))
		}
	}
}

// A batch's own observer (record.Batch.Observer: the run that spooled it)
// goes in its rows, whatever the Destination's; a batch without one takes
// the Destination's. A retry of the batch after it landed looks for its rows
// under its own observer, finds them all and inserts nothing.
func TestRecordsBatchObserver(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	e := newDestination(t, ch.Addr, "obs", flow.Key5Tuple, "b")
	spooled := &record.Batch{ID: 11, Records: records(flow.Key5Tuple, 200, 1), Observer: "a"}
	own := &record.Batch{ID: 12, Records: records(flow.Key5Tuple, 100, 2)}
	for _, b := range []*record.Batch{spooled, own} {
		if err := e.Records(b); err != nil {
			t.Fatal(err)
		}
	}
	want := slices.Concat(wantRows(t, flow.Key5Tuple, "a", 11, spooled.Records), wantRows(t, flow.Key5Tuple, "b", 12, own.Records))
	slices.Sort(want)
	diffRows(t, readFlows(t, ch, "obs"), want)

	retry := *spooled
	retry.Retry = true
	if err := e.Records(&retry); err != nil {
		t.Fatal(err)
	}
	diffRows(t, readFlows(t, ch, "obs"), want)
	if st := e.Stats(); st.Checks != 1 || st.RowsFound != 200 || st.Rows != 300 {
		t.Errorf("stats %+v: want 1 check finding the 200 rows of batch 11, and 300 rows inserted in all", st)
	}
	if got := queryUint(t, ch, "SELECT count() FROM obs.flows WHERE observer = 'a'"); got != 200 {
		t.Errorf("%d rows under observer a after the retry, want 200", got)
	}
}

// Records that no row can hold reject the batch before anything is sent:
// nothing reaches the table, and the error says why.
func TestBadRecordsRejected(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	e := newDestination(t, ch.Addr, "bad", flow.KeySrc, "r")
	a := netip.MustParseAddr("192.0.2.1")
	good := record.Record{Key: flow.MakeKey(flow.KeySrc, a, a, 0, 0, 0), TimeNs: 1e18}
	for _, tc := range []struct {
		name string
		bad  record.Record
		want string
	}{
		{"other kind", record.Record{Key: flow.MakeKey(flow.KeyDst, a, a, 0, 0, 0), TimeNs: 1e18}, "not a valid src key"},
		{"invalid key", record.Record{TimeNs: 1e18}, "not a valid src key"},
		{"before 1970", record.Record{Key: good.Key, TimeNs: -1}, "outside the DateTime range"},
		{"after 2106", record.Record{Key: good.Key, TimeNs: (math.MaxUint32 + 1) * 1e9}, "outside the DateTime range"},
		{"window before 1970", record.Record{Key: good.Key, TimeNs: 1e18, WindowNs: -60e9, WindowEndNs: 1}, "window start"},
	} {
		err := e.Records(&record.Batch{ID: 1, Records: []record.Record{good, tc.bad}})
		if !errors.Is(err, record.ErrRejected) || !errors.Is(err, clickhouse.ErrBadRecord) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "record 1") {
			t.Errorf("%s: error %v: want ErrBadRecord, record.ErrRejected, record 1 and %q", tc.name, err, tc.want)
		}
	}
	if st := e.Stats(); st.Requests != 0 {
		t.Errorf("%d requests for batches that were all rejected", st.Requests)
	}
	err := e.Window(&record.Summary{WindowSummary: record.WindowSummary{StartNs: -1, EndNs: 1}})
	if !errors.Is(err, record.ErrRejected) || !errors.Is(err, clickhouse.ErrBadRecord) {
		t.Errorf("window before 1970: %v, want ErrBadRecord and record.ErrRejected", err)
	}
}

// A summary becomes a windows row with every count, its sketch in base64,
// and a second Window of the same summary adds nothing.
func TestWindows(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	e := newDestination(t, ch.Addr, "win", flow.Key5Tuple, "default-observer")
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	sums := []record.Summary{{
		WindowSummary: record.WindowSummary{
			StartNs: start.UnixNano(), EndNs: start.Add(time.Hour).UnixNano(),
			Packets: 1000, Malformed: 3, Keys: 990, Distinct: 120, Dropped: 4, Skipped: 2, Prefiltered: 11, Late: 5,
			DistinctEstimate: 118, Sketch: []byte{0, 1, 2, 0xfe, 0xff, '\n', '\t'},
		},
		Observer: "edge-7",
		Filter:   "qht:mem=64KiB",
	}, {
		WindowSummary: record.WindowSummary{
			StartNs: start.Add(time.Hour).UnixNano(), EndNs: start.Add(90 * time.Minute).UnixNano(),
			Packets: 1, Keys: 1, Distinct: 1, DistinctEstimate: 1, Final: true,
		},
		Filter: "exact",
	}}
	for i := range sums {
		if err := e.Window(&sums[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Window(&sums[0]); err != nil { // given again
		t.Fatal(err)
	}
	got := ch.Query(t, "SELECT observer, toUnixTimestamp(window_start), toUnixTimestamp(window_end), packets, malformed, skipped, keys, distinct, distinct_estimate, dropped, sketch, prefiltered, late, final, filter, kind FROM win.windows ORDER BY window_start FORMAT TabSeparated")
	want := fmt.Sprintf("edge-7\t%d\t%d\t1000\t3\t2\t990\t120\t118\t4\t%s\t11\t5\t0\tqht:mem=64KiB\t5tuple\n"+
		"default-observer\t%d\t%d\t1\t0\t0\t1\t1\t1\t0\t\t0\t0\t1\texact\t5tuple\n",
		start.Unix(), start.Add(time.Hour).Unix(), base64.StdEncoding.EncodeToString(sums[0].Sketch),
		start.Add(time.Hour).Unix(), start.Add(90*time.Minute).Unix())
	if got != want {
		t.Errorf("windows:\n%s\nwant:\n%s", got, want)
	}
	if st := e.Stats(); st.Windows != 2 || st.WindowsFound != 1 || st.Checks != 3 {
		t.Errorf("stats %+v: want 2 windows inserted, 1 found, 3 checks", st)
	}
	// The same summary from another observer is another row.
	other := sums[0]
	other.Observer = "edge-8"
	if err := e.Window(&other); err != nil {
		t.Fatal(err)
	}
	if n := queryUint(t, ch, "SELECT count() FROM win.windows"); n != 3 {
		t.Errorf("%d windows rows, want 3", n)
	}
}

// The tables are created once, found by a later Destination and reused; a
// table made by hand with plain DateTime columns and a column of its own
// is written too.
func TestCreateAndReuse(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	recs := records(flow.KeyPair, 50, 0)
	e1 := newDestination(t, ch.Addr, "reuse", flow.KeyPair, "a")
	if err := e1.Records(&record.Batch{ID: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	created := ch.Query(t, "SHOW CREATE TABLE reuse.flows")
	for _, part := range []string{"ENGINE = ReplacingMergeTree", "PARTITION BY toYYYYMM(window)", "ORDER BY (window, observer, src, dst, kind, key, ts, ts_ns)", "ts_ns UInt32", "batch UInt64"} {
		if !strings.Contains(created, part) {
			t.Errorf("SHOW CREATE TABLE reuse.flows lacks %q:\n%s", part, created)
		}
	}
	e2 := newDestination(t, ch.Addr, "reuse", flow.KeyPair, "b")
	if err := e2.Records(&record.Batch{ID: 2, Records: recs}); err != nil {
		t.Fatal(err)
	}
	if err := e2.Window(&record.Summary{WindowSummary: record.WindowSummary{StartNs: 60e9, EndNs: 120e9}}); err != nil {
		t.Fatal(err)
	}
	if again := ch.Query(t, "SHOW CREATE TABLE reuse.flows"); again != created {
		t.Errorf("flows changed:\n%s\nwas:\n%s", again, created)
	}
	want := append(wantRows(t, flow.KeyPair, "a", 1, recs), wantRows(t, flow.KeyPair, "b", 2, recs)...)
	slices.Sort(want)
	diffRows(t, readFlows(t, ch, "reuse"), want)

	// A database that exists with a flows table made by hand: windows is
	// created beside it.
	ch.Query(t, "CREATE DATABASE own")
	ch.Query(t, "CREATE TABLE own.flows (observer String, window DateTime, ts DateTime, ts_ns UInt32, key String, src String, dst String, "+
		"proto UInt8, sport UInt16, dport UInt16, kind String, batch UInt64, note String DEFAULT 'mine') ENGINE = MergeTree ORDER BY ts")
	e3 := newDestination(t, ch.Addr, "own", flow.KeyPair, "c")
	if err := e3.Records(&record.Batch{ID: 3, Records: recs}); err != nil {
		t.Fatal(err)
	}
	diffRows(t, readFlows(t, ch, "own"), wantRows(t, flow.KeyPair, "c", 3, recs))
	if n := queryUint(t, ch, "SELECT count() FROM own.flows WHERE note = 'mine'"); n != uint64(len(recs)) {
		t.Errorf("%d rows with the default of the table's own column, want %d", n, len(recs))
	}
	if n := queryUint(t, ch, "SELECT count() FROM system.tables WHERE database = 'own' AND name = 'windows'"); n != 1 {
		t.Errorf("own.windows was not created")
	}
}

// A table with a column of another type, or without a column, is a
// transient error that names the column (the rows are not at fault: they
// wait for the table to be fixed); once it is, the same Destination writes.
func TestSchemaMismatch(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	ch.Query(t, "CREATE DATABASE mis")
	ch.Query(t, "CREATE TABLE mis.flows (observer String, window DateTime, ts DateTime, ts_ns UInt32, key String, src String, dst String, "+
		"proto UInt8, sport UInt32, dport UInt16, batch UInt64) ENGINE = MergeTree ORDER BY window")
	e := newDestination(t, ch.Addr, "mis", flow.Key5Tuple, "r")
	recs := records(flow.Key5Tuple, 10, 0)
	check := func(column, want string) {
		t.Helper()
		err := e.Records(&record.Batch{ID: 1, Records: recs})
		var se *clickhouse.SchemaError
		if errors.Is(err, record.ErrRejected) || !errors.Is(err, clickhouse.ErrSchema) || !errors.As(err, &se) {
			t.Fatalf("error %v: want a transient *SchemaError wrapping ErrSchema", err)
		}
		if se.Table != "mis.flows" || se.Column != column || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q (%+v): want table mis.flows, column %s, and %q", err, se, column, want)
		}
	}
	check("sport", "column sport is UInt32, want UInt16")
	ch.Query(t, "ALTER TABLE mis.flows MODIFY COLUMN sport UInt16")
	check("kind", "has no column kind (want String)")
	ch.Query(t, "ALTER TABLE mis.flows ADD COLUMN kind String")
	if err := e.Records(&record.Batch{ID: 1, Records: recs}); err != nil {
		t.Fatalf("after the table was fixed: %v", err)
	}
	diffRows(t, readFlows(t, ch, "mis"), wantRows(t, flow.Key5Tuple, "r", 1, recs))

	// Windows too (the Destination created it, beside flows).
	ch.Query(t, "DROP TABLE mis.windows")
	ch.Query(t, "CREATE TABLE mis.windows (observer String, window_start DateTime, window_end DateTime) ENGINE = MergeTree ORDER BY window_start")
	e2 := newDestination(t, ch.Addr, "mis", flow.Key5Tuple, "r")
	err := e2.Window(&record.Summary{WindowSummary: record.WindowSummary{StartNs: 0, EndNs: 60e9}})
	var se *clickhouse.SchemaError
	if !errors.As(err, &se) || se.Table != "mis.windows" || se.Column != "packets" || errors.Is(err, record.ErrRejected) {
		t.Fatalf("windows without packets: %v", err)
	}
}

// A table dropped under a running Destination is created again by the next
// attempt; the failed attempt is transient.
func TestTableDroppedWhileRunning(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	e := newDestination(t, ch.Addr, "dropped", flow.KeySrc, "r")
	recs := records(flow.KeySrc, 10, 0)
	if err := e.Records(&record.Batch{ID: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	ch.Query(t, "DROP TABLE dropped.flows")
	err := e.Records(&record.Batch{ID: 2, Records: recs})
	var se *clickhouse.ServerError
	if err == nil || errors.Is(err, record.ErrRejected) || !errors.As(err, &se) || se.Code != 60 {
		t.Fatalf("insert into a dropped table: %v; want a transient ServerError with code 60 (UNKNOWN_TABLE)", err)
	}
	if err := e.Records(&record.Batch{ID: 2, Records: recs}); err != nil {
		t.Fatalf("the attempt after: %v", err)
	}
	diffRows(t, readFlows(t, ch, "dropped"), wantRows(t, flow.KeySrc, "r", 2, recs))
}

// A server that is down when the Destination starts: New succeeds, writes
// fail with transient errors, and succeed once the server is up, each row
// once.
func TestUnreachableThenUp(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	ch.Stop(t)
	e := newDestination(t, ch.Addr, "late", flow.KeyDst, "r")
	recs := records(flow.KeyDst, 100, 0)
	b := &record.Batch{ID: 9, Records: recs}
	sum := &record.Summary{WindowSummary: record.WindowSummary{StartNs: 0, EndNs: 60e9, Packets: 1}}
	for range 2 {
		if err := e.Records(b); err == nil || errors.Is(err, record.ErrRejected) {
			t.Fatalf("Records with the server down: %v, want a transient error", err)
		}
		if err := e.Window(sum); err == nil || errors.Is(err, record.ErrRejected) {
			t.Fatalf("Window with the server down: %v, want a transient error", err)
		}
	}
	ch.Start(t)
	if err := e.Records(b); err != nil {
		t.Fatal(err)
	}
	if err := e.Window(sum); err != nil {
		t.Fatal(err)
	}
	diffRows(t, readFlows(t, ch, "late"), wantRows(t, flow.KeyDst, "r", 9, recs))
	if n := queryUint(t, ch, "SELECT count() FROM late.windows"); n != 1 {
		t.Errorf("%d windows rows, want 1", n)
	}
	// Connections were refused: nothing could have landed, so nothing
	// was looked for.
	if st := e.Stats(); st.Checks != 1 || st.Failures != 4 {
		t.Errorf("stats %+v: want 4 failed requests and 1 check (the summary's, always made)", st)
	}
}

// The network-wide query of docs/export.md: distinct sources per
// window over the rows of several observers, equal to the exact union.
func TestDistinctSourcesPerWindow(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	exact := map[int64]map[string]bool{}
	for i, observer := range []string{"r1", "r2", "r3"} {
		e := newDestination(t, ch.Addr, "net", flow.Key5Tuple, observer)
		// Seeds overlap: routers see some of the same sources.
		recs := append(records(flow.Key5Tuple, 300, i), records(flow.Key5Tuple, 300, i+1)...)
		for j := 0; j < len(recs); j += 100 {
			if err := e.Records(&record.Batch{ID: uint64(i)<<32 | uint64(j), Records: recs[j : j+100]}); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range recs {
			w := r.WindowNs / 1e9
			if exact[w] == nil {
				exact[w] = map[string]bool{}
			}
			exact[w][r.Key.Src().String()] = true
		}
	}
	var want strings.Builder
	windows := make([]int64, 0, len(exact))
	for w := range exact {
		windows = append(windows, w)
	}
	slices.Sort(windows)
	for _, w := range windows {
		fmt.Fprintf(&want, "%d\t%d\n", w, len(exact[w]))
	}
	got := ch.Query(t, "SELECT toUnixTimestamp(window) AS w, uniqExact(src) FROM net.flows GROUP BY window ORDER BY window FORMAT TabSeparated")
	if got != want.String() {
		t.Errorf("distinct sources per window:\n%s\nwant:\n%s", got, want.String())
	}
	// The query as README gives it, with the window as a time, runs.
	ch.Query(t, "SELECT window, uniqExact(src) FROM net.flows GROUP BY window ORDER BY window")

	// Per hour, with a router of dst keys in the table too (its rows
	// have no source).
	d := newDestination(t, ch.Addr, "net", flow.KeyDst, "r4")
	if err := d.Records(&record.Batch{ID: 1 << 40, Records: records(flow.KeyDst, 100, 7)}); err != nil {
		t.Fatal(err)
	}
	hourly := map[int64]map[string]bool{}
	for w, srcs := range exact {
		h := w - w%3600
		if hourly[h] == nil {
			hourly[h] = map[string]bool{}
		}
		for s := range srcs {
			hourly[h][s] = true
		}
	}
	if len(hourly) != 2 {
		t.Fatalf("records span %d hours, want 2", len(hourly))
	}
	want.Reset()
	for _, h := range slices.Sorted(maps.Keys(hourly)) {
		fmt.Fprintf(&want, "%d\t%d\n", h, len(hourly[h]))
	}
	got = ch.Query(t, "SELECT toUnixTimestamp(hour), sources FROM ("+
		"SELECT toStartOfHour(window) AS hour, uniqExact(src) AS sources FROM net.flows WHERE src != '' GROUP BY hour ORDER BY hour"+
		") FORMAT TabSeparated")
	if got != want.String() {
		t.Errorf("distinct sources per hour:\n%s\nwant:\n%s", got, want.String())
	}
}

// Every way to give the password logs in to a real server: in the URL, in
// a password_file (which wins over a wrong FLOWDEDUP_CLICKHOUSE_PASSWORD),
// through systemd's ${CREDENTIALS_DIRECTORY}, in the environment alone.
// Without the password, or with a wrong one, the insert is refused for
// good (record.ErrRejected) with the server's own message, which names the
// user and holds no password.
func TestAuthentication(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	const wrongPW = "Wrong-Pw-7"
	dir := t.TempDir()
	right := writeFile(t, dir, "right", testutil.ClickHousePassword+"\n")
	wrong := writeFile(t, dir, "wrong", wrongPW+"\n")
	writeFile(t, dir, "clickhouse-password", testutil.ClickHousePassword+"\n")
	user := "clickhouse://" + testutil.ClickHouseUser
	at := "@" + ch.Addr + "/auth"
	recs := records(flow.KeySrc, 5, 0)
	var want []string
	for i, tc := range []struct {
		name string
		url  string
		env  map[string]string
		ok   bool
		code int // the server's error code (18.16's) when not ok
	}{
		{"in the URL", user + ":" + testutil.ClickHousePassword + at, nil, true, 0},
		{"password_file over the environment", user + at + "?password_file=" + url.QueryEscape(right),
			map[string]string{clickhouse.PasswordEnv: wrongPW}, true, 0},
		{"systemd credential", user + at + "?password_file=${CREDENTIALS_DIRECTORY}/clickhouse-password",
			map[string]string{clickhouse.CredentialsDirVar: dir}, true, 0},
		{"environment", user + at, map[string]string{clickhouse.PasswordEnv: testutil.ClickHousePassword}, true, 0},
		{"none", user + at, nil, false, 194},
		{"wrong password_file over a right environment", user + at + "?password_file=" + url.QueryEscape(wrong),
			map[string]string{clickhouse.PasswordEnv: testutil.ClickHousePassword}, false, 193},
		{"wrong in the URL", user + ":" + wrongPW + at, nil, false, 193},
	} {
		u, err := clickhouse.ParseURL(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		cfg, err := u.Config(fakeEnv(tc.env))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		observer := fmt.Sprintf("r%d", i)
		cfg.Kind, cfg.Observer = flow.KeySrc, observer
		e, err := clickhouse.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = e.Records(&record.Batch{ID: uint64(i + 1), Records: recs})
		e.Close()
		if tc.ok {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			want = append(want, wantRows(t, flow.KeySrc, observer, uint64(i+1), recs)...)
			continue
		}
		// 18.16 says "Password required for user flowdedup" (194
		// REQUIRED_PASSWORD) or "Wrong password for user flowdedup" (193
		// WRONG_PASSWORD); current releases "flowdedup: Authentication
		// failed" (516) for both.
		var se *clickhouse.ServerError
		switch {
		case errors.Is(err, record.ErrRejected) || !errors.As(err, &se) || se.Code != tc.code:
			t.Errorf("%s: %v, want a transient *ServerError of code %d", tc.name, err, tc.code)
		case !strings.Contains(err.Error(), "assword") || !strings.Contains(err.Error(), "for user "+testutil.ClickHouseUser) ||
			!strings.Contains(err.Error(), "password_file"):
			t.Errorf("%s: %v, want the server's message about the password of %s", tc.name, err, testutil.ClickHouseUser)
		case strings.Contains(err.Error(), wrongPW) || strings.Contains(err.Error(), testutil.ClickHousePassword):
			t.Errorf("%s: the error shows a password: %v", tc.name, err)
		default:
			t.Logf("%s: %v", tc.name, err)
		}
	}
	slices.Sort(want)
	diffRows(t, readFlows(t, ch, "auth"), want)
}

// Use after Close.
func TestClosed(t *testing.T) {
	e, err := clickhouse.New(clickhouse.Config{Address: "127.0.0.1:1", Database: "x", Kind: flow.KeySrc})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Records": e.Records(&record.Batch{Records: records(flow.KeySrc, 1, 0)}),
		"Window":  e.Window(&record.Summary{}),
		"Flush":   e.Flush(),
		"Close":   e.Close(),
	} {
		if !errors.Is(err, clickhouse.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	ok := clickhouse.Config{Address: "127.0.0.1:8123", Database: "flows", Kind: flow.KeySrc}
	for _, tc := range []struct {
		name string
		edit func(*clickhouse.Config)
	}{
		{"no port", func(c *clickhouse.Config) { c.Address = "127.0.0.1" }},
		{"no database", func(c *clickhouse.Config) { c.Database = "" }},
		{"bad database", func(c *clickhouse.Config) { c.Database = "a-b" }},
		{"no kind", func(c *clickhouse.Config) { c.Kind = 0 }},
		{"password alone", func(c *clickhouse.Config) { c.Password = "x" }},
		{"negative timeout", func(c *clickhouse.Config) { c.Timeout = -time.Second }},
	} {
		cfg := ok
		tc.edit(&cfg)
		if _, err := clickhouse.New(cfg); !errors.Is(err, clickhouse.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", tc.name, err)
		}
	}
	if _, err := clickhouse.New(ok); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
	"github.com/flowdedup/flowdedup/internal/testutil/testexporter"
)

// TestClickHouse runs the ClickHouse scenarios against one server, in
// order (the last stops and starts it), beside the package's other
// parallel tests: they use servers and ports of their own.
func TestClickHouse(t *testing.T) {
	t.Parallel()
	ch := servers.StartClickHouse(t)
	flowdedup(t) // build before the clocks of the subtests start
	t.Run("DoneWhen", func(t *testing.T) { testDoneWhen(t, ch) })
	t.Run("Fleet", func(t *testing.T) { testFleet(t, ch) })
	t.Run("Prefix", func(t *testing.T) { testPrefix(t, ch) })
	t.Run("SchemaError", func(t *testing.T) { testSchemaError(t, ch) })
	t.Run("WrongPassword", func(t *testing.T) { testWrongPassword(t, ch) })
	t.Run("Rerun", func(t *testing.T) { testRerun(t, ch) })
	t.Run("Migration", func(t *testing.T) { testMigration(t, ch) })
	t.Run("ReplayWaits", func(t *testing.T) { testReplayWaits(t, ch) })
	t.Run("StoppedMidReplay", func(t *testing.T) { testStoppedMidReplay(t, ch) })
}

// chDateTime formats a time as ClickHouse writes a DateTime('UTC') in
// TabSeparated.
func chDateTime(t time.Time) string { return t.UTC().Format(time.DateTime) }

// The "done when", as a new user would try it:
//
//	flowdedup replay --window 1h --export clickhouse://127.0.0.1:PORT/flows --export ipfix://127.0.0.1:PORT testdata/pcaps/*.pcap
//
// fills both: the README's SQL returns the exact distinct sources of the
// hour, flows holds each record once, and nfdump reads back the flows.
func testDoneWhen(t *testing.T, ch *servers.ClickHouse) {
	col := servers.StartNfcapd(t)
	files, err := filepath.Glob(pcap("*.pcap"))
	if err != nil || len(files) < 5 {
		t.Fatalf("testdata captures: %v %v", files, err)
	}
	out := filepath.Join(t.TempDir(), "sources.jsonl")
	args := append([]string{"replay", "--window", "1h", "--export", "clickhouse://" + ch.Addr + "/flows", "--export", "ipfix://" + col.Addr,
		"--out", out}, files...)
	r := mustRun(t, args...)
	recs := readRecords(t, out)
	for dest, sent := range map[string]string{
		"clickhouse://" + ch.Addr + "/flows": fmt.Sprintf("sent %d records and 1 window summaries", len(recs)),
		"ipfix://" + col.Addr:                fmt.Sprintf("sent %d records (IPFIX carries no window summaries)", len(recs)),
	} {
		if !strings.Contains(r.stderr, fmt.Sprintf("export %s: %s, dropped 0\n", dest, sent)) {
			t.Errorf("%s: totals do not say all %d records were sent:\n%s", dest, len(recs), r.stderr)
		}
	}

	// The exact distinct sources of each hour, from an exact replay.
	perHour := map[string]map[string]bool{}
	for _, e := range exactRecords(t, append([]string{"--key", "src", "--window", "1h"}, files...)...) {
		h := chDateTime(e.Window)
		if perHour[h] == nil {
			perHour[h] = map[string]bool{}
		}
		perHour[h][e.Src] = true
	}
	var want strings.Builder
	for _, h := range slices.Sorted(maps.Keys(perHour)) {
		fmt.Fprintf(&want, "%s\t%d\n", h, len(perHour[h]))
	}
	got := ch.Query(t, "SELECT toStartOfHour(window) AS hour, uniqExact(src) FROM flows.flows GROUP BY hour ORDER BY hour")
	if got != want.String() || len(perHour) != 1 {
		t.Errorf("distinct sources per hour: ClickHouse says\n%swant (one hour)\n%s", got, want.String())
	}
	if got, want := ch.Query(t, "SELECT count(), uniqExact(src) FROM flows.flows"), fmt.Sprintf("%d\t%d\n", len(recs), len(recs)); got != want {
		t.Errorf("flows: count(), uniqExact(src) = %q, want the %d records once each", got, len(recs))
	}
	if got := ch.Query(t, "SELECT count() FROM flows.windows"); got != "1\n" {
		t.Errorf("windows: %q rows, want 1", got)
	}

	st := col.Stop(t)
	if st.SequenceErrors != 0 || st.BadPackets != 0 || st.Dropped != 0 {
		t.Errorf("nfcapd counted %+v", st)
	}
	sameFlows(t, col.Flows(t), recs)
}

// fleetRouters are the three routers of the fleet test: captures of 30
// minutes made with the same seed, so with the same hosts (more flows add
// clients, so each capture's sources overlap the others'), and other flow
// counts, packet counts and IPv6 fractions, so that each router sees its
// own subset of the sources in each minute.
var fleetRouters = []struct{ name, flows, packets, ipv6 string }{
	{"r1", "18000", "20000", "0.2"},
	{"r2", "24000", "26000", "0.3"},
	{"r3", "30000", "33000", "0.4"},
}

// The fleet of issue 9: three routers, run at once, see three captures
// whose sources overlap (IPv4 and IPv6) and export to one ClickHouse with
// --window 1m --summary-sketch. r1 and r2 run flowdedup replay; r3 is a
// router that exports flow records instead: softflowd reads its capture
// (-a: the flows' times are the capture's) and exports IPFIX to flowdedup
// collect --observer r3, whose flows rows carry the exporter
// (127.0.0.1#0) and whose window rows carry r3. What r3 observed is a
// source per flow record, in the window of the flow's start: nfdump's
// reading of the same export (softflowd is deterministic on a file) is
// its ground truth. Then, for every minute, the distinct sources
// ClickHouse counts over all routers (the network-wide query of
// docs/export.md) are the exact union computed from the captures, and
// `flowdedup merge` of the three summary files estimates it within 2%.
// The routers run the exact filter, so that what reaches ClickHouse
// depends on the export alone.
//
// Tolerance: the merged sketch's estimate has the error of one HyperLogLog
// of 2^14 registers, a relative standard error of 1.04/sqrt(2^14) = 0.81%
// at most; for the about 2000 sources of a minute here (an eighth of the
// registers) the estimator counts empty registers, whose error is smaller
// still, about 0.55% (linear counting: sqrt(m(e^t-t-1))/n with t = n/m;
// the worst of the 30 minutes is 1.06%, about two standard errors). 2% is
// more than 3.5 standard errors, so a correct merge passes; the
// captures and the sketch seed are fixed, so the outcome does not vary
// between runs. A merge that loses a router's sketch, or counts a shared
// source twice, is off by 10% or more (the routers share 15-20% of a
// minute's sources).
func testFleet(t *testing.T, ch *servers.ClickHouse) {
	captureStart := time.Unix(1767225600, 0) // flowdedup gen's first packet: 2026-01-01T00:00:00Z
	dir := t.TempDir()
	exact := map[string]map[string]bool{} // minute -> sources
	type router struct {
		name, capture, summary, out string
		replay                      *testutil.Process
		collect                     *collector // r3
	}
	routers := make([]*router, len(fleetRouters))
	for i, fr := range fleetRouters {
		capture := gen(t, dir, fr.name+".pcap", "--seed", "31", "--flows", fr.flows, "--packets", fr.packets, "--ipv6", fr.ipv6, "--duration", "1800s")
		add := func(window time.Time, src string) {
			w := chDateTime(window)
			if exact[w] == nil {
				exact[w] = map[string]bool{}
			}
			exact[w][src] = true
		}
		if fr.name == "r3" {
			// softflowd sends its 1,300 datagrams at once, more than
			// nfcapd's socket buffer holds: it gets them in bursts.
			nf := servers.StartNfcapd(t)
			nf.Send(t, testexporter.CaptureSoftflowd(t, capture, 10, "-a"))
			for _, f := range nf.Flows(t) {
				first := f.First
				if f.Duration < 0 {
					// nfdump 1.7 shows some of softflowd's flows with their
					// last packet first (a negative duration); the flow
					// began at the earlier (tshark shows the packets).
					first = first.Add(f.Duration)
				}
				if first.Unix() == 0 {
					// softflowd -a counts uptime from the capture's first
					// packet; nfdump reads a flowStartSysUpTime of 0 (a
					// flow of that packet) as no time, and shows the epoch.
					first = captureStart
				}
				add(first.Truncate(time.Minute), f.Src.String())
			}
		} else {
			for _, e := range exactRecords(t, "--key", "src", "--window", "1m", capture) {
				add(e.Window, e.Src)
			}
		}
		routers[i] = &router{name: fr.name, capture: capture, summary: filepath.Join(dir, fr.name+".summary.jsonl"), out: filepath.Join(dir, fr.name+".jsonl")}
	}
	all := map[string]bool{}
	for _, set := range exact {
		for s := range set {
			all[s] = true
		}
	}

	// The routers, at once. r3's collect keeps the 30 minutes open: the
	// flows come when softflowd has read the capture, in its order. The
	// server takes three routers' inserts at once on a machine that runs
	// other tests too: the drain at exit waits for a slow insert (the
	// default's 10 s, run out, would count its rows as dropped).
	for _, r := range routers {
		common := []string{"--key", "src", "--filter", "exact", "--window", "1m", "--summary-sketch",
			"--observer", r.name, "--export", "clickhouse://" + ch.Addr + "/fleet", "--export-drain", "1m"}
		if r.name == "r3" {
			r.collect = startCollector(t, []string{"netflow://127.0.0.1:0"}, append(common, "--lateness", "30m")...)
			r.out, r.summary = r.collect.out, r.collect.summary
			continue
		}
		r.replay = testutil.StartProcess(t, exec.Command(flowdedup(t), append([]string{"replay", "--summary", r.summary, "--out", r.out}, append(common, r.capture)...)...), "", 0)
	}
	testexporter.Softflowd(t, routers[2].capture, routers[2].collect.addrs[0], 10, "-a")
	records := 0
	for _, r := range routers {
		var stderr string
		if r.collect != nil {
			r.collect.stop(t)
			stderr = r.collect.stderr()
		} else {
			if err := r.replay.Wait(t, 10*time.Minute); err != nil {
				t.Fatalf("%s: %v\n%s", r.name, err, r.replay.Log())
			}
			stderr = r.replay.Log()
		}
		n := countLines(t, r.out)
		if r.collect != nil && !strings.Contains(stderr, "kernel drops 0") {
			t.Errorf("r3: collect lost datagrams of softflowd's burst:\n%s", stderr)
		}
		if !strings.Contains(stderr, fmt.Sprintf("sent %d records and 30 window summaries, dropped 0", n)) {
			t.Errorf("%s: totals do not say all %d records and 30 summaries were sent:\n%s", r.name, n, stderr)
		}
		records += n
	}

	// ClickHouse: the network-wide distinct sources of each minute.
	var want strings.Builder
	for _, w := range slices.Sorted(maps.Keys(exact)) {
		fmt.Fprintf(&want, "%s\t%d\n", w, len(exact[w]))
	}
	if len(exact) != 30 {
		t.Fatalf("the captures span %d minutes, want 30", len(exact))
	}
	if got := ch.Query(t, "SELECT window, uniqExact(src) FROM fleet.flows GROUP BY window ORDER BY window"); got != want.String() {
		t.Errorf("SELECT window, uniqExact(src): ClickHouse says\n%swant the exact union per window\n%s", got, want.String())
	}
	if got, want := ch.Query(t, "SELECT count(), uniqExact(observer, window, key), uniqExact(observer) FROM fleet.flows"), fmt.Sprintf("%d\t%d\t3\n", records, records); got != want {
		t.Errorf("flows: count(), distinct (observer, window, key), observers = %q, want %q", got, want)
	}
	if got := ch.Query(t, "SELECT DISTINCT observer FROM fleet.flows ORDER BY observer"); got != "127.0.0.1#0\nr1\nr2\n" {
		t.Errorf("flows' observers:\n%swant r3's exporter, r1 and r2", got)
	}
	if got := ch.Query(t, "SELECT observer, count(), countIf(sketch != '') FROM fleet.windows GROUP BY observer ORDER BY observer"); got != "r1\t30\t30\nr2\t30\t30\nr3\t30\t30\n" {
		t.Errorf("windows rows by observer (count, with a sketch):\n%s", got)
	}

	// merge of the three summary files.
	type group struct {
		Start            time.Time `json:"start"`
		Observers        []string  `json:"observers"`
		Summaries        int       `json:"summaries"`
		DistinctEstimate uint64    `json:"distinct_estimate"`
		SumDistinct      uint64    `json:"sum_distinct"`
	}
	merge := func(args ...string) []group {
		r := mustRun(t, append([]string{"merge", "--format", "json"}, args...)...)
		var gs []group
		for _, l := range lines(r.stdout) {
			var g group
			if err := json.Unmarshal([]byte(l), &g); err != nil {
				t.Fatalf("merge output %q: %v", l, err)
			}
			gs = append(gs, g)
		}
		return gs
	}
	summaries := []string{routers[0].summary, routers[1].summary, routers[2].summary}
	worst := 0.0
	gs := merge(summaries...)
	for _, g := range gs {
		n := len(exact[chDateTime(g.Start)])
		e := math.Abs(float64(g.DistinctEstimate)-float64(n)) / float64(n)
		worst = max(worst, e)
		if e > 0.02 || g.Summaries != 3 || strings.Join(g.Observers, ",") != "r1,r2,r3" || g.SumDistinct < uint64(n)*11/10 {
			t.Errorf("minute %s: merge %+v; want 3 summaries of r1,r2,r3 estimating the union's %d within 2%%, which their sum overstates by 10%% or more",
				g.Start, g, n)
		}
	}
	if len(gs) != 30 {
		t.Errorf("merge gave %d windows, want 30", len(gs))
	}
	hour := merge(append([]string{"--by", "1h"}, summaries...)...)
	if len(hour) != 1 || hour[0].Summaries != 90 || math.Abs(float64(hour[0].DistinctEstimate)-float64(len(all))) > 0.02*float64(len(all)) {
		t.Errorf("merge --by 1h: %+v; want one hour of 90 summaries estimating the %d sources within 2%%", hour, len(all))
	}
	t.Logf("merge: worst error over the 30 minutes %.2f%% (unions of about 2000 sources); the hour: %d estimated, %d exact",
		100*worst, hour[0].DistinctEstimate, len(all))
}

// A ClickHouse whose flows table has a column of another type: the rows
// are not at fault, so with --spool they wait on disk; the message names
// the column, once. Once the table is dropped (and so created again), the
// next run sends them, once each.
func testSchemaError(t *testing.T, ch *servers.ClickHouse) {
	ch.Query(t, "CREATE DATABASE bad")
	ch.Query(t, "CREATE TABLE bad.flows (observer String, window DateTime, ts DateTime, ts_ns UInt32, key String, src UInt32, dst String, "+
		"proto UInt8, sport UInt16, dport UInt16) ENGINE = MergeTree ORDER BY window")
	url := "clickhouse://" + ch.Addr + "/bad"
	fixed := func() { ch.Query(t, "DROP TABLE bad.flows") }
	said := spoolUntilOperatorFixes(t, ch, url, "bad", fixed)
	if !strings.Contains(said, "src") || !strings.Contains(said, "UInt32") || !strings.Contains(said, "String") {
		t.Errorf("the notice does not name column src, its type and the type wanted:\n%s", said)
	}
}

// The wrong-then-right password of issue 21: a run whose password file
// holds a wrong password keeps its batches in the spool and says once
// what to fix; once the file is right, the next run delivers the first
// run's records, each once.
func testWrongPassword(t *testing.T, ch *servers.ClickHouse) {
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte("wrong-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := "clickhouse://" + servers.ClickHouseUser + "@" + ch.Addr + "/pw?password_file=" + pw
	fixed := func() {
		if err := os.WriteFile(pw, []byte(servers.ClickHousePassword+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	said := spoolUntilOperatorFixes(t, ch, url, "pw", fixed)
	if !strings.Contains(said, "WRONG_PASSWORD") || !strings.Contains(said, "password_file") || strings.Contains(said, "wrong-password") {
		t.Errorf("the notice does not say the password is wrong and where to fix it, or shows the password:\n%s", said)
	}
}

// spoolUntilOperatorFixes runs a replay that exports to url, whose server refuses
// the run for a reason the operator has to fix (fix fixes it), with a
// spool: nothing is dropped, the records stay in the spool, and the reason
// is said in one line, which it returns. Then it fixes the reason and runs
// again with an empty capture: the first run's records go to db.flows,
// each once.
func spoolUntilOperatorFixes(t *testing.T, ch *servers.ClickHouse, url, db string, fix func()) (said string) {
	t.Helper()
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	out := filepath.Join(dir, "records.jsonl")
	args := []string{"--key", "src", "--filter", "exact", "--export", url, "--spool", spool, "--export-drain", "1s"}
	r := mustRun(t, append([]string{"replay", "--out", out, pcap("small.pcap")}, args...)...)
	n := len(readRecords(t, out))
	dest := "flowdedup: export clickhouse://" + ch.Addr + "/" + db + ":" // as stderr names it: no user, no parameters
	var notices []string
	for _, l := range lines(r.stderr) {
		if strings.HasPrefix(l, dest) && !strings.Contains(l, "stay in the spool") {
			notices = append(notices, l)
		}
	}
	if len(notices) != 1 || !strings.Contains(notices[0], "retrying, batches wait in the spool") {
		t.Errorf("want the reason said once, with the batches waiting in the spool:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "rejected") || !strings.Contains(r.stderr, "left in the spool for the next run") {
		t.Errorf("want nothing rejected, the records left in the spool:\n%s", r.stderr)
	}
	if files, _ := filepath.Glob(filepath.Join(spool, "*", "*.spool")); len(files) == 0 {
		t.Errorf("no batch in the spool")
	}
	fix()
	empty := filepath.Join(dir, "empty.pcap")
	if err := os.WriteFile(empty, pcapHeader(), 0o644); err != nil {
		t.Fatal(err)
	}
	r2 := mustRun(t, append([]string{"replay", "--out", os.DevNull, empty}, args...)...)
	if !strings.Contains(r2.stderr, fmt.Sprintf(": sent %d records", n)) {
		t.Errorf("second run: want the %d spooled records sent:\n%s", n, r2.stderr)
	}
	if got, want := ch.Query(t, "SELECT count(), uniqExact(window, key) FROM "+db+".flows"), fmt.Sprintf("%d\t%d\n", n, n); got != want {
		t.Errorf("%s.flows: count(), uniqExact(window, key) = %q, want the %d records once each", db, got, n)
	}
	if len(notices) == 0 {
		return ""
	}
	return notices[0]
}

// A replay makes records faster than ClickHouse takes them, and more of
// them here than an export Queue holds in memory (4 batches of 65536): it
// waits for the server rather than drop any (export.Options.Wait), and
// every record reaches the table, once. The drain at exit is long enough
// for a full Queue on a loaded machine (four batches can take more than
// the default 10 s): it is the waiting during the run that is tested.
func testReplayWaits(t *testing.T, ch *servers.ClickHouse) {
	capture := gen(t, t.TempDir(), "many.pcap", "--seed", "51", "--flows", "400000", "--packets", "420000", "--ipv6", "0.2", "--duration", "120s")
	out := filepath.Join(t.TempDir(), "many.jsonl")
	r := mustRun(t, "replay", "--key", "5tuple", "--filter", "exact", "--window", "1m", "--out", out, "--export", "clickhouse://"+ch.Addr+"/many",
		"--export-drain", "1m", capture)
	n := countLines(t, out) // 400,000 records: decoding each would cost seconds, and only their number is compared
	if n < 4<<16 {
		t.Fatalf("%d records: fewer than a Queue holds, the test would prove nothing", n)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("export clickhouse://%s/many: sent %d records and 2 window summaries, dropped 0\n", ch.Addr, n)) {
		t.Errorf("totals do not say all %d records were sent:\n%s", n, r.stderr)
	}
	if got, want := ch.Query(t, "SELECT count(), uniqExact(window, key) FROM many.flows"), fmt.Sprintf("%d\t%d\n", n, n); got != want {
		t.Errorf("count(), uniqExact(window, key) = %q, want %q", got, want)
	}
}

// Issue 21's re-run: the README's ClickHouse replay, run twice into the
// same database. The documented queries answer the same after each run,
// counting each record and summary once: count() with FINAL, the
// distinct sources per hour, and, once the server has merged the parts
// (OPTIMIZE ... FINAL), count() alone.
func testRerun(t *testing.T, ch *servers.ClickHouse) {
	files, err := filepath.Glob(pcap("*.pcap"))
	if err != nil || len(files) < 5 {
		t.Fatalf("testdata captures: %v %v", files, err)
	}
	out := filepath.Join(t.TempDir(), "records.jsonl")
	args := append([]string{"replay", "--window", "1h", "--observer", "r1", "--export", "clickhouse://" + ch.Addr + "/rerun", "--out", out}, files...)
	queries := []string{
		"SELECT count() FROM rerun.flows FINAL",
		"SELECT count() FROM rerun.windows FINAL",
		"SELECT toStartOfHour(window) AS hour, uniqExact(src) FROM rerun.flows WHERE src != '' GROUP BY hour ORDER BY hour",
		"SELECT window, count(), uniqExact(key) FROM rerun.flows FINAL GROUP BY window ORDER BY window",
	}
	answers := func() []string {
		var a []string
		for _, q := range queries {
			a = append(a, ch.Query(t, q))
		}
		return a
	}
	mustRun(t, args...)
	n := len(readRecords(t, out))
	first := answers()
	if first[0] != fmt.Sprintf("%d\n", n) || first[1] != "1\n" {
		t.Fatalf("after one run: %q rows in flows, %q in windows; want the %d records and 1 summary", first[0], first[1], n)
	}
	mustRun(t, args...)
	if len(readRecords(t, out)) != n {
		t.Fatalf("the second run wrote %d records, the first %d", len(readRecords(t, out)), n)
	}
	second := answers()
	for i, q := range queries {
		if second[i] != first[i] {
			t.Errorf("%s: after the second run\n%swant, as after the first\n%s", q, second[i], first[i])
		}
	}
	ch.Query(t, "OPTIMIZE TABLE rerun.flows FINAL")
	if got := ch.Query(t, "SELECT count(), uniqExact(observer, window, key) FROM rerun.flows"); got != fmt.Sprintf("%d\t%d\n", n, n) {
		t.Errorf("after OPTIMIZE FINAL: count(), uniqExact(observer, window, key) = %q, want %d each", got, n)
	}
}

// A flows table of the design before ReplacingMergeTree, doubled by a
// re-run, is still written; the migration statements of docs/export.md
// turn it into the new design, each record once.
func testMigration(t *testing.T, ch *servers.ClickHouse) {
	ch.Query(t, "CREATE DATABASE old")
	ch.Query(t, "CREATE TABLE old.flows (`observer` String, `window` DateTime('UTC'), `ts` DateTime('UTC'), `ts_ns` UInt32, `key` String, "+
		"`src` String, `dst` String, `proto` UInt8, `sport` UInt16, `dport` UInt16, `kind` String, `batch` UInt64) "+
		"ENGINE = MergeTree PARTITION BY toYYYYMM(`window`) ORDER BY (`window`, `observer`, `src`, `dst`)")
	out := filepath.Join(t.TempDir(), "records.jsonl")
	args := []string{"replay", "--window", "1h", "--export", "clickhouse://" + ch.Addr + "/old", "--out", out, pcap("small.pcap")}
	mustRun(t, args...)
	mustRun(t, args...)
	n := len(readRecords(t, out))
	if got := ch.Query(t, "SELECT count() FROM old.flows"); got != fmt.Sprintf("%d\n", 2*n) {
		t.Fatalf("the old table after two runs: %q rows, want %d (each record twice)", got, 2*n)
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "export.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "RENAME TABLE DB.flows")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("docs/export.md has no migration block starting with RENAME TABLE DB.flows")
	}
	stmts := 0
	for _, stmt := range strings.Split("RENAME TABLE DB.flows"+block, ";") {
		if stmt = strings.TrimSpace(stmt); stmt != "" {
			ch.Query(t, strings.ReplaceAll(stmt, "DB.", "old."))
			stmts++
		}
	}
	if stmts != 5 {
		t.Errorf("the migration has %d statements, want 5", stmts)
	}
	if got := ch.Query(t, "SELECT count(), uniqExact(observer, window, key) FROM old.flows"); got != fmt.Sprintf("%d\t%d\n", n, n) {
		t.Errorf("after the migration: count(), uniqExact(observer, window, key) = %q, want %d each", got, n)
	}
	if engine := ch.Query(t, "SELECT engine FROM system.tables WHERE database = 'old' AND name = 'flows'"); engine != "ReplacingMergeTree\n" {
		t.Errorf("after the migration: engine %q", engine)
	}
	mustRun(t, args...) // a third run into the migrated table adds nothing
	if got := ch.Query(t, "SELECT count() FROM old.flows FINAL"); got != fmt.Sprintf("%d\n", n) {
		t.Errorf("a run after the migration: %q rows with FINAL, want %d", got, n)
	}
}

// countRows returns count() of a table, or -1 while the server does not
// answer.
func countRows(ch *servers.ClickHouse, table string) int {
	out, err := ch.TryQuery("SELECT count() FROM " + table)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return -1
	}
	return n
}

// The fault case of issue 9, with --spool:
//
//  1. ClickHouse is stopped in the middle of a replay (the capture comes
//     on standard input, so the test decides when the replay is past its
//     first rows: once they are in the table), the rest of the capture
//     follows while it is down, and it is started again before the
//     replay ends: the replay exits 0, and every record is in the table
//     exactly once.
//  2. A second replay (the next hour) ends while ClickHouse is down: its
//     records stay in the spool, and the totals say so. A third run (a
//     capture without packets), with ClickHouse up, sends them first.
//
// In the end count() = uniqExact(observer, window, key) = the records of
// the two replays.
func testStoppedMidReplay(t *testing.T, ch *servers.ClickHouse) {
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	url := "clickhouse://" + ch.Addr + "/fault"
	first := gen(t, dir, "first.pcap", "--seed", "41", "--flows", "40000", "--packets", "60000", "--ipv6", "0.2", "--duration", "300s")
	second := gen(t, dir, "second.pcap", "--seed", "42", "--flows", "20000", "--packets", "30000", "--ipv6", "0.2", "--duration", "300s",
		"--start", "2026-01-01T01:00:00Z")
	exportArgs := []string{"--key", "5tuple", "--filter", "exact", "--window", "1m", "--observer", "r1", "--export", url, "--spool", spool}

	// 1. Stopped and started in the middle of a replay.
	data, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	out1 := filepath.Join(dir, "first.jsonl")
	cmd := exec.Command(flowdedup(t), append([]string{"replay", "--out", out1, "--export-drain", "2m", "-"}, exportArgs...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	replay := testutil.StartProcess(t, cmd, "", 0)
	cut := len(data) * 2 / 5
	if _, err := stdin.Write(data[:cut]); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the first rows in fault.flows", time.Minute, func() bool { return countRows(ch, "fault.flows") > 0 })
	ch.Stop(t)
	before := countRows(ch, "fault.flows") // -1: the server is down
	if _, err := stdin.Write(data[cut:]); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the replay finding ClickHouse down", time.Minute, func() bool { return strings.Contains(replay.Log(), url+": unreachable") })
	testutil.WaitFor(t, "batches in the spool", time.Minute, func() bool {
		files, _ := filepath.Glob(filepath.Join(spool, "*", "*.spool"))
		return len(files) > 0
	})
	ch.Start(t)
	// The replay retries (with backoff) while its input is open: once it
	// is through, the rest of the capture ends the replay.
	testutil.WaitFor(t, "the replay finding ClickHouse back", time.Minute, func() bool { return strings.Contains(replay.Log(), url+": reachable again") })
	stdin.Close()
	select {
	case err := <-replay.Done():
		if err != nil {
			t.Fatalf("replay: %v\n%s", err, replay.Log())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("replay did not end within 2 minutes of its input:\n%s", replay.Log())
	}
	n1 := countLines(t, out1)
	if n1 != len(exactRecords(t, "--key", "5tuple", "--window", "1m", first)) || before != -1 {
		t.Fatalf("%d records (an exact replay has its own count); rows while down %d", n1, before)
	}
	said := replay.Log()
	if strings.Count(said, url+": unreachable") != 1 || strings.Count(said, url+": reachable again") != 1 ||
		!strings.Contains(said, fmt.Sprintf("export %s: sent %d records and 5 window summaries, dropped 0\n", url, n1)) {
		t.Errorf("stderr: want the fall and the return once each, and all %d records and 5 summaries sent:\n%s", n1, said)
	}
	if got, want := ch.Query(t, "SELECT count(), uniqExact(observer, window, key) FROM fault.flows"), fmt.Sprintf("%d\t%d\n", n1, n1); got != want {
		t.Errorf("after the first replay: count(), uniqExact(observer, window, key) = %q, want %q", got, want)
	}

	// 2. A replay that ends while ClickHouse is down leaves its records
	// in the spool; the next run sends them.
	ch.Stop(t)
	out2 := filepath.Join(dir, "second.jsonl")
	r := mustRun(t, append([]string{"replay", "--out", out2, "--export-drain", "1s", second}, exportArgs...)...)
	n2 := countLines(t, out2)
	if !strings.Contains(r.stderr, "left in the spool for the next run") {
		t.Errorf("second replay: totals do not say what is left in the spool:\n%s", r.stderr)
	}
	ch.Start(t)
	empty := filepath.Join(dir, "empty.pcap")
	if err := os.WriteFile(empty, pcapHeader(), 0o644); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, append([]string{"replay", "--out", os.DevNull, empty}, exportArgs...)...)
	if !strings.Contains(r.stderr, fmt.Sprintf("export %s: sent %d records", url, n2)) {
		t.Errorf("third run: want the %d spooled records sent:\n%s", n2, r.stderr)
	}
	if got, want := ch.Query(t, "SELECT count(), uniqExact(observer, window, key) FROM fault.flows"), fmt.Sprintf("%d\t%d\n", n1+n2, n1+n2); got != want {
		t.Errorf("in the end: count(), uniqExact(observer, window, key) = %q, want %q (%d + %d records)", got, want, n1, n2)
	}
	files, _ := filepath.Glob(filepath.Join(spool, "*", "*.spool"))
	if len(files) != 0 {
		t.Errorf("spool files left: %v", files)
	}
}

// pcapHeader is a pcap file without packets: a capture's global header.
func pcapHeader() []byte {
	return []byte{
		0xd4, 0xc3, 0xb2, 0xa1, // magic, little-endian, microseconds
		2, 0, 4, 0, // version 2.4
		0, 0, 0, 0, 0, 0, 0, 0, // time zone, sigfigs
		0xff, 0xff, 0, 0, // snap length
		1, 0, 0, 0, // Ethernet
	}
}

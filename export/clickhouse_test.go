package export_test

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/export"
	"github.com/flowdedup/flowdedup/record"

	"github.com/flowdedup/flowdedup/export/clickhouse"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/report"
)

// TestClickHouseStoppedMidRun exports through a Reporter and a
// clickhouse:// Queue with a spool to a real clickhouse-server that is
// stopped in the middle of the run and started again: the records and
// summaries of meanwhile wait in the spool, and in the end every record is
// in flows exactly once and every summary in windows.
func TestClickHouseStoppedMidRun(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	says := &notices{}
	spool, err := export.OpenSpool(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer spool.Close()
	q, err := export.Open(fmt.Sprintf("clickhouse://%s/fault", ch.Addr), export.Options{
		Kind: flow.Key5Tuple, Observer: "r1", Spool: spool, Notices: says,
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.New(report.Config{Kind: flow.Key5Tuple, Observer: "r1", Filter: "exact", Exports: []record.Export{q}})
	if err != nil {
		t.Fatal(err)
	}
	window := func(i int) *record.WindowSummary {
		start := time.Date(2026, 1, 1, i, 0, 0, 0, time.UTC)
		return &record.WindowSummary{StartNs: start.UnixNano(), EndNs: start.Add(time.Hour).UnixNano(), Distinct: uint64(1000 * (i + 1))}
	}
	give := func(recs []record.Record, w *record.WindowSummary) {
		for i := range recs {
			if err := r.Record(&recs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Window(w); err != nil {
			t.Fatal(err)
		}
	}
	give(tcpRecords(0, 1000), window(0))
	waitFor(t, "the first window delivered", func() bool { st := q.Stats(); return st.Sent == 1000 && st.SentWindows == 1 })

	ch.Stop(t)
	give(tcpRecords(1000, 2000), window(1))
	waitFor(t, "the Queue finding the server down and spooling", func() bool {
		st := q.Stats()
		return !st.Up && st.Spooled+st.Queued >= 2000
	})
	ch.Start(t)
	give(tcpRecords(3000, 500), window(2))
	waitFor(t, "every record delivered", func() bool { st := q.Stats(); return st.Sent == 3500 && st.SentWindows == 3 })
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	st := q.Stats()
	var lost uint64
	for _, n := range st.Dropped {
		lost += n
	}
	if lost != 0 || st.Spooled != 0 {
		t.Errorf("queue stats %+v", st)
	}
	if got := strings.TrimSpace(ch.Query(t, "SELECT count(), uniqExact(key), uniqExact(batch) > 1 FROM fault.flows WHERE observer = 'r1'")); got != "3500\t3500\t1" {
		t.Errorf("flows: count, distinct keys, several batches = %q, want 3500, 3500, 1", got)
	}
	if got := strings.TrimSpace(ch.Query(t, "SELECT count(), sum(`distinct`) FROM fault.windows WHERE observer = 'r1' AND filter = 'exact'")); got != "3\t6000" {
		t.Errorf("windows: count, sum(distinct) = %q, want 3, 6000", got)
	}
	n := says.String()
	if strings.Count(n, ": unreachable: ") != 1 || strings.Count(n, ": reachable again") != 1 {
		t.Errorf("notices: want the fall and the return, once each:\n%s", n)
	}
	t.Logf("notices:\n%s", n)
}

// TestClickHouseSpoolKeepsObserver: a run whose clickhouse:// destination
// is down spools its records and summary and ends; the next run, with
// another --observer (the router renamed, or its host name changed), finds
// the server back and sends them: the first run's rows are stored under
// the first run's observer, the second run's under its own, each row once.
func TestClickHouseSpoolKeepsObserver(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	dir := t.TempDir()
	run := func(observer string, recs []record.Record, hour int) record.ExportStats {
		t.Helper()
		spool, err := export.OpenSpool(dir, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		defer spool.Close()
		q, err := export.Open(fmt.Sprintf("clickhouse://%s/renamed", ch.Addr), export.Options{
			Kind: flow.Key5Tuple, Observer: observer, Spool: spool, DrainTimeout: 30 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		r, err := report.New(report.Config{Kind: flow.Key5Tuple, Observer: observer, Filter: "exact", Exports: []record.Export{q}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			if err := r.Record(&recs[i]); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Date(2026, 1, 1, hour, 0, 0, 0, time.UTC)
		if err := r.Window(&record.WindowSummary{StartNs: start.UnixNano(), EndNs: start.Add(time.Hour).UnixNano(), Distinct: uint64(len(recs))}); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		return q.Stats()
	}
	first, second := tcpRecords(0, 1500), tcpRecords(1500, 700)

	ch.Stop(t)
	if st := run("edge-fra1", first, 0); st.Sent != 0 || st.Spooled != 1500 || st.SpooledWins != 1 {
		t.Fatalf("first run, the server down: %+v; want everything spooled", st)
	}
	ch.Start(t)
	st := run("edge-fra2", second, 1)
	var lost uint64
	for _, n := range st.Dropped {
		lost += n
	}
	if st.Sent != 2200 || st.SentWindows != 2 || st.Spooled != 0 || lost != 0 {
		t.Errorf("second run: %+v; want both runs' 2200 records and 2 summaries sent, nothing left or lost", st)
	}
	for observer, recs := range map[string][]record.Record{"edge-fra1": first, "edge-fra2": second} {
		var want []string
		for _, r := range recs {
			want = append(want, r.Key.String())
		}
		slices.Sort(want)
		var got []string
		if out := ch.Query(t, "SELECT key FROM renamed.flows WHERE observer = '"+observer+"' ORDER BY key FORMAT TSV"); out != "" {
			got = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		}
		if !slices.Equal(got, want) {
			t.Errorf("observer %s: %d rows in flows, want its run's %d records, once each", observer, len(got), len(want))
		}
	}
	if got := ch.Query(t, "SELECT observer, count(), sum(`distinct`) FROM renamed.windows GROUP BY observer ORDER BY observer FORMAT TSV"); got != "edge-fra1\t1\t1500\nedge-fra2\t1\t700\n" {
		t.Errorf("windows by observer: %q, want one summary of each run under its observer", got)
	}
}

// The password of a clickhouse:// destination from a password_file: the
// records of a run through a Reporter and a Queue land in flows. Without
// the password (no file, no environment), the server refuses the login:
// that waits for the operator, so the batches stay in the spool, the Queue
// says why once with the server's message and what to fix, and neither the notices, the destination's name (the summaries'
// export_dropped key and the metrics' dest label) nor the spool's
// directory names hold a password.
func TestClickHousePasswordFile(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	pwFile := filepath.Join(t.TempDir(), "clickhouse-password")
	if err := os.WriteFile(pwFile, []byte(testutil.ClickHousePassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noEnv := clickhouse.Env{LookupEnv: func(string) (string, bool) { return "", false }}
	base := fmt.Sprintf("clickhouse://%s@%s/secret", testutil.ClickHouseUser, ch.Addr)
	dest := fmt.Sprintf("clickhouse://%s/secret", ch.Addr)
	for _, tc := range []struct {
		name, url, observer string
		ok                  bool
	}{
		{"password_file", base + "?password_file=" + url.QueryEscape(pwFile), "with", true},
		{"no password", base, "without", false},
	} {
		says := &notices{}
		spoolDir := t.TempDir()
		spool, err := export.OpenSpool(spoolDir, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		q, err := export.Open(tc.url, export.Options{Kind: flow.Key5Tuple, Observer: tc.observer, Spool: spool, Notices: says, Env: noEnv})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if q.Dest() != dest {
			t.Errorf("%s: Dest %q, want %q", tc.name, q.Dest(), dest)
		}
		r, err := report.New(report.Config{Kind: flow.Key5Tuple, Observer: tc.observer, Filter: "exact", Exports: []record.Export{q}})
		if err != nil {
			t.Fatal(err)
		}
		recs := tcpRecords(0, 300)
		for i := range recs {
			if err := r.Record(&recs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		st := q.Stats()
		spool.Close()
		n := says.String()
		t.Logf("%s: stats %+v, notices:\n%s", tc.name, st, n)
		if tc.ok {
			if st.Sent != 300 || st.Dropped[export.DropRejected] != 0 {
				t.Errorf("%s: stats %+v, want 300 sent", tc.name, st)
			}
			if got := strings.TrimSpace(ch.Query(t, "SELECT count() FROM secret.flows WHERE observer = 'with'")); got != "300" {
				t.Errorf("%s: %s rows in flows, want 300", tc.name, got)
			}
		} else {
			if st.Sent != 0 || st.Dropped[export.DropRejected] != 0 || st.Spooled != 300 {
				t.Errorf("%s: stats %+v, want 300 in the spool, none rejected", tc.name, st)
			}
			if strings.Count(n, "export "+dest+": unreachable") != 1 || !strings.Contains(n, "Password required for user "+testutil.ClickHouseUser) ||
				!strings.Contains(n, "password_file") {
				t.Errorf("%s: notices do not say the server refused the login:\n%s", tc.name, n)
			}
		}
		if strings.Contains(n, "warning") {
			t.Errorf("%s: a warning, though no password is in the URL:\n%s", tc.name, n)
		}
		shown := n + st.Dest + fmt.Sprint(st.Dropped)
		filepath.WalkDir(spoolDir, func(p string, _ fs.DirEntry, err error) error {
			shown += p + "\n"
			return err
		})
		if strings.Contains(shown, testutil.ClickHousePassword) {
			t.Errorf("%s: the password shows in notices, stats or spool names:\n%s", tc.name, shown)
		}
	}
	if got := strings.TrimSpace(ch.Query(t, "SELECT count() FROM secret.flows WHERE observer = 'without'")); got != "0" {
		t.Errorf("%s rows written without the password", got)
	}
}

package export_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/report"
	"github.com/flowdedup/flowdedup/report/export"
)

// TestClickHouseStoppedMidRun exports through a Reporter and a
// clickhouse:// Queue with a spool to a real clickhouse-server that is
// stopped in the middle of the run and started again: the records and
// summaries of meanwhile wait in the spool, and in the end every record is
// in flows exactly once and every summary in windows.
func TestClickHouseStoppedMidRun(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	says := &notices{}
	spool, err := report.OpenSpool(t.TempDir(), 1<<30)
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
	r, err := report.New(report.Config{Kind: flow.Key5Tuple, Observer: "r1", Filter: "exact", Exports: []*report.Queue{q}})
	if err != nil {
		t.Fatal(err)
	}
	window := func(i int) *pipeline.WindowSummary {
		start := time.Date(2026, 1, 1, i, 0, 0, 0, time.UTC)
		return &pipeline.WindowSummary{StartNs: start.UnixNano(), EndNs: start.Add(time.Hour).UnixNano(), Distinct: uint64(1000 * (i + 1))}
	}
	give := func(recs []pipeline.Record, w *pipeline.WindowSummary) {
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

package clickhouse_test

import (
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/export/clickhouse"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
	"github.com/flowdedup/flowdedup/record"
)

// newProxiedExporter returns a Destination that reaches ch through a
// faultProxy, with a short timeout, its tables already created (so that
// the next request of the proxy's is the insert under test).
func newProxiedExporter(t *testing.T, ch *servers.ClickHouse, db string) (*clickhouse.Destination, *faultProxy) {
	t.Helper()
	p := startProxy(t, ch.Addr)
	e, err := clickhouse.New(clickhouse.Config{Address: p.Addr, Database: db, Kind: flow.Key5Tuple, Observer: "r", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.Records(&record.Batch{ID: 1, Records: records(flow.Key5Tuple, 1, 99)}); err != nil {
		t.Fatal(err)
	}
	return e, p
}

// An insert that lands while its answer is lost (the client times out) is
// not written again by the retry, with Batch.Retry set or not (the
// Destination remembers the failure), in batches that span two partitions.
func TestRetryAfterLostAnswer(t *testing.T) {
	ch := servers.StartClickHouse(t)
	for _, flagged := range []bool{true, false} {
		db := "lost_unflagged"
		if flagged {
			db = "lost_flagged"
		}
		e, p := newProxiedExporter(t, ch, db)
		recs := records(flow.Key5Tuple, 300, 0)
		b := &record.Batch{ID: 42, Records: recs}
		p.next(dropAnswer)
		err := e.Records(b)
		if err == nil || errors.Is(err, record.ErrRejected) || !errors.Is(err, os.ErrDeadlineExceeded) && !isTimeout(err) {
			t.Fatalf("insert whose answer was dropped: %v, want a transient timeout", err)
		}
		if n := queryUint(t, ch, "SELECT count() FROM "+db+".flows WHERE batch = 42"); n != uint64(len(recs)) {
			t.Fatalf("the dropped insert left %d rows, want all %d (it landed)", n, len(recs))
		}
		b.Retry = flagged
		if err := e.Records(b); err != nil {
			t.Fatal(err)
		}
		want := append(wantRows(t, flow.Key5Tuple, "r", 42, recs), wantRows(t, flow.Key5Tuple, "r", 1, records(flow.Key5Tuple, 1, 99))...)
		slices.Sort(want)
		diffRows(t, readFlows(t, ch, db), want)
		if st := e.Stats(); st.Checks != 1 || st.RowsFound != uint64(len(recs)) || st.Batches != 2 {
			t.Errorf("retry flag %v: stats %+v: want 1 check finding %d rows, 2 batches", flagged, st, len(recs))
		}
		// Once a batch is whole, a later call without Retry does not
		// look again (and would insert: the caller's contract is to
		// give a batch again only while its outcome is unknown).
		if err := e.Records(&record.Batch{ID: 43, Records: recs[:1]}); err != nil {
			t.Fatal(err)
		}
		if st := e.Stats(); st.Checks != 1 {
			t.Errorf("a new batch was checked: %+v", st)
		}
	}
}

// waitCount waits until the query's count is want.
func waitCount(t *testing.T, ch *servers.ClickHouse, query string, want uint64) {
	t.Helper()
	var n uint64
	if !testutil.WaitUntil(30*time.Second, func() bool { n = queryUint(t, ch, query); return n == want }) {
		t.Fatalf("%s: %d after 30 s, want %d", query, n, want)
	}
}

// retryWhileLocked gives b to e again until its answer is something other
// than the transient SESSION_IS_LOCKED (373), for at most 30 s, and fails
// the test unless that answer is success.
func retryWhileLocked(t *testing.T, e *clickhouse.Destination, b *record.Batch) {
	t.Helper()
	var err error
	locked := func() bool {
		err = e.Records(b)
		var se *clickhouse.ServerError
		return errors.As(err, &se) && se.Code == 373
	}
	if testutil.WaitUntil(30*time.Second, func() bool { return !locked() }) {
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("the session is still locked after 30 s: %v", err)
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// A retry while the earlier attempt is still in the server's hands (its
// body half sent) is refused by the session lock, transiently; once the
// earlier attempt lands, the next retry finds it whole.
func TestRetryWhileEarlierAttemptRuns(t *testing.T) {
	ch := servers.StartClickHouse(t)
	e, p := newProxiedExporter(t, ch, "held")
	recs := records(flow.Key5Tuple, 300, 0)
	b := &record.Batch{ID: 77, Records: recs}
	p.next(holdBody)
	if err := e.Records(b); err == nil || errors.Is(err, record.ErrRejected) {
		t.Fatalf("insert held by the proxy: %v, want a transient error", err)
	}
	b.Retry = true
	err := e.Records(b)
	var se *clickhouse.ServerError
	if !errors.As(err, &se) || se.Code != 373 || errors.Is(err, record.ErrRejected) {
		t.Fatalf("retry while the first attempt runs: %v, want transient SESSION_IS_LOCKED (373)", err)
	}
	// The earlier attempt goes on, and lands.
	if n := queryUint(t, ch, "SELECT count() FROM held.flows WHERE batch = 77"); n != 0 {
		t.Fatalf("%d rows of the held insert before its body was whole", n)
	}
	p.releaseHeld()
	waitCount(t, ch, "SELECT count() FROM held.flows WHERE batch = 77", uint64(len(recs)))
	// The rows are visible as soon as the held insert has written them,
	// but the server releases the session only when that request's
	// handler ends, a moment later: until then a retry is refused with
	// 373 again, as the queue would see it and retry. Retry while that
	// is the answer (bounded), as the queue does.
	retryWhileLocked(t, e, b)
	if n := queryUint(t, ch, "SELECT count() FROM held.flows WHERE batch = 77"); n != uint64(len(recs)) {
		t.Errorf("%d rows of the batch after the retry, want %d", n, len(recs))
	}
	want := append(wantRows(t, flow.Key5Tuple, "r", 77, recs), wantRows(t, flow.Key5Tuple, "r", 1, records(flow.Key5Tuple, 1, 99))...)
	slices.Sort(want)
	diffRows(t, readFlows(t, ch, "held"), want)
}

// A batch of which only some rows landed (one partition's part of two, as
// a server failing between the parts of an insert leaves it) gets only
// the others on retry.
func TestRetryAfterPartialLanding(t *testing.T) {
	ch := servers.StartClickHouse(t)
	recs := records(flow.Key5Tuple, 300, 0)
	// Records of January, as the part of that partition alone.
	var jan []record.Record
	for _, r := range recs {
		if time.Unix(0, r.WindowNs).UTC().Month() == time.January {
			jan = append(jan, r)
		}
	}
	if len(jan) == 0 || len(jan) == len(recs) {
		t.Fatalf("%d of %d records in January: the batch must span two months", len(jan), len(recs))
	}
	first := newDestination(t, ch.Addr, "partial", flow.Key5Tuple, "r")
	if err := first.Records(&record.Batch{ID: 5, Records: jan}); err != nil {
		t.Fatal(err)
	}
	e := newDestination(t, ch.Addr, "partial", flow.Key5Tuple, "r")
	if err := e.Records(&record.Batch{ID: 5, Records: recs, Retry: true}); err != nil {
		t.Fatal(err)
	}
	diffRows(t, readFlows(t, ch, "partial"), wantRows(t, flow.Key5Tuple, "r", 5, recs))
	if st := e.Stats(); st.RowsFound != uint64(len(jan)) || st.Rows != uint64(len(recs)-len(jan)) {
		t.Errorf("stats %+v: want %d rows found and %d inserted", st, len(jan), len(recs)-len(jan))
	}
}

// A summary whose insert landed while its answer was lost is not written
// again.
func TestWindowRetryAfterLostAnswer(t *testing.T) {
	ch := servers.StartClickHouse(t)
	e, p := newProxiedExporter(t, ch, "lostwin")
	s := &record.Summary{WindowSummary: record.WindowSummary{StartNs: base.UnixNano(), EndNs: base.Add(time.Minute).UnixNano(), Packets: 7, Sketch: []byte("hll")}, Observer: "r"}
	p.next(pass, dropAnswer) // the look-up, then the insert
	if err := e.Window(s); err == nil || errors.Is(err, record.ErrRejected) {
		t.Fatalf("insert whose answer was dropped: %v, want a transient error", err)
	}
	if n := queryUint(t, ch, "SELECT count() FROM lostwin.windows"); n != 1 {
		t.Fatalf("the dropped insert left %d rows, want 1", n)
	}
	if err := e.Window(s); err != nil {
		t.Fatal(err)
	}
	if n := queryUint(t, ch, "SELECT count() FROM lostwin.windows"); n != 1 {
		t.Errorf("%d windows rows after the retry, want 1", n)
	}
	if st := e.Stats(); st.WindowsFound != 1 {
		t.Errorf("stats %+v: want the retry to find the row", st)
	}
}

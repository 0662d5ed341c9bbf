package delivery

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/report"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/pipeline"
)

// fakeSink is a test double of a destination: the Queue's policy (what it
// retries, drops, spools, in what order) is what these tests check, so the
// destination's behaviour is scripted: slow, failing, rejecting, hanging.
type fakeSink struct {
	mu      sync.Mutex
	batches []report.Batch   // delivered batches, with copies of their records
	order   []string         // "b<id>" and "w<start>" in delivery order
	windows []report.Summary // delivered summaries
	tries   []report.Batch   // every Records call: ID, Retry, Observer and report.Domain (no records)
	calls   []time.Time
	flushes int
	closes  int

	// fail, when set, decides the outcome of each call: op is "records",
	// "window" or "flush"; b is nil for window and flush.
	fail func(op string, b *report.Batch) error
	// gate, when set, makes every call wait until it is closed.
	gate chan struct{}
	// delay makes every call take that long.
	delay time.Duration
}

var errDown = fmt.Errorf("fake: connection refused: %w", syscall.ECONNREFUSED)

func (s *fakeSink) enter(op string, b *report.Batch) error {
	if s.gate != nil {
		<-s.gate
	}
	if s.delay > 0 {
		time.Sleep(s.delay) // the destination is slow: that is what is tested
	}
	s.mu.Lock()
	s.calls = append(s.calls, time.Now())
	if b != nil {
		s.tries = append(s.tries, report.Batch{ID: b.ID, Retry: b.Retry, Observer: b.Observer, Domain: b.Domain})
	}
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return fail(op, b)
	}
	return nil
}

func (s *fakeSink) Records(b *report.Batch) error {
	if err := s.enter("records", b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, report.Batch{ID: b.ID, Retry: b.Retry, Observer: b.Observer, Domain: b.Domain, Records: slices.Clone(b.Records)})
	s.order = append(s.order, fmt.Sprintf("b%d", b.ID))
	return nil
}

func (s *fakeSink) Window(w *report.Summary) error {
	if err := s.enter("window", nil); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows = append(s.windows, *cloneSummary(w))
	s.order = append(s.order, fmt.Sprintf("w%d", w.StartNs))
	return nil
}

func (s *fakeSink) Flush() error {
	if err := s.enter("flush", nil); err != nil {
		return err
	}
	s.mu.Lock()
	s.flushes++
	s.mu.Unlock()
	return nil
}

func (s *fakeSink) Close() error {
	s.mu.Lock()
	s.closes++
	s.mu.Unlock()
	return nil
}

// records returns every record delivered, in order.
func (s *fakeSink) records() []pipeline.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []pipeline.Record
	for _, b := range s.batches {
		all = append(all, b.Records...)
	}
	return all
}

func (s *fakeSink) snapshot() (batches []report.Batch, windows []report.Summary, order []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.batches), slices.Clone(s.windows), slices.Clone(s.order)
}

// at is the Unix ns of an RFC 3339 time.
func at(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UnixNano()
}

// genRecords returns n distinct 5-tuple records, numbered by their source
// port and address so that a test can tell them apart and order them.
func genRecords(from, n int) []pipeline.Record {
	recs := make([]pipeline.Record, n)
	for i := range recs {
		k := from + i
		src := netip.AddrFrom4([4]byte{10, byte(k >> 16), byte(k >> 8), byte(k)})
		recs[i] = pipeline.Record{
			Key:         flow.MakeKey(flow.Key5Tuple, src, netip.MustParseAddr("192.0.2.1"), 6, uint16(k), 80),
			TimeNs:      at("2026-01-01T00:00:00Z") + int64(k)*int64(time.Millisecond),
			WindowNs:    at("2026-01-01T00:00:00Z"),
			WindowEndNs: at("2026-01-01T01:00:00Z"),
			Worker:      k % 3,
		}
	}
	return recs
}

// waitFor waits until cond holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func newTestQueue(t *testing.T, sink report.Destination, cfg QueueConfig) *Queue {
	t.Helper()
	q, err := NewQueue("fake://dest", sink, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func put(t *testing.T, q *Queue, recs []pipeline.Record) {
	t.Helper()
	if err := q.Records(&report.Batch{Records: recs}); err != nil {
		t.Fatal(err)
	}
}

func dropped(st report.ExportStats) (all uint64) {
	for _, n := range st.Dropped {
		all += n
	}
	return all
}

// TestQueueDelivers: records arrive once each, in order, in batches of at
// most BatchSize with consecutive IDs, each followed by a Flush; a summary
// arrives after the records given before it; Close closes the report.Destination once.
func TestQueueDelivers(t *testing.T) {
	sink := &fakeSink{}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 100, BatchAge: time.Hour})
	all := genRecords(0, 1000)
	for i := 0; i < len(all); i += 37 { // pieces that do not divide batches
		put(t, q, all[i:min(i+37, len(all))])
		if i == 37*10 {
			q.Window(&report.Summary{WindowSummary: pipeline.WindowSummary{StartNs: 1}})
		}
	}
	q.Window(&report.Summary{WindowSummary: pipeline.WindowSummary{StartNs: 2, Final: true}})
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	batches, windows, order := sink.snapshot()
	if got := sink.records(); !slices.Equal(got, all) {
		t.Fatalf("delivered %d records, want the %d given, in order", len(got), len(all))
	}
	var ids []uint64
	for _, b := range batches {
		if len(b.Records) > 100 || b.Retry {
			t.Errorf("batch %d: %d records, retry %v", b.ID, len(b.Records), b.Retry)
		}
		ids = append(ids, b.ID)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] != ids[i-1]+1 {
			t.Errorf("batch IDs %v: want consecutive", ids)
			break
		}
	}
	// The first summary comes after the 407 records given before it: the
	// batch being filled when it came is not cut short (it would hold a
	// whole buffer for 7 records), so it follows the 5th full batch.
	if len(windows) != 2 || len(order) != len(batches)+2 || order[5] != "w1" || order[len(order)-1] != "w2" {
		t.Errorf("delivery order %v", order)
	}
	for i, b := range batches[:len(batches)-1] {
		if len(b.Records) != 100 {
			t.Errorf("batch %d: %d records, want every batch but the last full", i, len(b.Records))
		}
	}
	if sink.flushes != len(batches)+2 || sink.closes != 1 {
		t.Errorf("%d flushes, %d closes; want one flush per batch and summary, one close", sink.flushes, sink.closes)
	}
	st := q.Stats()
	if st.Sent != 1000 || st.SentWindows != 2 || dropped(st) != 0 || st.Queued != 0 {
		t.Errorf("stats %+v", st)
	}
	if err := q.Records(&report.Batch{Records: all[:1]}); !errors.Is(err, ErrQueueClosed) {
		t.Errorf("Records after Close: %v", err)
	}
	if err := q.Close(); !errors.Is(err, ErrQueueClosed) {
		t.Errorf("second Close: %v", err)
	}
}

// TestQueueManyWindowsFewRecords: windows that close faster than the
// destination takes batches (a replay closes many a second) do not cut
// batches short: 50 windows of 5 records fill 3 batches, which fit the
// memory bound of 4, rather than 50 batches of 5, of which all but 4 would
// be dropped. Every summary still comes after its window's records.
func TestQueueManyWindowsFewRecords(t *testing.T) {
	sink := &fakeSink{gate: make(chan struct{})}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 100, MaxQueued: 400, BatchAge: time.Hour})
	all := genRecords(0, 250)
	for w := range 50 {
		put(t, q, all[w*5:w*5+5])
		if err := q.Window(&report.Summary{WindowSummary: pipeline.WindowSummary{StartNs: int64(w)}}); err != nil {
			t.Fatal(err)
		}
	}
	if st := q.Stats(); dropped(st) != 0 || st.Queued != 250 {
		t.Fatalf("with the destination busy: %+v; want the 250 records queued, none dropped", st)
	}
	close(sink.gate)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if got := sink.records(); !slices.Equal(got, all) {
		t.Fatalf("delivered %d records, want the 250 given, in order", len(got))
	}
	batches, windows, order := sink.snapshot()
	if len(batches) != 3 || len(windows) != 50 {
		t.Errorf("%d batches and %d summaries, want 3 and 50", len(batches), len(windows))
	}
	// report.Summary w follows the batch holding record 5w+4, its window's last.
	seen := 0
	for _, o := range order {
		var n int
		if _, err := fmt.Sscanf(o, "w%d", &n); err == nil && n*5+5 > seen {
			t.Errorf("summary %d delivered after %d records, before its window's last (%d)", n, seen, n*5+5)
		}
		for _, b := range batches {
			if o == fmt.Sprintf("b%d", b.ID) {
				seen += len(b.Records)
			}
		}
	}
}

// TestQueueBatchAge: a batch that is not full goes out once BatchAge has
// passed, whole, without waiting for Close.
func TestQueueBatchAge(t *testing.T) {
	sink := &fakeSink{}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 1000, BatchAge: 20 * time.Millisecond})
	defer q.Close()
	recs := genRecords(0, 10)
	put(t, q, recs[:4])
	put(t, q, recs[4:])
	waitFor(t, "the young batch delivered", func() bool { return len(sink.records()) == 10 })
	batches, _, _ := sink.snapshot()
	if len(batches) != 1 {
		t.Errorf("%d batches, want the 10 records in one", len(batches))
	}
}

// TestQueueNeverBlocks: a destination that hangs never makes Records or
// Window wait; memory stays within MaxQueued, and what does not fit is
// counted exactly (queue_full); Close gives up after DrainTimeout and
// counts what it held (shutdown).
func TestQueueNeverBlocks(t *testing.T) {
	sink := &fakeSink{gate: make(chan struct{})}
	defer close(sink.gate) // lets the abandoned call return
	notices := &testutil.SyncBuffer{}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 10, MaxQueued: 40, BatchAge: time.Hour, DrainTimeout: 50 * time.Millisecond, Notices: notices})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 100 {
			q.Records(&report.Batch{Records: genRecords(i*10, 10)})
			if i%10 == 0 {
				q.Window(&report.Summary{WindowSummary: pipeline.WindowSummary{StartNs: int64(i)}})
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Records blocked on a hung destination")
	}
	st := q.Stats()
	// 4 buffers of 10 records: the one in the hung call and 3 waiting.
	if st.Queued != 40 || st.Dropped[DropQueueFull] != 1000-40 {
		t.Errorf("queued %d, dropped %v; want 40 queued, %d queue_full", st.Queued, st.Dropped, 1000-40)
	}
	start := time.Now()
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v with a 50 ms drain time", d)
	}
	st = q.Stats()
	// Left: the 40 records and the 10 summaries.
	if st.Dropped[DropShutdown] != 40+10 || st.Dropped[DropQueueFull] != 960 || st.Sent != 0 {
		t.Errorf("after Close: %+v; want shutdown 50, queue_full 960", st)
	}
	if !strings.Contains(notices.String(), "were not delivered") {
		t.Errorf("notices do not say what was lost:\n%s", notices)
	}
	sink.mu.Lock()
	closes := sink.closes
	sink.mu.Unlock()
	if closes != 0 {
		t.Errorf("a report.Destination stuck in a call was closed under it")
	}
}

// TestQueueSlow: a slow destination does not make Records wait; it gets
// everything, in order, by Close.
func TestQueueSlow(t *testing.T) {
	sink := &fakeSink{delay: 20 * time.Millisecond}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 10, BatchAge: time.Hour})
	all := genRecords(0, 100)
	for i := 0; i < 100; i += 10 {
		put(t, q, all[i:i+10])
	}
	// 10 batches take 20 calls of 20 ms: had Records waited for them, all
	// would be sent by now.
	if st := q.Stats(); st.Sent == 100 {
		t.Errorf("every record sent when Records returned: it waited for a slow destination")
	}
	q.Close()
	if got := sink.records(); !slices.Equal(got, all) {
		t.Errorf("delivered %d records, want the %d given, in order", len(got), len(all))
	}
}

// TestQueueRetries: transient failures are retried until they pass; the
// retried batch keeps its ID and has Retry set; nothing is lost or
// duplicated; the destination's fall and return are said once each.
func TestQueueRetries(t *testing.T) {
	sink := &fakeSink{}
	failures := 0
	sink.fail = func(op string, b *report.Batch) error {
		// Fail the 2nd batch's Records 3 times, then a Flush once.
		switch {
		case op == "records" && b.ID%1000 == 1 && failures < 3:
			failures++
			return errDown
		case op == "flush" && failures == 3:
			failures++
			return errDown
		}
		return nil
	}
	notices := &testutil.SyncBuffer{}
	q, err := NewQueue("fake://dest", sink, QueueConfig{BatchSize: 50, BatchAge: time.Hour, RetryMin: time.Millisecond, RetryMax: 4 * time.Millisecond, Notices: notices})
	if err != nil {
		t.Fatal(err)
	}
	q.base = 1000 // IDs 1000, 1001, ...
	all := genRecords(0, 300)
	put(t, q, all)
	q.Close()
	if got := sink.records(); !slices.Equal(got, all) {
		t.Fatalf("delivered %d records, want the %d given, once each, in order", len(got), len(all))
	}
	sink.mu.Lock()
	tries := slices.Clone(sink.tries)
	sink.mu.Unlock()
	want := []report.Batch{{ID: 1000}, {ID: 1001}, {ID: 1001, Retry: true}, {ID: 1001, Retry: true}, {ID: 1001, Retry: true},
		{ID: 1002}, {ID: 1003}, {ID: 1004}, {ID: 1005}}
	if !slices.EqualFunc(tries, want, func(a, b report.Batch) bool { return a.ID == b.ID && a.Retry == b.Retry }) {
		t.Errorf("Records calls %+v\nwant %+v (a failed Flush retries the Flush, not the batch)", tries, want)
	}
	n := notices.String()
	if strings.Count(n, "unreachable") != 1 || strings.Count(n, "reachable again") != 1 {
		t.Errorf("notices: want one fall and one return (the batch is done once flushed):\n%s", n)
	}
	if st := q.Stats(); dropped(st) != 0 || st.Sent != 300 {
		t.Errorf("stats %+v", st)
	}
}

// TestQueueRejected: a rejected batch is dropped and counted, not retried;
// the rest goes on; the first rejection is said with its error.
func TestQueueRejected(t *testing.T) {
	sink := &fakeSink{}
	sink.fail = func(op string, b *report.Batch) error {
		if op == "records" && b.Records[0].Worker == 1 {
			return fmt.Errorf("fake: no column worker: %w", report.ErrRejected)
		}
		if op == "window" {
			return fmt.Errorf("fake: no table windows: %w", report.ErrRejected)
		}
		return nil
	}
	notices := &testutil.SyncBuffer{}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 10, BatchAge: time.Hour, Notices: notices})
	all := genRecords(0, 100)
	var want []pipeline.Record
	for i := 0; i < 100; i += 10 {
		put(t, q, all[i:i+10])
		if all[i].Worker != 1 {
			want = append(want, all[i:i+10]...)
		}
	}
	q.Window(&report.Summary{})
	q.Close()
	if got := sink.records(); !slices.Equal(got, want) {
		t.Errorf("delivered %d records, want the %d not rejected", len(got), len(want))
	}
	sink.mu.Lock()
	tries := len(sink.tries)
	sink.mu.Unlock()
	if st := q.Stats(); st.Dropped[DropRejected] != uint64(100-len(want)+1) || dropped(st) != st.Dropped[DropRejected] || tries != 10 {
		t.Errorf("dropped %v after %d Records calls; want rejected %d (records and the summary) and no retry", st.Dropped, tries, 100-len(want)+1)
	}
	if n := notices.String(); strings.Count(n, "\n") != 1 || !strings.Contains(n, "rejected batch") || !strings.Contains(n, "no column worker") {
		t.Errorf("notices: want the first rejection with its error, once:\n%s", n)
	}
}

// TestBackoff: the wait doubles from min to max, and the jitter keeps it
// within [d/2, d].
func TestBackoff(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lo, hi := 100*time.Millisecond, 30*time.Second
	for n := 1; n <= 100; n++ {
		d := hi
		if n <= 9 { // 100 ms << 8 = 25.6 s, << 9 = 51.2 s > hi
			d = lo << (n - 1)
		}
		for range 100 {
			if got := backoff(lo, hi, n, rng); got < d/2 || got > d {
				t.Fatalf("attempt %d: waited %v, want within [%v, %v]", n, got, d/2, d)
			}
		}
	}
	// And in a Queue: each wait is at least half its nominal one (timers
	// never fire early); no retry storm.
	sink := &fakeSink{fail: func(string, *report.Batch) error { return errDown }}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 1, RetryMin: 2 * time.Millisecond, RetryMax: 16 * time.Millisecond, DrainTimeout: time.Millisecond})
	put(t, q, genRecords(0, 1))
	waitFor(t, "8 attempts", func() bool { sink.mu.Lock(); defer sink.mu.Unlock(); return len(sink.calls) >= 8 })
	q.Close()
	sink.mu.Lock()
	calls := slices.Clone(sink.calls)
	sink.mu.Unlock()
	for i := 1; i < 8; i++ {
		nominal := min(2*time.Millisecond<<(i-1), 16*time.Millisecond)
		if gap := calls[i].Sub(calls[i-1]); gap < nominal/2 {
			t.Errorf("retry %d after %v, want at least %v", i, gap, nominal/2)
		}
	}
}

func openSpool(t *testing.T, dir string, max int64) *Spool {
	t.Helper()
	s, err := OpenSpool(dir, max)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// spoolFiles lists the spool files of every destination in dir.
func spoolFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "*"+spoolExt))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestSpoolRestart: with the destination down, batches and summaries go to
// the spool and Close does not wait for the drain time; a new Queue on the
// same directory (a restart) sends them, in order, with their IDs, before
// anything new, and deletes them once delivered.
func TestSpoolRestart(t *testing.T) {
	dir := t.TempDir()
	down := &fakeSink{fail: func(string, *report.Batch) error { return errDown }}
	notices := &testutil.SyncBuffer{}
	spool := openSpool(t, dir, 1<<30)
	cfg := QueueConfig{BatchSize: 25, BatchAge: time.Hour, Spool: spool, RetryMin: time.Millisecond, RetryMax: time.Millisecond, DrainTimeout: time.Hour, Notices: notices}
	q := newTestQueue(t, down, cfg)
	first := genRecords(0, 230)
	put(t, q, first[:100])
	q.Window(&report.Summary{WindowSummary: pipeline.WindowSummary{StartNs: 1, EndNs: 2, Packets: 7}, Observer: "r1"})
	put(t, q, first[100:])
	start := time.Now()
	q.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close waited %v with everything in the spool and the destination down", d)
	}
	st := q.Stats()
	if st.Spooled != 230 || st.SpooledWins != 1 || dropped(st) != 0 || st.Sent != 0 {
		t.Errorf("stats after Close: %+v; want 230 records and 1 summary spooled, nothing lost", st)
	}
	if n := len(spoolFiles(t, dir)); n != 10+1 {
		t.Errorf("%d spool files, want 10 batches and a summary", n)
	}
	if !strings.Contains(notices.String(), "stay in the spool") {
		t.Errorf("notices do not say what stays in the spool:\n%s", notices)
	}
	down.mu.Lock()
	firstIDs := down.tries[0].ID
	down.mu.Unlock()
	spool.Close()

	// The restart.
	up := &fakeSink{}
	spool = openSpool(t, dir, 1<<30)
	defer spool.Close()
	cfg.Spool = spool
	q = newTestQueue(t, up, cfg)
	second := genRecords(1000, 30)
	put(t, q, second)
	q.Close()
	if got, want := up.records(), append(slices.Clone(first), second...); !slices.Equal(got, want) {
		t.Fatalf("after the restart %d records delivered, want the %d of both runs, in order", len(got), len(want))
	}
	batches, windows, order := up.snapshot()
	if len(windows) != 1 || windows[0].Packets != 7 || windows[0].Observer != "r1" || order[4] != "w1" {
		t.Errorf("summary from the spool: %+v at %v", windows, order)
	}
	for i := range 10 {
		// The first batch was attempted (its outcome unknown): Retry.
		if b := batches[i]; b.ID != firstIDs+uint64(i) || b.Retry != (i == 0) {
			t.Errorf("spooled batch %d: ID %d retry %v; want ID %d retry %v", i, b.ID, b.Retry, firstIDs+uint64(i), i == 0)
		}
	}
	if files := spoolFiles(t, dir); len(files) != 0 || spool.Used() != 0 {
		t.Errorf("spool after delivery: %v, %d bytes used; want empty", files, spool.Used())
	}
}

// TestSpoolFull: when the spool cannot take more, batches stay in memory,
// and once memory is full too the newest are dropped and counted as
// spool_full; the spool keeps the oldest, which the next run sends.
func TestSpoolFull(t *testing.T) {
	dir := t.TempDir()
	const batch = 10
	fileSize := len(appendSpoolFile(nil, "fake://dest", &report.Batch{Records: genRecords(0, batch)}, nil, false))
	spool := openSpool(t, dir, int64(3*fileSize)) // three batch files
	notices := &testutil.SyncBuffer{}
	down := &fakeSink{fail: func(string, *report.Batch) error { return errDown }}
	q := newTestQueue(t, down, QueueConfig{BatchSize: batch, MaxQueued: 4 * batch, BatchAge: time.Hour, Spool: spool,
		RetryMin: time.Millisecond, RetryMax: time.Millisecond, DrainTimeout: 10 * time.Millisecond, Notices: notices})
	next := 0
	for !strings.Contains(notices.String(), "spool full") {
		if next == 1000 {
			t.Fatalf("no spool full notice after %d records:\n%s", next, notices)
		}
		put(t, q, genRecords(next, batch))
		next += batch
		time.Sleep(time.Millisecond) // let the manager spill: not an assertion's wait
	}
	// The spool is full and the destination down: memory no longer
	// drains, so what it can take now is exact.
	waitFor(t, "memory settled", func() bool {
		a := q.Stats().Queued
		time.Sleep(5 * time.Millisecond)
		return q.Stats().Queued == a
	})
	room := 4*batch - q.Stats().Queued
	before := q.Stats().Dropped
	put(t, q, genRecords(next, 100))
	next += 100
	after := q.Stats().Dropped
	if got := after[DropSpoolFull] - before[DropSpoolFull]; got != uint64(100-room) {
		t.Errorf("100 records with room for %d: %d counted spool_full, want %d", room, got, 100-room)
	}
	q.Close()
	st := q.Stats()
	if st.Spooled != 3*batch || uint64(st.Spooled)+dropped(st) != uint64(next) {
		t.Errorf("after Close: %+v; want 3 batches spooled and the rest of %d records counted", st, next)
	}
	spool.Close()

	up := &fakeSink{}
	spool = openSpool(t, dir, int64(3*fileSize))
	defer spool.Close()
	q = newTestQueue(t, up, QueueConfig{Spool: spool})
	q.Close()
	if got := up.records(); !slices.Equal(got, genRecords(0, 3*batch)) {
		t.Errorf("the next run sent %d records; want the oldest 30, in order", len(got))
	}
}

// TestSpoolCorrupt: spool files that cannot be read back (a flipped bit,
// a truncation, garbage, another destination's file) are counted and
// moved aside, and the others are sent.
func TestSpoolCorrupt(t *testing.T) {
	dir := t.TempDir()
	spool := openSpool(t, dir, 1<<30)
	down := &fakeSink{fail: func(string, *report.Batch) error { return errDown }}
	q := newTestQueue(t, down, QueueConfig{BatchSize: 10, BatchAge: time.Hour, Spool: spool, RetryMin: time.Millisecond, RetryMax: time.Millisecond})
	all := genRecords(0, 60)
	put(t, q, all)
	q.Close()
	// Another destination's file, copied into this one's directory.
	other, err := NewQueue("fake://other", down, QueueConfig{BatchSize: 10, Spool: spool, RetryMin: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	put(t, other, genRecords(500, 10))
	other.Close()
	spool.Close()

	files := spoolFiles(t, dir)
	mine := filepath.Join(dir, destDirName("fake://dest"))
	var own []string
	for _, f := range files {
		if filepath.Dir(f) == mine {
			own = append(own, f)
		} else {
			data, _ := os.ReadFile(f)
			os.WriteFile(filepath.Join(mine, "0000ffffffffffff"+spoolExt), data, 0o600) // sorts last
		}
	}
	slices.Sort(own)
	if len(own) != 6 {
		t.Fatalf("%d spool files of the destination, want 6", len(own))
	}
	flip, _ := os.ReadFile(own[1])
	flip[100] ^= 0x20
	os.WriteFile(own[1], flip, 0o600)
	trunc, _ := os.ReadFile(own[3])
	os.WriteFile(own[3], trunc[:len(trunc)-5], 0o600)
	os.WriteFile(own[4], []byte("not a spool file at all"), 0o600)

	spool = openSpool(t, dir, 1<<30)
	defer spool.Close()
	notices := &testutil.SyncBuffer{}
	up := &fakeSink{}
	q = newTestQueue(t, up, QueueConfig{Spool: spool, Notices: notices})
	q.Close()
	want := slices.Concat(all[0:10], all[20:30], all[50:60])
	if got := up.records(); !slices.Equal(got, want) {
		t.Errorf("sent %d records, want the %d of the sound files", len(got), len(want))
	}
	if st := q.Stats(); st.Dropped[DropSpoolCorrupt] != 4 || dropped(st) != 4 {
		t.Errorf("dropped %v, want spool_corrupt 4", st.Dropped)
	}
	aside, _ := filepath.Glob(filepath.Join(mine, spoolCorrupt, "*"))
	if len(aside) != 4 || strings.Count(notices.String(), "moved to") != 4 {
		t.Errorf("moved aside: %v; notices:\n%s", aside, notices)
	}
	for _, says := range []string{"checksum", "bytes, the header says", "shorter than a header", `for destination "fake://other"`} {
		if !strings.Contains(notices.String(), says) {
			t.Errorf("notices do not say %q:\n%s", says, notices)
		}
	}
}

// TestSpoolExclusive: one process per spool directory, one Queue per
// destination.
func TestSpoolExclusive(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir, 1<<20)
	defer s.Close()
	if _, err := OpenSpool(dir, 1<<20); !errors.Is(err, ErrSpoolInUse) {
		t.Errorf("second OpenSpool: %v, want ErrSpoolInUse", err)
	}
	q := newTestQueue(t, &fakeSink{}, QueueConfig{Spool: s})
	defer q.Close()
	// A destination of an earlier run, not of this one.
	down := &fakeSink{fail: func(string, *report.Batch) error { return errDown }}
	old, err := NewQueue("ipfix://old:4739", down, QueueConfig{BatchSize: 5, Spool: s, RetryMin: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	put(t, old, genRecords(0, 10))
	old.Close()
	s.Close()
	s = openSpool(t, dir, 1<<20)
	defer s.Close()
	q2 := newTestQueue(t, &fakeSink{}, QueueConfig{Spool: s})
	defer q2.Close()
	if got := s.Unclaimed(); len(got) != 1 || got["ipfix://old:4739"] != 2 {
		t.Errorf("Unclaimed() = %v, want ipfix://old:4739 with 2 files", got)
	}
	if _, err := NewQueue("fake://dest", &fakeSink{}, QueueConfig{Spool: s}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("second Queue for one destination: %v", err)
	}
}

// TestSpoolHighWater: with the destination up but stuck in a call, memory
// more than half full spills to the spool, and when the call returns
// everything arrives in order: the batch in flight, the spooled ones, then
// those still in memory.
func TestSpoolHighWater(t *testing.T) {
	dir := t.TempDir()
	spool := openSpool(t, dir, 1<<30)
	defer spool.Close()
	sink := &fakeSink{gate: make(chan struct{})}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 10, MaxQueued: 40, BatchAge: time.Hour, Spool: spool})
	all := genRecords(0, 200)
	for i := 0; i < 200; i += 10 {
		put(t, q, all[i:i+10])
		waitFor(t, "memory back to half", func() bool { return q.Stats().Queued <= 20 })
	}
	if st := q.Stats(); st.Spooled < 100 || dropped(st) != 0 {
		t.Errorf("stats %+v: want most batches spooled and nothing dropped", st)
	}
	close(sink.gate)
	q.Close()
	if got := sink.records(); !slices.Equal(got, all) {
		t.Errorf("delivered %d records, want the %d given, once each, in order", len(got), len(all))
	}
	if files := spoolFiles(t, dir); len(files) != 0 || dropped(q.Stats()) != 0 {
		t.Errorf("left %v in the spool, dropped %v", files, q.Stats().Dropped)
	}
}

// TestQueueWait: with Wait, a destination that is up but slower than the
// caller slows the caller instead of losing records; one that fails does
// not stop it: what does not fit is dropped as without Wait.
func TestQueueWait(t *testing.T) {
	sink := &fakeSink{delay: 2 * time.Millisecond}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 10, MaxQueued: 20, BatchAge: time.Hour, Wait: true})
	all := genRecords(0, 500)
	for i := 0; i < len(all); i += 25 {
		put(t, q, all[i:i+25])
	}
	if st := q.Stats(); dropped(st) != 0 {
		t.Fatalf("a slow destination that is up: dropped %v", st.Dropped)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if got := sink.records(); !slices.Equal(got, all) {
		t.Fatalf("delivered %d records, want the 500 given, in order", len(got))
	}

	// A failing destination: Records returns, and counts what it drops.
	sink = &fakeSink{fail: func(string, *report.Batch) error { return errDown }}
	q = newTestQueue(t, sink, QueueConfig{BatchSize: 10, MaxQueued: 20, BatchAge: time.Millisecond, DrainTimeout: 10 * time.Millisecond, Wait: true})
	put(t, q, genRecords(0, 10))
	waitFor(t, "the destination found down", func() bool { return !q.Stats().Up })
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 100 {
			q.Records(&report.Batch{Records: genRecords(10+i*10, 10)})
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Records waited for a destination that is down")
	}
	if st := q.Stats(); st.Dropped[DropQueueFull] < 1000-20 {
		t.Errorf("down: %+v; want all but 20 of the 1000 later records dropped as queue_full", st)
	}
	q.Close()
}

// TestQueueBatchPerObserver: a batch holds the records of one observer
// (report.Batch.Observer): records of another begin a batch, and a batch takes
// the observer of the records it holds.
func TestQueueBatchPerObserver(t *testing.T) {
	sink := &fakeSink{}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 25, BatchAge: time.Hour})
	all := genRecords(0, 60)
	for _, part := range []struct {
		from, to int
		observer string
	}{{0, 10, "a"}, {10, 20, "a"}, {20, 30, "b"}, {30, 60, ""}} {
		if err := q.Records(&report.Batch{Records: all[part.from:part.to], Observer: part.observer}); err != nil {
			t.Fatal(err)
		}
	}
	q.Close()
	batches, _, _ := sink.snapshot()
	var got []string
	for _, b := range batches {
		got = append(got, fmt.Sprintf("%q:%d", b.Observer, len(b.Records)))
	}
	if want := []string{`"a":20`, `"b":10`, `"":25`, `"":5`}; !slices.Equal(got, want) {
		t.Errorf("batches (observer:records) %v, want %v", got, want)
	}
	if !slices.Equal(sink.records(), all) {
		t.Errorf("records delivered out of order or not once each")
	}
}

// TestQueueBatchPerDomain: a batch holds the records of one observation
// domain: a batch given with one (report.Batch.Domain) keeps it, one without
// takes QueueConfig.Domain, domain 0 is a domain (not "none"), and
// records of another domain begin a batch. Without QueueConfig.Domain,
// batches without one stay without.
func TestQueueBatchPerDomain(t *testing.T) {
	sink := &fakeSink{}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 25, BatchAge: time.Hour, Domain: report.Domain{ID: 9, Valid: true}})
	all := genRecords(0, 70)
	for _, part := range []struct {
		from, to int
		domain   report.Domain
	}{
		{0, 10, report.Domain{}}, {10, 20, report.Domain{ID: 9, Valid: true}}, // the Queue's, both
		{20, 30, report.Domain{ID: 7, Valid: true}},
		{30, 40, report.Domain{ID: 0, Valid: true}},
		{40, 70, report.Domain{}},
	} {
		if err := q.Records(&report.Batch{Records: all[part.from:part.to], Domain: part.domain}); err != nil {
			t.Fatal(err)
		}
	}
	q.Close()
	batches, _, _ := sink.snapshot()
	var got []string
	for _, b := range batches {
		got = append(got, fmt.Sprintf("%v/%d:%d", b.Domain.Valid, b.Domain.ID, len(b.Records)))
	}
	if want := []string{"true/9:20", "true/7:10", "true/0:10", "true/9:25", "true/9:5"}; !slices.Equal(got, want) {
		t.Errorf("batches (valid/domain:records) %v, want %v", got, want)
	}
	if !slices.Equal(sink.records(), all) {
		t.Errorf("records delivered out of order or not once each")
	}

	none := &fakeSink{}
	q = newTestQueue(t, none, QueueConfig{BatchSize: 25, BatchAge: time.Hour})
	for _, d := range []report.Domain{{}, {ID: 0, Valid: true}} {
		if err := q.Records(&report.Batch{Records: genRecords(0, 5), Domain: d}); err != nil {
			t.Fatal(err)
		}
	}
	q.Close()
	batches, _, _ = none.snapshot()
	if len(batches) != 2 || batches[0].Domain != (report.Domain{}) || batches[1].Domain != (report.Domain{ID: 0, Valid: true}) {
		t.Errorf("without QueueConfig.Domain: batches %+v, want one without a domain, then one of domain 0", batches)
	}
}

// TestSpoolKeepsObserver: the batches a run spools keep its observer
// (the Reporter's Config.Observer) and observation domain (the Queue's
// QueueConfig.Domain) into a later run with another --observer and
// --observation-domain, which sends them under the first run's name and
// domain, then its own records under its own. A version 1 file, left by a
// flowdedup before batches carried their observer, goes first, as it was
// written first, without an observer or domain: the destination's own.
func TestSpoolKeepsObserver(t *testing.T) {
	dir := t.TempDir()
	down := &fakeSink{fail: func(string, *report.Batch) error { return errDown }}
	spool := openSpool(t, dir, 1<<30)
	cfg := QueueConfig{BatchSize: 25, BatchAge: time.Hour, Spool: spool, RetryMin: time.Millisecond, RetryMax: time.Millisecond}
	run := func(sink *fakeSink, observer string, domain uint32, recs []pipeline.Record) {
		t.Helper()
		cfg.Domain = report.Domain{ID: domain, Valid: true}
		q := newTestQueue(t, sink, cfg)
		r, err := report.New(report.Config{Kind: flow.Key5Tuple, Observer: observer, Exports: []report.Export{q}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			if err := r.Record(&recs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	first := genRecords(0, 60)
	run(down, "edge-fra1", 7, first)
	if n := len(spoolFiles(t, dir)); n != 3 {
		t.Fatalf("%d spool files, want the 3 batches of the first run", n)
	}
	down.mu.Lock()
	for _, b := range down.tries {
		if b.Observer != "edge-fra1" || b.Domain != (report.Domain{ID: 7, Valid: true}) {
			t.Errorf("first run tried batch %d with observer %q, domain %+v; want edge-fra1, 7", b.ID, b.Observer, b.Domain)
		}
	}
	down.mu.Unlock()
	spool.Close()
	old := genRecords(500, 5)
	v1 := appendSpoolFileV1(nil, "fake://dest", &report.Batch{ID: 42, Records: old}, nil, false)
	if err := os.WriteFile(filepath.Join(dir, destDirName("fake://dest"), fmt.Sprintf("%016x%s", uint64(firstSeq-1), spoolExt)), v1, 0o600); err != nil {
		t.Fatal(err)
	}

	// The restart, renamed.
	up := &fakeSink{}
	spool = openSpool(t, dir, 1<<30)
	defer spool.Close()
	cfg.Spool = spool
	second := genRecords(1000, 30)
	run(up, "edge-fra2", 9, second)

	type obsRec struct {
		observer string
		domain   report.Domain
		rec      pipeline.Record
	}
	var want, got []obsRec
	for _, part := range []struct {
		observer string
		domain   report.Domain
		recs     []pipeline.Record
	}{{"", report.Domain{}, old}, {"edge-fra1", report.Domain{ID: 7, Valid: true}, first}, {"edge-fra2", report.Domain{ID: 9, Valid: true}, second}} {
		for _, r := range part.recs {
			want = append(want, obsRec{part.observer, part.domain, r})
		}
	}
	batches, _, _ := up.snapshot()
	for _, b := range batches {
		for _, r := range b.Records {
			got = append(got, obsRec{b.Observer, b.Domain, r})
		}
	}
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("%d records delivered, want %d; record %d under observer %q, domain %+v; want %q, %+v",
					len(got), len(want), i, got[i].observer, got[i].domain, want[i].observer, want[i].domain)
			}
		}
		t.Fatalf("%d records delivered, want %d", len(got), len(want))
	}
	if batches[0].ID != 42 {
		t.Errorf("the version 1 file's batch went out as batch %d, want 42", batches[0].ID)
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Errorf("spool after delivery: %v", files)
	}
}

// A batch whose observer a spool file cannot hold is not spooled: an error
// (report.ErrObserver), no file, nothing taken from the bound. The Reporter never
// makes one (New refuses such an observer).
func TestSpoolObserverBound(t *testing.T) {
	dir := t.TempDir()
	spool := openSpool(t, dir, 1<<30)
	defer spool.Close()
	d, err := spool.claim("fake://dest")
	if err != nil {
		t.Fatal(err)
	}
	long := &report.Batch{ID: 1, Records: genRecords(0, 2), Observer: strings.Repeat("r", report.MaxObserverLen+1)}
	if err := d.put(long, nil, false, false); !errors.Is(err, report.ErrObserver) {
		t.Errorf("put of a batch with an observer of %d bytes: %v, want report.ErrObserver", len(long.Observer), err)
	}
	if files := spoolFiles(t, dir); len(files) != 0 || spool.Used() != 0 || len(d.entries) != 0 {
		t.Errorf("after the refused put: files %v, %d bytes used, %d entries", files, spool.Used(), len(d.entries))
	}
	long.Observer = long.Observer[1:]
	if err := d.put(long, nil, false, false); err != nil {
		t.Errorf("put of a batch with an observer of %d bytes: %v", len(long.Observer), err)
	}
}

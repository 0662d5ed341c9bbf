package export

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/record"

	"github.com/flowdedup/flowdedup/flow"
)

// fakeSink is a test double of a destination: the Queue's policy (what it
// retries, drops, spools, in what order) is what these tests check, so the
// destination's behaviour is scripted: slow, failing, rejecting, hanging.
type fakeSink struct {
	mu      sync.Mutex
	batches []record.Batch   // delivered batches, with copies of their records
	order   []string         // "b<id>" and "w<start>" in delivery order
	windows []record.Summary // delivered summaries
	tries   []record.Batch   // every Records call: ID, Retry, Observer and record.Domain (no records)
	calls   []time.Time
	flushes int
	closes  int

	// fail, when set, decides the outcome of each call: op is "records",
	// "window" or "flush"; b is nil for window and flush.
	fail func(op string, b *record.Batch) error
	// gate, when set, makes every call wait until it is closed.
	gate chan struct{}
	// delay makes every call take that long.
	delay time.Duration
}

var errDown = fmt.Errorf("fake: connection refused: %w", syscall.ECONNREFUSED)

func (s *fakeSink) enter(op string, b *record.Batch) error {
	if s.gate != nil {
		<-s.gate
	}
	if s.delay > 0 {
		time.Sleep(s.delay) // the destination is slow: that is what is tested
	}
	s.mu.Lock()
	s.calls = append(s.calls, time.Now())
	if b != nil {
		s.tries = append(s.tries, record.Batch{ID: b.ID, Retry: b.Retry, Observer: b.Observer, Domain: b.Domain})
	}
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return fail(op, b)
	}
	return nil
}

func (s *fakeSink) Records(b *record.Batch) error {
	if err := s.enter("records", b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, record.Batch{ID: b.ID, Retry: b.Retry, Observer: b.Observer, Domain: b.Domain, Records: slices.Clone(b.Records)})
	s.order = append(s.order, fmt.Sprintf("b%d", b.ID))
	return nil
}

func (s *fakeSink) Window(w *record.Summary) error {
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
func (s *fakeSink) records() []record.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []record.Record
	for _, b := range s.batches {
		all = append(all, b.Records...)
	}
	return all
}

func (s *fakeSink) snapshot() (batches []record.Batch, windows []record.Summary, order []string) {
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
func genRecords(from, n int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		k := from + i
		src := netip.AddrFrom4([4]byte{10, byte(k >> 16), byte(k >> 8), byte(k)})
		recs[i] = record.Record{
			Key:         flow.MakeKey(flow.Key5Tuple, src, netip.MustParseAddr("192.0.2.1"), 6, uint16(k), 80),
			TimeNs:      at("2026-01-01T00:00:00Z") + int64(k)*int64(time.Millisecond),
			WindowNs:    at("2026-01-01T00:00:00Z"),
			WindowEndNs: at("2026-01-01T01:00:00Z"),
			Worker:      k % 3,
		}
	}
	return recs
}
func newTestQueue(t *testing.T, sink record.Destination, cfg QueueConfig) *Queue {
	t.Helper()
	q, err := NewQueue("fake://dest", sink, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func put(t *testing.T, q *Queue, recs []record.Record) {
	t.Helper()
	if err := q.Records(&record.Batch{Records: recs}); err != nil {
		t.Fatal(err)
	}
}

func dropped(st record.ExportStats) (all uint64) {
	for _, n := range st.Dropped {
		all += n
	}
	return all
}

// TestQueueDelivers: records arrive once each, in order, in batches of at
// most BatchSize with consecutive IDs, each followed by a Flush; a summary
// arrives after the records given before it; Close closes the record.Destination once.
func TestQueueDelivers(t *testing.T) {
	sink := &fakeSink{}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 100, BatchAge: time.Hour})
	all := genRecords(0, 1000)
	for i := 0; i < len(all); i += 37 { // pieces that do not divide batches
		put(t, q, all[i:min(i+37, len(all))])
		if i == 37*10 {
			q.Window(&record.Summary{WindowSummary: record.WindowSummary{StartNs: 1}})
		}
	}
	q.Window(&record.Summary{WindowSummary: record.WindowSummary{StartNs: 2, Final: true}})
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
	if err := q.Records(&record.Batch{Records: all[:1]}); !errors.Is(err, ErrQueueClosed) {
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
		if err := q.Window(&record.Summary{WindowSummary: record.WindowSummary{StartNs: int64(w)}}); err != nil {
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
	// record.Summary w follows the batch holding record 5w+4, its window's last.
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
	testutil.WaitFor(t, "the young batch delivered", 10*time.Second, func() bool { return len(sink.records()) == 10 })
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
			q.Records(&record.Batch{Records: genRecords(i*10, 10)})
			if i%10 == 0 {
				q.Window(&record.Summary{WindowSummary: record.WindowSummary{StartNs: int64(i)}})
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
		t.Errorf("a record.Destination stuck in a call was closed under it")
	}
}

// TestQueueBoundInRecords: the memory bound is MaxQueued records, however
// the batches holding them are cut. Records of two observers, one at a
// time, make batches of one record each (a batch is one observer's); with
// a hung destination, memory takes exactly MaxQueued of them (before, it
// held one BatchSize buffer per batch, and dropped as queue_full with 10
// records in memory for a bound of 100), and the notice of a failing
// destination gives the same number.
func TestQueueBoundInRecords(t *testing.T) {
	sink := &fakeSink{gate: make(chan struct{})}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 10, MaxQueued: 100, BatchAge: time.Hour})
	all := genRecords(0, 1000)
	for i := range all {
		q.Records(&record.Batch{Records: all[i : i+1], Observer: []string{"r1", "r2"}[i%2]})
	}
	if st := q.Stats(); st.Queued != 100 || st.Dropped[DropQueueFull] != 900 {
		t.Errorf("queued %d, dropped %v; want 100 queued, 900 queue_full", st.Queued, st.Dropped)
	}
	close(sink.gate)
	q.Close()
	if got := sink.records(); !slices.Equal(got, all[:100]) {
		t.Errorf("delivered %d records, want the first 100 given", len(got))
	}

	notices := &testutil.SyncBuffer{}
	down := &fakeSink{fail: func(string, *record.Batch) error { return errDown }}
	q = newTestQueue(t, down, QueueConfig{BatchSize: 10, MaxQueued: 100, BatchAge: time.Hour, DrainTimeout: time.Millisecond, Notices: notices})
	put(t, q, all[:10]) // one full batch: the first attempt fails
	testutil.WaitFor(t, "the destination found down", 10*time.Second, func() bool { return !q.Stats().Up })
	for i := 10; i < len(all); i++ {
		q.Records(&record.Batch{Records: all[i : i+1], Observer: []string{"r1", "r2"}[i%2]})
	}
	if st := q.Stats(); st.Queued != 100 || st.Dropped[DropQueueFull] != 900 {
		t.Errorf("down: queued %d, dropped %v; want 100 queued, 900 queue_full", st.Queued, st.Dropped)
	}
	q.Close()
	if n := notices.String(); !strings.Contains(n, "up to 100 records wait in memory") {
		t.Errorf("notices:\n%s", n)
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
	sink = &fakeSink{fail: func(string, *record.Batch) error { return errDown }}
	q = newTestQueue(t, sink, QueueConfig{BatchSize: 10, MaxQueued: 20, BatchAge: time.Millisecond, DrainTimeout: 10 * time.Millisecond, Wait: true})
	put(t, q, genRecords(0, 10))
	testutil.WaitFor(t, "the destination found down", 10*time.Second, func() bool { return !q.Stats().Up })
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 100 {
			q.Records(&record.Batch{Records: genRecords(10+i*10, 10)})
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
// (record.Batch.Observer): records of another begin a batch, and a batch takes
// the observer of the records it holds.
func TestQueueBatchPerObserver(t *testing.T) {
	sink := &fakeSink{}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 25, BatchAge: time.Hour})
	all := genRecords(0, 60)
	for _, part := range []struct {
		from, to int
		observer string
	}{{0, 10, "a"}, {10, 20, "a"}, {20, 30, "b"}, {30, 60, ""}} {
		if err := q.Records(&record.Batch{Records: all[part.from:part.to], Observer: part.observer}); err != nil {
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
// domain: a batch given with one (record.Batch.Domain) keeps it, one without
// takes QueueConfig.Domain, domain 0 is a domain (not "none"), and
// records of another domain begin a batch. Without QueueConfig.Domain,
// batches without one stay without.
func TestQueueBatchPerDomain(t *testing.T) {
	sink := &fakeSink{}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 25, BatchAge: time.Hour, Domain: record.Domain{ID: 9, Valid: true}})
	all := genRecords(0, 70)
	for _, part := range []struct {
		from, to int
		domain   record.Domain
	}{
		{0, 10, record.Domain{}}, {10, 20, record.Domain{ID: 9, Valid: true}}, // the Queue's, both
		{20, 30, record.Domain{ID: 7, Valid: true}},
		{30, 40, record.Domain{ID: 0, Valid: true}},
		{40, 70, record.Domain{}},
	} {
		if err := q.Records(&record.Batch{Records: all[part.from:part.to], Domain: part.domain}); err != nil {
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
	for _, d := range []record.Domain{{}, {ID: 0, Valid: true}} {
		if err := q.Records(&record.Batch{Records: genRecords(0, 5), Domain: d}); err != nil {
			t.Fatal(err)
		}
	}
	q.Close()
	batches, _, _ = none.snapshot()
	if len(batches) != 2 || batches[0].Domain != (record.Domain{}) || batches[1].Domain != (record.Domain{ID: 0, Valid: true}) {
		t.Errorf("without QueueConfig.Domain: batches %+v, want one without a domain, then one of domain 0", batches)
	}
}

// summaryless is a destination whose Window sends no summary, as IPFIX's
// (record.SummaryCarrier).
type summaryless struct{ *fakeSink }

func (summaryless) CarriesSummaries() bool { return false }

// TestQueueSummaryless: for a destination that carries no summaries
// (IPFIX), the queue still calls its Window at the end of each window (it
// flushes there), but counts no summary sent or lost: its totals count
// records alone. The same runs with a destination that carries them count
// the summaries, so that the difference is the one tested.
func TestQueueSummaryless(t *testing.T) {
	run := func(sink record.Destination, fail bool) record.ExportStats {
		t.Helper()
		cfg := QueueConfig{BatchSize: 100, BatchAge: time.Hour}
		if fail {
			// Down for good: Close waits DrainTimeout, then drops all.
			cfg.DrainTimeout = 10 * time.Millisecond
			cfg.RetryMin, cfg.RetryMax = time.Millisecond, time.Millisecond
		}
		q := newTestQueue(t, sink, cfg)
		all := genRecords(0, 300)
		put(t, q, all[:150])
		q.Window(&record.Summary{WindowSummary: record.WindowSummary{StartNs: 1}})
		put(t, q, all[150:])
		q.Window(&record.Summary{WindowSummary: record.WindowSummary{StartNs: 2, Final: true}})
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		return q.Stats()
	}
	down := func(string, *record.Batch) error { return errDown }
	for _, c := range []struct {
		name           string
		sink           func() (record.Destination, *fakeSink)
		sentWindows    uint64
		droppedWhenOff uint64
	}{
		{"summaries", func() (record.Destination, *fakeSink) { s := &fakeSink{}; return s, s }, 2, 302},
		{"summaryless", func() (record.Destination, *fakeSink) { s := &fakeSink{}; return summaryless{s}, s }, 0, 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, s := c.sink()
			st := run(d, false)
			if _, windows, _ := s.snapshot(); len(windows) != 2 {
				t.Errorf("Window called %d times, want 2 (it ends each window)", len(windows))
			}
			if st.Sent != 300 || st.SentWindows != c.sentWindows || dropped(st) != 0 {
				t.Errorf("up: sent %d, sent windows %d, dropped %v; want 300, %d, none", st.Sent, st.SentWindows, st.Dropped, c.sentWindows)
			}
			d, s = c.sink()
			s.fail = down
			st = run(d, true)
			if st.Sent != 0 || st.SentWindows != 0 || dropped(st) != c.droppedWhenOff {
				t.Errorf("down: sent %d, sent windows %d, dropped %v; want 0, 0 and %d in all", st.Sent, st.SentWindows, st.Dropped, c.droppedWhenOff)
			}
		})
	}
}

package export

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/record"
)

// TestQueueRetries: transient failures are retried until they pass; the
// retried batch keeps its ID and has Retry set; nothing is lost or
// duplicated; the destination's fall and return are said once each.
func TestQueueRetries(t *testing.T) {
	sink := &fakeSink{}
	failures := 0
	sink.fail = func(op string, b *record.Batch) error {
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
	want := []record.Batch{{ID: 1000}, {ID: 1001}, {ID: 1001, Retry: true}, {ID: 1001, Retry: true}, {ID: 1001, Retry: true},
		{ID: 1002}, {ID: 1003}, {ID: 1004}, {ID: 1005}}
	if !slices.EqualFunc(tries, want, func(a, b record.Batch) bool { return a.ID == b.ID && a.Retry == b.Retry }) {
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
	sink.fail = func(op string, b *record.Batch) error {
		if op == "records" && b.Records[0].Worker == 1 {
			return fmt.Errorf("fake: no column worker: %w", record.ErrRejected)
		}
		if op == "window" {
			return fmt.Errorf("fake: no table windows: %w", record.ErrRejected)
		}
		return nil
	}
	notices := &testutil.SyncBuffer{}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 10, BatchAge: time.Hour, Notices: notices})
	all := genRecords(0, 100)
	var want []record.Record
	for i := 0; i < 100; i += 10 {
		put(t, q, all[i:i+10])
		if all[i].Worker != 1 {
			want = append(want, all[i:i+10]...)
		}
	}
	q.Window(&record.Summary{})
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
	sink := &fakeSink{fail: func(string, *record.Batch) error { return errDown }}
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

// TestQueueSaysWhatToFixOnce: a destination that fails with a transient
// error is said once when it begins to fail, not at each retry; when its
// error changes to one the operator must fix (record.Fixer: a server that
// was down and now refuses the login), that is said once more, whatever
// the number of retries; a Fix already said is not said again until the
// destination was back.
func TestQueueSaysWhatToFixOnce(t *testing.T) {
	wrongPassword := record.WithFix(errors.New("fake: HTTP 401: wrong password"), "fix the password of the --export URL")
	var calls int
	var mu sync.Mutex
	sink := &fakeSink{fail: func(op string, b *record.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		switch {
		case calls <= 5:
			return errDown
		case calls <= 30:
			return wrongPassword
		case calls <= 35:
			return errDown // down again, while the password is still wrong
		case calls <= 40:
			return wrongPassword
		}
		return nil
	}}
	notices := &testutil.SyncBuffer{}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 10, BatchAge: time.Hour, RetryMin: time.Millisecond, RetryMax: time.Millisecond, Notices: notices})
	all := genRecords(0, 10)
	put(t, q, all)
	q.Close()
	if got := sink.records(); !slices.Equal(got, all) {
		t.Fatalf("delivered %d records, want the %d given", len(got), len(all))
	}
	n := notices.String()
	if strings.Count(n, ": unreachable: fake: connection refused") != 1 ||
		strings.Count(n, "still failing, now: fake: HTTP 401: wrong password; fix the password of the --export URL; retrying\n") != 1 ||
		strings.Count(n, "fix the password") != 1 || strings.Count(n, "reachable again") != 1 || strings.Count(n, "\n") != 3 {
		t.Errorf("notices: want the fall, what to fix once over 30 retries, and the return:\n%s", n)
	}
}

// A destination whose first error is one to fix says it in the first
// notice, and not again.
func TestQueueSaysWhatToFixFirst(t *testing.T) {
	var calls atomic.Int32
	sink := &fakeSink{fail: func(string, *record.Batch) error {
		if calls.Add(1) <= 20 {
			return record.WithFix(errors.New("fake: HTTP 403"), "let the user write")
		}
		return nil
	}}
	notices := &testutil.SyncBuffer{}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 10, BatchAge: time.Hour, RetryMin: time.Millisecond, RetryMax: time.Millisecond, Notices: notices})
	put(t, q, genRecords(0, 10))
	q.Close()
	n := notices.String()
	if strings.Count(n, ": unreachable: fake: HTTP 403; let the user write; retrying") != 1 || strings.Count(n, "let the user write") != 1 ||
		strings.Count(n, "\n") != 2 {
		t.Errorf("notices: want the fall with what to fix, and the return:\n%s", n)
	}
}

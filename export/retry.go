package export

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/flowdedup/flowdedup/record"
)

// caller makes the record.Destination calls the manager asks for, one at a time, so that
// the manager stays free to take new batches and spool while a call
// blocks.
func (q *Queue) caller() {
	for c := range q.calls {
		switch c.op {
		case opRecords:
			c.err = q.destination.Records(&c.it.batch)
		case opWindow:
			c.err = q.destination.Window(c.it.sum)
		case opFlush:
			c.err = q.destination.Flush()
		case opClose:
			c.err = q.destination.Close()
		}
		q.results <- c // never blocks: one call at a time
	}
}

// manage is the Queue's manager goroutine: it seals aged batches, hands
// the oldest item to the caller, handles the outcome, spools, and drains
// on Close.
func (q *Queue) manage() {
	defer close(q.done)
	defer close(q.calls)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	closeCh := q.closeCh
	for {
		now := time.Now()
		q.sealAged(now)
		if q.spool != nil {
			q.spill()
		}
		if !q.busy && !now.Before(q.retryAt) {
			q.retryAt = time.Time{}
			if q.inflight == nil {
				q.inflight = q.next()
			}
			if q.inflight != nil && q.mark(q.inflight) {
				q.start(q.inflight)
			}
		}
		if !q.deadline.IsZero() && q.finishing(now) {
			if q.rejectedKept > 0 {
				q.notice("%d batches and summaries it rejected in this run are kept in %s: inspect them, then remove them (they count against the spool's bound)",
					q.rejectedKept, q.spool.rejectedDir())
			}
			return
		}
		if wake := q.wakeAt(); wake.IsZero() {
			timer.Stop()
		} else {
			timer.Reset(max(time.Until(wake), 0))
		}
		select {
		case c := <-q.results:
			q.handle(c)
		case <-q.kick:
		case <-timer.C:
		case <-closeCh:
			closeCh = nil
			q.deadline = time.Now().Add(q.cfg.DrainTimeout)
		}
	}
}

// wakeAt returns when the manager must look again without being woken:
// the fill batch's age, a retry, the drain deadline; zero for never.
func (q *Queue) wakeAt() time.Time {
	var at time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	q.mu.Lock()
	if q.fill != nil {
		earliest(q.fillSince.Add(q.cfg.BatchAge))
	}
	q.mu.Unlock()
	if !q.busy {
		earliest(q.retryAt)
	}
	earliest(q.deadline)
	return at
}

// next returns the oldest item not yet delivered: from the spool, which
// holds only items older than those in memory, then from memory.
func (q *Queue) next() *item {
	for q.spool != nil && len(q.spool.entries) > 0 {
		var f spoolFile
		err := q.spool.load(q.spoolBuf, &f)
		if err == nil {
			it := q.newItemLocked()
			it.onDisk, it.attempted, it.marked = true, f.attempted, f.attempted
			if f.summary {
				s := f.sum
				it.sum = &s
			} else {
				q.spoolBuf = f.records[:0]
				it.batch = record.Batch{ID: f.id, Records: f.records, Retry: f.attempted, Observer: f.observer, Domain: f.domain}
			}
			return it
		}
		if !errors.Is(err, ErrSpoolCorrupt) {
			// The disk failed us, not the file: try again later.
			q.noticeSpoolError(err)
			q.retryAt = time.Now().Add(q.cfg.RetryMax)
			return nil
		}
		to, e, merr := q.spool.moveAside()
		n, known := e.lost()
		q.drop(reasonSpoolCorrupt, n)
		q.spoolGauges()
		counted := fmt.Sprintf("counted as %s: %d records, as its header says", DropSpoolCorrupt, n)
		switch {
		case !known:
			counted = fmt.Sprintf("its header cannot be read: counted as 1 %s, at least one record or summary", DropSpoolCorrupt)
		case e.summary:
			counted = fmt.Sprintf("a window summary, counted as 1 %s", DropSpoolCorrupt)
		}
		if merr != nil {
			q.notice("spool file could not be read (%v) nor moved aside: %v; %s", err, merr, counted)
		} else {
			q.notice("spool file could not be read (%v); moved to %s (%s)", err, to, counted)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.readyHead == len(q.ready) {
		return nil
	}
	return q.popReady()
}

// popReady takes the oldest item of memory; q.mu is held.
func (q *Queue) popReady() *item {
	it := q.ready[q.readyHead]
	q.ready[q.readyHead] = nil
	q.readyHead++
	if q.readyHead == len(q.ready) {
		q.ready, q.readyHead = q.ready[:0], 0
	}
	if it.sum != nil {
		q.windows--
	}
	return it
}

func (q *Queue) newItemLocked() *item {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.newItem()
}

// mark makes sure the spool file of it, when it comes from the spool,
// says "attempted" on disk before it is given to the destination
// (destSpool.markAttempted), and reports whether it may be given now. A
// file that cannot be marked (the disk failed) is not sent: it is tried
// again later, so that a crash can never leave a file that landed
// unmarked, which the next run would send again without the read-back.
// The first attempt itself needs no read-back: the file said that it
// was never given.
func (q *Queue) mark(it *item) bool {
	if !it.onDisk || it.marked {
		return true
	}
	err := q.spool.markAttempted()
	if err != nil && !errors.Is(err, ErrSpoolCorrupt) { // removed under us: no run sends it again
		if !q.markErr {
			q.markErr = true
			q.notice("%v; it is not sent until it is marked (a crash could make the next run write it twice): trying again in %s", err, q.cfg.RetryMax)
		}
		q.retryAt = time.Now().Add(q.cfg.RetryMax)
		return false
	}
	q.markErr = false
	it.marked = true
	return true
}

// start gives the next call of it to the caller.
func (q *Queue) start(it *item) {
	op := uint8(opRecords)
	switch {
	case it.flushing:
		op = opFlush
	case it.sum != nil:
		op = opWindow
	}
	q.busy = true
	q.call = call{op: op, it: it}
	q.calls <- &q.call // never blocks: the caller is idle
}

// handle takes the outcome of a call.
func (q *Queue) handle(c *call) {
	q.busy = false
	if c.op == opClose {
		return
	}
	it := c.it
	switch {
	case c.err == nil && !it.flushing:
		it.flushing = true // Flush next, at once
	case c.err == nil:
		q.markUp()
		if it.sum != nil {
			if q.summaries {
				q.sentWindows.Add(1)
			}
		} else {
			q.sent.Add(uint64(len(it.batch.Records)))
		}
		q.finish(it)
	case errors.Is(c.err, record.ErrRejected):
		q.markUp() // it answered
		q.drop(reasonRejected, q.weight(it))
		q.reject(it, c.err)
		q.finish(it)
	default:
		// The outcome is unknown: part of it may have landed.
		it.attempted = true
		if !it.flushing {
			it.batch.Retry = true
		}
		q.markDown(c.err) // spill keeps it on disk too, as the oldest
	}
}

// reject keeps what the destination rejected for good in the spool's
// rejected directory, when there is a spool (destSpool.keepRejected), and
// says so at the first rejection, and at the first that could not be kept.
func (q *Queue) reject(it *item, cause error) {
	if q.spool == nil {
		if !q.rejectSaid {
			q.rejectSaid = true
			q.notice("rejected %s: %v; what it rejects is dropped and counted (export_dropped %s); a spool would keep it for inspection", what(it), cause, DropRejected)
		}
		return
	}
	var b *record.Batch
	if it.sum == nil {
		b = &it.batch
	}
	path, err := q.spool.keepRejected(b, it.sum, cause, time.Now())
	if err != nil {
		if !q.rejectLostSaid {
			q.rejectLostSaid = true
			q.notice("rejected %s: %v; counted (export_dropped %s) but not kept for inspection: %v", what(it), cause, DropRejected, err)
		}
		return
	}
	q.rejectedKept++
	if !q.rejectSaid {
		q.rejectSaid = true
		q.notice("rejected %s: %v; counted (export_dropped %s) and kept for inspection in %s (what it rejects next goes there too; %s says why)",
			what(it), cause, DropRejected, path, filepath.Join(filepath.Dir(path), rejectedLog))
	}
}

func what(it *item) string {
	if it.sum != nil {
		return "a window summary"
	}
	return fmt.Sprintf("batch %d (%d records)", it.batch.ID, len(it.batch.Records))
}

// finish is done with the item in flight: delivered or dropped.
func (q *Queue) finish(it *item) {
	q.inflight = nil
	if it.onDisk {
		q.spool.remove()
		q.spoolGauges()
	}
	q.release(it)
}

// release returns the memory of an item that left memory.
func (q *Queue) release(it *item) {
	q.mu.Lock()
	if it.counted {
		q.queued -= len(it.batch.Records)
		q.queuedNow.Store(int64(q.queued))
		q.room.Broadcast()
	}
	if it.pooled {
		q.free = append(q.free, it.batch.Records[:0])
	}
	*it = item{}
	q.freeItems = append(q.freeItems, it)
	q.mu.Unlock()
}

func (q *Queue) markUp() {
	q.attempts = 0
	q.retryAt = time.Time{}
	clear(q.fixSaid)
	if q.down {
		q.down = false
		q.up.Store(true)
		q.notice("reachable again after %s", time.Since(q.downSince).Round(time.Millisecond))
	}
}

func (q *Queue) markDown(err error) {
	q.attempts++
	q.retryAt = time.Now().Add(backoff(q.cfg.RetryMin, q.cfg.RetryMax, q.attempts, q.rng))
	q.lastErr = err
	fix := record.FixOf(err)
	if fix != "" {
		if q.fixSaid[fix] {
			fix = "" // said already in this spell of failures
		} else {
			if q.fixSaid == nil {
				q.fixSaid = make(map[string]bool)
			}
			q.fixSaid[fix] = true
		}
	}
	if q.down {
		// Said when it began; said again only for a new thing to fix (a
		// server that was down and now refuses the login), once.
		if fix != "" {
			q.notice("still failing, now: %v; retrying", err)
		}
		return
	}
	q.down = true
	q.downSince = time.Now()
	q.up.Store(false)
	q.mu.Lock()
	q.room.Broadcast() // Records waits no more (Wait): it spools or drops
	q.mu.Unlock()
	if q.spool != nil {
		q.notice("unreachable: %v; retrying, batches wait in the spool %s (up to %d bytes)", err, q.cfg.Spool.dir, q.cfg.Spool.max)
	} else {
		q.notice("unreachable: %v; retrying, up to %d records wait in memory, then the newest are dropped and counted (export_dropped %s)",
			err, q.cfg.MaxQueued, DropQueueFull)
	}
}

// backoff returns the wait before attempt n+1 after n failures in a row:
// min doubled n-1 times, at most max, less a random part of up to half of
// it ("equal jitter"), so that destinations that failed together do not
// retry together, and the wait stays within [d/2, d].
func backoff(min, max time.Duration, n int, rng *rand.Rand) time.Duration {
	d := max
	if n <= 0 {
		n = 1
	}
	if shift := n - 1; shift < 62 && min<<shift > 0 && min<<shift < max {
		d = min << shift
	}
	half := d / 2
	return d - half + time.Duration(rng.Int64N(int64(half)+1))
}

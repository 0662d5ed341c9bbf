package export

import (
	"fmt"
	"time"

	"github.com/flowdedup/flowdedup/export/internal/hugepage"
)

// Close stops the Queue: it goes on delivering what is queued, memory and
// spool, for up to DrainTimeout, then closes the record.Destination. When the destination
// is failing and a spool can hold the rest, it does not wait: what is left
// goes to the spool at once, for the next run. What neither the
// destination nor the spool took is counted as shutdown. A record.Destination call that
// does not return by the deadline is abandoned (its goroutine stays until
// it returns; the record.Destination is then not closed). Close returns nil, or
// ErrQueueClosed when called again: losses are counted, not errors.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		return ErrQueueClosed
	}
	q.closing = true
	q.seal()
	q.mu.Unlock()
	close(q.closeCh)
	<-q.done
	// The batch buffers go back to package hugepage, unless a call stuck
	// in the record.Destination may still read one (it stays mapped).
	if !q.busy {
		q.mu.Lock()
		for i, b := range q.bufs {
			hugepage.Free(b)
			q.bufs[i] = nil
		}
		q.bufs, q.free = nil, nil
		q.mu.Unlock()
	}
	return nil
}

// finishing runs once Close began: it reports whether the Queue is done,
// closing the record.Destination and counting what is left when it is.
func (q *Queue) finishing(now time.Time) bool {
	q.mu.Lock()
	empty := q.readyHead == len(q.ready) && q.fill == nil
	q.mu.Unlock()
	spooled := q.spool != nil && len(q.spool.entries) > 0
	switch {
	case q.busy && now.Before(q.deadline):
		return false // a call is on its way
	case q.busy:
		// The call is stuck past the deadline: give up on the record.Destination.
		q.abandon("a call to it had not returned when the drain time (%s) ran out", true)
		return true
	case empty && q.inflight == nil && !spooled:
		q.closeDestination()
		return true
	case q.down && q.spool != nil && empty && (q.inflight == nil || q.inflight.onDisk):
		// Failing, and everything is on disk: no need to wait.
		q.closeDestination()
		q.notice("%d records and %d window summaries stay in the spool %s for the next run", q.spool.records, q.spool.windows, q.cfg.Spool.dir)
		return true
	case !now.Before(q.deadline):
		q.abandon("the drain time (%s) ran out", false)
		q.closeDestination()
		return true
	}
	return false
}

// abandon counts what is still in memory as lost, after a last attempt to
// spool it.
func (q *Queue) abandon(why string, stuck bool) {
	lost := 0
	// The item in flight goes first, as the oldest file. A stuck call may
	// still deliver it: it goes as attempted, so that the next run sends it
	// with record.Batch.Retry set. Its memory stays with the stuck call.
	if q.inflight != nil && !q.inflight.onDisk {
		if q.spool == nil || !q.spillItem(q.inflight, true, q.inflight.attempted || stuck) {
			lost += q.weight(q.inflight)
		}
	}
	q.mu.Lock()
	var left []*item
	for q.readyHead < len(q.ready) {
		left = append(left, q.popReady())
	}
	q.mu.Unlock()
	// Then the rest, in order, each that fits: a file that does not (a
	// large batch on a nearly full disk) does not keep the smaller ones
	// after it, such as window summaries, out of the spool; what stays in
	// memory is lost now.
	for _, it := range left {
		if q.spool == nil || !q.spillItem(it, false, false) {
			lost += q.weight(it)
		}
		q.release(it)
	}
	q.mu.Lock()
	q.queued = 0
	q.queuedNow.Store(0)
	q.mu.Unlock()
	q.drop(reasonShutdown, lost)
	msg := fmt.Sprintf(why, q.cfg.DrainTimeout)
	if lost > 0 {
		msg += fmt.Sprintf("; %d records and summaries were not delivered (export_dropped %s)", lost, DropShutdown)
	}
	if q.spool != nil && len(q.spool.entries) > 0 {
		msg += fmt.Sprintf("; %d records and %d window summaries stay in the spool %s for the next run", q.spool.records, q.spool.windows, q.cfg.Spool.dir)
	}
	q.notice("%s", msg)
	q.inflight = nil
}

// closeDestination closes the record.Destination, waiting for it until the drain deadline (and
// at least a second, so that a record.Destination whose data are all delivered closes
// cleanly even when draining took the whole time).
func (q *Queue) closeDestination() {
	q.busy = true
	q.call = call{op: opClose}
	q.calls <- &q.call
	wait := time.NewTimer(max(time.Until(q.deadline), time.Second))
	defer wait.Stop()
	select {
	case c := <-q.results:
		q.busy = false
		if c.err != nil {
			q.notice("close: %v", c.err)
		}
	case <-wait.C:
		q.notice("close did not return in time; abandoned")
	}
}

func (q *Queue) fullReason() int {
	if q.spool != nil && q.spoolIsFull.Load() {
		return reasonSpoolFull
	}
	return reasonQueueFull
}

func (q *Queue) drop(reason, n int) {
	if n > 0 {
		q.dropped[reason].Add(uint64(n))
	}
}

// TakeDropped adds what the Queue dropped since the last call, by reason,
// to m[q.dest], creating the maps as needed. Reporter goroutine only.
func (q *Queue) TakeDropped(m *map[string]map[string]uint64) {
	for i := range q.dropped {
		n := q.dropped[i].Load()
		if d := n - q.reported[i]; d > 0 {
			if *m == nil {
				*m = make(map[string]map[string]uint64)
			}
			if (*m)[q.dest] == nil {
				(*m)[q.dest] = make(map[string]uint64)
			}
			(*m)[q.dest][DropReasons[i]] += d
			q.reported[i] = n
		}
	}
}

package export

import "errors"

// spill moves batches from memory to the spool, oldest first: all of them
// while the destination fails (the one in flight first, as the oldest
// file), or while memory is more than half full. It stops at the first
// write that fails, so that what is sent from the spool and from memory
// stays in order (Close's abandon goes on past it).
func (q *Queue) spill() {
	if q.down && !q.busy && q.inflight != nil && !q.inflight.onDisk {
		if !q.spillItem(q.inflight, true, q.inflight.attempted) {
			return
		}
	}
	for {
		q.mu.Lock()
		var it *item
		if q.readyHead < len(q.ready) && (q.down || q.queued > q.cfg.MaxQueued/2) {
			it = q.ready[q.readyHead] // only the manager takes from the head
		}
		q.mu.Unlock()
		if it == nil || !q.spillItem(it, false, false) {
			return
		}
		q.mu.Lock()
		q.popReady()
		q.mu.Unlock()
		q.release(it)
	}
}

// spillItem writes it to the spool, as its newest file or, when head is
// set, its oldest, and reports whether it did.
func (q *Queue) spillItem(it *item, head, attempted bool) bool {
	var err error
	if it.sum != nil {
		err = q.spool.put(nil, it.sum, attempted, head)
	} else {
		err = q.spool.put(&it.batch, nil, attempted, head)
	}
	if err != nil {
		if errors.Is(err, ErrSpoolFull) {
			q.spoolIsFull.Store(true)
			if !q.fullSaid {
				q.fullSaid = true
				q.notice("%v; batches stay in memory, and when it is full too the newest records are dropped and counted (export_dropped %s)", err, DropSpoolFull)
			}
		} else {
			q.noticeSpoolError(err)
		}
		return false
	}
	q.spoolIsFull.Store(false)
	q.fullSaid = false
	q.spoolErr = false
	if head {
		it.onDisk, it.marked = true, attempted
	}
	q.spoolGauges()
	return true
}

func (q *Queue) noticeSpoolError(err error) {
	if !q.spoolErr {
		q.spoolErr = true
		q.notice("spool: %v; batches stay in memory", err)
	}
}

func (q *Queue) spoolGauges() {
	q.spooledNow.Store(int64(q.spool.records))
	q.spooledWins.Store(int64(q.spool.windows))
}

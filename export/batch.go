package export

import (
	"slices"
	"time"

	"github.com/flowdedup/flowdedup/export/internal/hugepage"
	"github.com/flowdedup/flowdedup/record"
)

// Records copies the records of b into the Queue and returns at once; it
// never fails while the Queue is open. Records that do not fit in memory
// are dropped and counted (queue_full, or spool_full when a spool is
// full too), or, with QueueConfig.Wait and the destination up, waited
// for room. b.ID and b.Retry are not used: the Queue makes its own
// batches. b.Observer and b.Domain (QueueConfig.Domain when b has none)
// go with the records into the Queue's batches, and through the spool:
// records of another observer or domain than the batch being filled
// begin a new batch.
func (q *Queue) Records(b *record.Batch) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing {
		return ErrQueueClosed
	}
	dom := b.Domain
	if !dom.Valid {
		dom = q.cfg.Domain
	}
	q.put(b.Records, b.Observer, dom)
	return nil
}

// put copies recs, of the observer obs and the domain dom, into the
// batches being filled, as many as MaxQueued leaves room for; q.mu is
// held.
func (q *Queue) put(recs []record.Record, obs string, dom record.Domain) {
	if q.fill != nil && len(recs) > 0 && (obs != q.fillObs || dom != q.fillDom) {
		q.seal()
	}
	for len(recs) > 0 {
		room := q.cfg.MaxQueued - q.queued
		for room == 0 && q.cfg.Wait && q.up.Load() {
			q.room.Wait()
			room = q.cfg.MaxQueued - q.queued
		}
		if room == 0 {
			q.drop(q.fullReason(), len(recs))
			break
		}
		if q.fill == nil {
			q.fillObs, q.fillDom = obs, dom
			q.fill = q.getBuf()
			q.fillSince = time.Now()
			q.signal() // the manager arms the age timer
		}
		n := copy(q.fill[len(q.fill):len(q.fill)+min(cap(q.fill)-len(q.fill), room)], recs)
		q.fill = q.fill[:len(q.fill)+n]
		recs = recs[n:]
		q.queued += n
		if len(q.fill) == cap(q.fill) {
			q.seal()
		}
	}
	q.queuedNow.Store(int64(q.queued))
}

// getBuf returns an empty record buffer of BatchSize; q.mu is held. The
// buffers in use are those of full batches and the one being filled, so
// there are at most MaxQueued/BatchSize+1 of them. They are off the heap
// when large enough (package hugepage), and given back when the Queue is
// closed (Close).
func (q *Queue) getBuf() []record.Record {
	if n := len(q.free); n > 0 {
		b := q.free[n-1]
		q.free = q.free[:n-1]
		return b
	}
	b := hugepage.Alloc[record.Record](q.cfg.BatchSize)[:0:q.cfg.BatchSize]
	q.bufs = append(q.bufs, b)
	return b
}

// seal ends the batch being filled: it gets its ID and waits for the
// manager; q.mu is held. A batch that is not full (sealed for its age or
// another observer) is copied into a slice of its size, and its buffer
// goes back to the free list: a queue of many small batches holds their
// records, not a BatchSize buffer each. Not when the Queue is closing:
// no batch follows that one, and the copy would only touch more memory.
func (q *Queue) seal() {
	if q.fill == nil {
		return
	}
	it := q.newItem()
	recs, pooled := q.fill, true
	if len(recs) < cap(recs) && !q.closing {
		recs, pooled = slices.Clone(recs), false
		q.free = append(q.free, q.fill[:0])
	}
	it.batch = record.Batch{ID: q.base + q.seq, Records: recs, Observer: q.fillObs, Domain: q.fillDom}
	it.pooled, it.counted = pooled, true
	q.seq++
	q.fill = nil
	q.pushReady(it)
	for i, s := range q.after {
		q.pushReady(s)
		q.after[i] = nil
	}
	q.after = q.after[:0]
	q.signal()
}

// pushReady appends it to the items waiting; q.mu is held. The slots
// already taken from the head are reused before the slice grows, so that a
// destination that always has a backlog does not grow it for ever.
func (q *Queue) pushReady(it *item) {
	if q.readyHead > 0 && len(q.ready) == cap(q.ready) {
		n := copy(q.ready, q.ready[q.readyHead:])
		clear(q.ready[n:])
		q.ready, q.readyHead = q.ready[:n], 0
	}
	q.ready = append(q.ready, it)
}

func (q *Queue) newItem() *item {
	if n := len(q.freeItems); n > 0 {
		it := q.freeItems[n-1]
		q.freeItems = q.freeItems[:n-1]
		return it
	}
	return new(item)
}

func (q *Queue) signal() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// Window copies the summary s into the Queue, after the records given
// before it, and returns at once. It does not cut the batch being filled
// short: the summary follows that batch when it is sealed (full, or
// BatchAge old), after records of the next windows that batch may hold
// too. Sealing a batch at every window would hold a whole buffer of
// BatchSize records for each window's tail, so that a replay, which
// closes windows many times a second, filled the memory bound with
// nearly empty batches and dropped records (queue_full) to a destination
// that was keeping up.
func (q *Queue) Window(s *record.Summary) error {
	c := cloneSummary(s)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing {
		return ErrQueueClosed
	}
	if q.windows >= maxQueuedWindows {
		if q.summaries {
			q.drop(q.fullReason(), 1)
		}
		return nil
	}
	it := q.newItem()
	it.sum = c
	q.windows++
	if q.fill != nil {
		q.after = append(q.after, it)
		return nil
	}
	q.pushReady(it)
	q.signal()
	return nil
}

func cloneSummary(s *record.Summary) *record.Summary {
	c := *s
	c.MalformedBy = cloneMap(s.MalformedBy)
	c.SkippedBy = cloneMap(s.SkippedBy)
	c.DroppedBy = cloneMap(s.DroppedBy)
	c.LateBy = cloneMap(s.LateBy)
	if s.Sketch != nil {
		c.Sketch = append([]byte(nil), s.Sketch...)
	}
	if s.ExportDropped != nil {
		c.ExportDropped = make(map[string]map[string]uint64, len(s.ExportDropped))
		for d, m := range s.ExportDropped {
			c.ExportDropped[d] = cloneMap(m)
		}
	}
	return &c
}

func cloneMap(m map[string]uint64) map[string]uint64 {
	if m == nil {
		return nil
	}
	c := make(map[string]uint64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Flush does nothing: a batch goes out when it is full or BatchAge old, so
// that the pipeline's idle moments do not cut a trickle of records into
// tiny batches.
func (q *Queue) Flush() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing {
		return ErrQueueClosed
	}
	return nil
}

// sealAged seals the batch being filled once it is BatchAge old.
func (q *Queue) sealAged(now time.Time) {
	q.mu.Lock()
	if q.fill != nil && !now.Before(q.fillSince.Add(q.cfg.BatchAge)) {
		q.seal()
	}
	q.mu.Unlock()
}

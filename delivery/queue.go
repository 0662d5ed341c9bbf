package delivery

import (
	"errors"
	"fmt"
	"github.com/flowdedup/flowdedup/report"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowdedup/flowdedup/pipeline"
)

// Defaults of QueueConfig's zero fields.
const (
	// DefaultBatchSize: records per batch. A batch is what a destination
	// takes in one call and what is retried and spooled as one; 1024
	// records fill about 15 IPFIX messages on a 1500-byte path and make a
	// 70 KiB spool file. Destinations that want larger writes (ClickHouse
	// asks for inserts of 1000 rows and more, at most about one per second)
	// set their own.
	DefaultBatchSize = 1024
	// DefaultBatchAge: a batch that is not full goes out this long after
	// its first record, so that a trickle of records reaches the
	// destination within a second.
	DefaultBatchAge = time.Second
	// DefaultMaxQueued: records held in memory per destination, about
	// 18 MiB (a pipeline.Record is 72 bytes): at 100000 distinct flows a
	// second, 2.6 s of a destination that stalls, without a spool, before
	// records are dropped (queue_full).
	DefaultMaxQueued = 1 << 18
	// DefaultDrainTimeout: how long Close goes on delivering what is
	// queued (--export-drain).
	DefaultDrainTimeout = 10 * time.Second
	// DefaultRetryMin and DefaultRetryMax bound the wait between two
	// attempts at a failing destination: it doubles from RetryMin at each
	// failure up to RetryMax, with jitter (see backoff).
	DefaultRetryMin = 100 * time.Millisecond
	DefaultRetryMax = 30 * time.Second
	// maxQueuedWindows bounds the summaries held in memory: windows are
	// rare, so only a destination down for thousands of windows without a
	// spool reaches it.
	maxQueuedWindows = 4096
	// maxDestLen bounds a destination's name, which every spool file holds.
	maxDestLen = 1024
)

// Reasons a Queue counts what it could not deliver under (ExportDropped,
// flowdedup_export_dropped_total). Records and window summaries are counted
// alike: a summary counts 1.
const (
	// DropQueueFull: the destination's memory bound (MaxQueued) was
	// reached and there is no spool, or the spool could not take records
	// as fast as they came: the newest records were dropped. With
	// QueueConfig.Wait, only while the destination fails.
	DropQueueFull = "queue_full"
	// DropSpoolFull: memory and the spool (--spool-max) were both full:
	// the newest records were dropped.
	DropSpoolFull = "spool_full"
	// DropRejected: the destination refused them for good (report.ErrRejected).
	DropRejected = "rejected"
	// DropShutdown: still undelivered when Close's drain time ran out,
	// without a spool to keep them (or with a full one).
	DropShutdown = "shutdown"
	// DropSpoolCorrupt: spool files that could not be read back, moved
	// aside; each counts 1, whatever it held.
	DropSpoolCorrupt = "spool_corrupt"
)

// DropReasons lists the reasons, in the order of the reason indexes.
var DropReasons = []string{DropQueueFull, DropSpoolFull, DropRejected, DropShutdown, DropSpoolCorrupt}

const (
	reasonQueueFull = iota
	reasonSpoolFull
	reasonRejected
	reasonShutdown
	reasonSpoolCorrupt
	numReasons
)

// ErrQueueClosed is returned by a Queue's methods after Close.
var ErrQueueClosed = errors.New("delivery: export queue closed")

// QueueConfig says how a Queue batches, holds and retries. Zero fields take
// the defaults above.
type QueueConfig struct {
	// BatchSize is the most records in a batch.
	BatchSize int
	// BatchAge is how long after its first record a batch that is not
	// full goes out.
	BatchAge time.Duration
	// MaxQueued bounds the records in memory (filling, waiting and being
	// sent), rounded up to whole batches, at least two.
	MaxQueued int
	// Spool, when not nil, keeps batches on disk while the destination
	// fails, across restarts (--spool).
	Spool *Spool
	// report.Domain is the observation domain of the run (--observation-domain)
	// that the Queue gives the records of a batch without one
	// (report.Batch.Domain), so that they keep it through the spool into a later
	// run. The zero report.Domain leaves such batches without one.
	Domain report.Domain
	// DrainTimeout bounds how long Close tries to deliver what is queued.
	DrainTimeout time.Duration
	// RetryMin and RetryMax bound the backoff between attempts.
	RetryMin, RetryMax time.Duration
	// Wait makes Records wait for room, rather than drop the records, when
	// memory is full while the destination is up (its last attempt
	// succeeded): the caller then goes at the destination's pace. It suits
	// replay, which loses nothing by waiting; live capture leaves it off,
	// since a capture that waits drops packets instead. While the
	// destination fails, Records never waits: what does not fit goes to
	// the spool or is dropped as without Wait, so that a dead destination
	// cannot stop the caller.
	Wait bool
	// Notices receives one line when the destination becomes unreachable,
	// one when it is back, and one for each other event an operator must
	// know of (the first rejection, a full spool, a corrupt spool file,
	// what Close left). nil says nothing. Lines of all Queues are written
	// one at a time.
	Notices io.Writer
}

// A Queue takes batches and window summaries for one export destination
// and delivers them to its report.Destination from goroutines of its own, so that a slow
// or dead destination never slows the caller: Records and Window copy
// what they are given into memory bounded by MaxQueued and return at once.
// Records are gathered into batches of BatchSize, each given to the
// destination when it is full or BatchAge old, followed by a Flush; a
// summary goes after the records before it. Batches carry IDs, a random
// base per Queue plus a sequence, and the observer and observation domain
// of their records (report.Batch.Observer, report.Batch.Domain), which stay the same on
// every retry and through the spool, into a later run.
//
// A transient error is retried, after a backoff from RetryMin doubling to
// RetryMax, with report.Batch.Retry set; a batch the destination rejects
// (report.ErrRejected) is dropped and counted. While the destination fails, and
// whenever memory is half full, batches go to the Spool, if there is one,
// oldest first, and come back from it in order. What cannot be held is
// dropped, newest first, and counted by reason (see DropReasons).
//
// A Queue is a report.Destination: Records, Window and Flush may be called from one
// goroutine (the Reporter's), Stats from any. Close drains and stops it.
type Queue struct {
	dest string
	sink report.Destination
	cfg  QueueConfig
	base uint64

	mu          sync.Mutex
	room        sync.Cond         // on mu: a buffer was freed, or the destination failed (Wait)
	fill        []pipeline.Record // the batch being filled, nil when none
	fillSince   time.Time
	fillObs     string        // the observer of fill's records (report.Batch.Observer)
	fillDom     report.Domain // the observation domain of fill's records (report.Batch.Domain)
	after       []*item       // summaries given while fill was being filled: they follow its batch
	ready       []*item       // sealed, oldest first (ready[readyHead:])
	readyHead   int
	free        [][]pipeline.Record
	freeItems   []*item
	bufs        int // record buffers made
	maxBufs     int
	queued      int // records in memory: fill, ready and in flight
	windows     int // summaries in ready
	seq         uint64
	closing     bool
	spoolIsFull atomic.Bool // the last spool write found it full

	kick    chan struct{} // the manager has something new to look at
	closeCh chan struct{}
	done    chan struct{}
	calls   chan *call
	results chan *call
	call    call // the one call on its way (at most one is)

	// Manager goroutine state.
	spool      *destSpool
	spoolBuf   []pipeline.Record // records of a batch read back from the spool
	inflight   *item
	busy       bool // a call is with the caller goroutine
	down       bool
	downSince  time.Time
	lastErr    error
	attempts   int
	retryAt    time.Time
	deadline   time.Time // Close's, once closing
	rejectSaid bool
	fullSaid   bool
	spoolErr   bool // a spool write failed (not for room): said once
	rng        *rand.Rand

	// Counters, read by Stats from any goroutine.
	dropped     [numReasons]atomic.Uint64
	sent        atomic.Uint64
	sentWindows atomic.Uint64
	queuedNow   atomic.Int64
	spooledNow  atomic.Int64
	spooledWins atomic.Int64
	up          atomic.Bool

	// reported: dropped counts already given in a summary (Reporter
	// goroutine).
	reported [numReasons]uint64
}

var _ report.Destination = (*Queue)(nil)

// item is a batch or a summary on its way.
type item struct {
	batch     report.Batch
	sum       *report.Summary // a summary, when not nil
	pooled    bool            // batch.Records is a buffer of the pool
	onDisk    bool            // it is the oldest file of the spool
	flushing  bool            // Records (Window) succeeded; Flush is due
	attempted bool            // given before with an unknown outcome
}

func (it *item) weight() int {
	if it.sum != nil {
		return 1
	}
	return len(it.batch.Records)
}

// call is one call of the report.Destination, made by the caller goroutine.
type call struct {
	op  uint8
	it  *item
	err error
}

const (
	opRecords = iota
	opWindow
	opFlush
	opClose
)

// noticeMu makes each notice line one write, whatever writer the Queues
// share.
var noticeMu sync.Mutex

// NewQueue returns a Queue delivering to sink, which it owns from now on
// (it calls Close on it), under the name dest: the destination's URL
// without credentials, as summaries and metrics show it. With a spool, it
// first sends what an earlier run left there for dest.
func NewQueue(dest string, sink report.Destination, cfg QueueConfig) (*Queue, error) {
	if dest == "" || len(dest) > maxDestLen {
		return nil, fmt.Errorf("delivery: export queue: destination name of %d bytes, want 1 to %d", len(dest), maxDestLen)
	}
	if cfg.BatchSize < 0 || cfg.BatchAge < 0 || cfg.MaxQueued < 0 || cfg.DrainTimeout < 0 || cfg.RetryMin < 0 || cfg.RetryMax < 0 {
		return nil, fmt.Errorf("delivery: export queue %s: negative size or time in %+v", dest, cfg)
	}
	if cfg.BatchSize > maxSpoolRecords {
		return nil, fmt.Errorf("delivery: export queue %s: batch size %d, want at most %d", dest, cfg.BatchSize, maxSpoolRecords)
	}
	cfg.BatchSize = orDefault(cfg.BatchSize, DefaultBatchSize)
	cfg.BatchAge = orDefault(cfg.BatchAge, DefaultBatchAge)
	cfg.MaxQueued = orDefault(cfg.MaxQueued, DefaultMaxQueued)
	cfg.DrainTimeout = orDefault(cfg.DrainTimeout, DefaultDrainTimeout)
	cfg.RetryMin = orDefault(cfg.RetryMin, DefaultRetryMin)
	cfg.RetryMax = max(orDefault(cfg.RetryMax, DefaultRetryMax), cfg.RetryMin)
	q := &Queue{
		dest:    dest,
		sink:    sink,
		cfg:     cfg,
		base:    rand.Uint64(),
		maxBufs: max(2, (cfg.MaxQueued+cfg.BatchSize-1)/cfg.BatchSize),
		kick:    make(chan struct{}, 1),
		closeCh: make(chan struct{}),
		done:    make(chan struct{}),
		calls:   make(chan *call, 1),
		results: make(chan *call, 1),
		rng:     rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
	q.room.L = &q.mu
	q.up.Store(true)
	if cfg.Spool != nil {
		var err error
		if q.spool, err = cfg.Spool.claim(dest); err != nil {
			return nil, err
		}
		q.spoolGauges()
		if n := len(q.spool.entries); n > 0 {
			q.notice("%d records and %d window summaries left in the spool %s by an earlier run; sending them first",
				q.spool.records, q.spool.windows, cfg.Spool.dir)
		}
	}
	go q.caller()
	go q.manage()
	return q, nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Dest returns the destination's name.
func (q *Queue) Dest() string { return q.dest }

// Stats returns the Queue's counts. Safe from any goroutine.
func (q *Queue) Stats() report.ExportStats {
	st := report.ExportStats{
		Dest:        q.dest,
		Sent:        q.sent.Load(),
		SentWindows: q.sentWindows.Load(),
		Queued:      int(q.queuedNow.Load()),
		Spooled:     int(q.spooledNow.Load()),
		SpooledWins: int(q.spooledWins.Load()),
		Up:          q.up.Load(),
		Dropped:     make(map[string]uint64, numReasons),
	}
	for i := range q.dropped {
		st.Dropped[DropReasons[i]] = q.dropped[i].Load()
	}
	return st
}

// Records copies the records of b into the Queue and returns at once; it
// never fails while the Queue is open. Records that do not fit in memory
// are dropped and counted (queue_full, or spool_full when a spool is
// full too), or, with QueueConfig.Wait and the destination up, waited
// for room. b.ID and b.Retry are not used: the Queue makes its own
// batches. b.Observer and b.Domain (QueueConfig.Domain when b has none)
// go with the records into the Queue's batches, and through the spool:
// records of another observer or domain than the batch being filled
// begin a new batch.
func (q *Queue) Records(b *report.Batch) error {
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
// batches being filled; q.mu is held.
func (q *Queue) put(recs []pipeline.Record, obs string, dom report.Domain) {
	if q.fill != nil && len(recs) > 0 && (obs != q.fillObs || dom != q.fillDom) {
		q.seal()
	}
	for len(recs) > 0 {
		if q.fill == nil {
			q.fillObs, q.fillDom = obs, dom
			q.fill = q.getBuf()
			for q.fill == nil && q.cfg.Wait && q.up.Load() {
				q.room.Wait()
				q.fill = q.getBuf()
			}
			if q.fill == nil {
				q.drop(q.fullReason(), len(recs))
				break
			}
			q.fillSince = time.Now()
			q.signal() // the manager arms the age timer
		}
		n := copy(q.fill[len(q.fill):cap(q.fill)], recs)
		q.fill = q.fill[:len(q.fill)+n]
		recs = recs[n:]
		q.queued += n
		if len(q.fill) == cap(q.fill) {
			q.seal()
		}
	}
	q.queuedNow.Store(int64(q.queued))
}

// getBuf returns an empty record buffer of BatchSize, or nil when memory
// is full; q.mu is held.
func (q *Queue) getBuf() []pipeline.Record {
	if n := len(q.free); n > 0 {
		b := q.free[n-1]
		q.free = q.free[:n-1]
		return b
	}
	if q.bufs == q.maxBufs {
		return nil
	}
	q.bufs++
	return make([]pipeline.Record, 0, q.cfg.BatchSize)
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

// seal ends the batch being filled: it gets its ID and waits for the
// manager; q.mu is held.
func (q *Queue) seal() {
	if q.fill == nil {
		return
	}
	it := q.newItem()
	it.batch = report.Batch{ID: q.base + q.seq, Records: q.fill, Observer: q.fillObs, Domain: q.fillDom}
	it.pooled = true
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
func (q *Queue) Window(s *report.Summary) error {
	c := cloneSummary(s)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing {
		return ErrQueueClosed
	}
	if q.windows >= maxQueuedWindows {
		q.drop(q.fullReason(), 1)
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

func cloneSummary(s *report.Summary) *report.Summary {
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

// Close stops the Queue: it goes on delivering what is queued, memory and
// spool, for up to DrainTimeout, then closes the report.Destination. When the destination
// is failing and a spool can hold the rest, it does not wait: what is left
// goes to the spool at once, for the next run. What neither the
// destination nor the spool took is counted as shutdown. A report.Destination call that
// does not return by the deadline is abandoned (its goroutine stays until
// it returns; the report.Destination is then not closed). Close returns nil, or
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
	return nil
}

// caller makes the report.Destination calls the manager asks for, one at a time, so that
// the manager stays free to take new batches and spool while a call
// blocks.
func (q *Queue) caller() {
	for c := range q.calls {
		switch c.op {
		case opRecords:
			c.err = q.sink.Records(&c.it.batch)
		case opWindow:
			c.err = q.sink.Window(c.it.sum)
		case opFlush:
			c.err = q.sink.Flush()
		case opClose:
			c.err = q.sink.Close()
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
			q.spill(false)
		}
		if !q.busy && !now.Before(q.retryAt) {
			q.retryAt = time.Time{}
			if q.inflight == nil {
				q.inflight = q.next()
			}
			if q.inflight != nil {
				q.start(q.inflight)
			}
		}
		if !q.deadline.IsZero() && q.finishing(now) {
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

// sealAged seals the batch being filled once it is BatchAge old.
func (q *Queue) sealAged(now time.Time) {
	q.mu.Lock()
	if q.fill != nil && !now.Before(q.fillSince.Add(q.cfg.BatchAge)) {
		q.seal()
	}
	q.mu.Unlock()
}

// next returns the oldest item not yet delivered: from the spool, which
// holds only items older than those in memory, then from memory.
func (q *Queue) next() *item {
	for q.spool != nil && len(q.spool.entries) > 0 {
		var f spoolFile
		err := q.spool.load(q.spoolBuf, &f)
		if err == nil {
			it := q.newItemLocked()
			it.onDisk, it.attempted = true, f.attempted
			if f.summary {
				s := f.sum
				it.sum = &s
			} else {
				q.spoolBuf = f.records[:0]
				it.batch = report.Batch{ID: f.id, Records: f.records, Retry: f.attempted, Observer: f.observer, Domain: f.domain}
			}
			return it
		}
		if !errors.Is(err, ErrSpoolCorrupt) {
			// The disk failed us, not the file: try again later.
			q.noticeSpoolError(err)
			q.retryAt = time.Now().Add(q.cfg.RetryMax)
			return nil
		}
		to, merr := q.spool.moveAside()
		q.drop(reasonSpoolCorrupt, 1)
		q.spoolGauges()
		if merr != nil {
			q.notice("spool file could not be read (%v) nor moved aside: %v", err, merr)
		} else {
			q.notice("spool file could not be read (%v); moved to %s (counted as %s)", err, to, DropSpoolCorrupt)
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
			q.sentWindows.Add(1)
		} else {
			q.sent.Add(uint64(len(it.batch.Records)))
		}
		q.finish(it)
	case errors.Is(c.err, report.ErrRejected):
		q.markUp() // it answered
		q.drop(reasonRejected, it.weight())
		if !q.rejectSaid {
			q.rejectSaid = true
			q.notice("rejected %s: %v; what it rejects is dropped and counted (export_dropped %s)", what(it), c.err, DropRejected)
		}
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
	if it.pooled {
		q.queued -= len(it.batch.Records)
		q.queuedNow.Store(int64(q.queued))
		q.free = append(q.free, it.batch.Records[:0])
		q.room.Broadcast()
	}
	*it = item{}
	q.freeItems = append(q.freeItems, it)
	q.mu.Unlock()
}

func (q *Queue) markUp() {
	q.attempts = 0
	q.retryAt = time.Time{}
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
	if q.down {
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
			err, q.maxBufs*q.cfg.BatchSize, DropQueueFull)
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

// spill moves batches from memory to the spool, oldest first: all of them
// while the destination fails (the one in flight first, as the oldest
// file) or when all is set, or while memory is more than half full. It stops at the first
// write that fails.
func (q *Queue) spill(all bool) {
	if q.down && !q.busy && q.inflight != nil && !q.inflight.onDisk {
		if !q.spillItem(q.inflight, true, q.inflight.attempted) {
			return
		}
	}
	for {
		q.mu.Lock()
		var it *item
		if q.readyHead < len(q.ready) && (all || q.down || q.queued > q.maxBufs*q.cfg.BatchSize/2) {
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
		it.onDisk = true
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

// finishing runs once Close began: it reports whether the Queue is done,
// closing the report.Destination and counting what is left when it is.
func (q *Queue) finishing(now time.Time) bool {
	q.mu.Lock()
	empty := q.readyHead == len(q.ready) && q.fill == nil
	q.mu.Unlock()
	spooled := q.spool != nil && len(q.spool.entries) > 0
	switch {
	case q.busy && now.Before(q.deadline):
		return false // a call is on its way
	case q.busy:
		// The call is stuck past the deadline: give up on the report.Destination.
		q.abandon("a call to it had not returned when the drain time (%s) ran out", true)
		return true
	case empty && q.inflight == nil && !spooled:
		q.closeSink()
		return true
	case q.down && q.spool != nil && empty && (q.inflight == nil || q.inflight.onDisk):
		// Failing, and everything is on disk: no need to wait.
		q.closeSink()
		q.notice("%d records and %d window summaries stay in the spool %s for the next run", q.spool.records, q.spool.windows, q.cfg.Spool.dir)
		return true
	case !now.Before(q.deadline):
		q.abandon("the drain time (%s) ran out", false)
		q.closeSink()
		return true
	}
	return false
}

// abandon counts what is still in memory as lost, after a last attempt to
// spool it.
func (q *Queue) abandon(why string, stuck bool) {
	if q.spool != nil {
		// What fits goes to disk, the item in flight first. A stuck call
		// may still deliver it: it goes as attempted, so that the next run
		// sends it with report.Batch.Retry set.
		if q.inflight != nil && !q.inflight.onDisk {
			q.spillItem(q.inflight, true, q.inflight.attempted || stuck)
		}
		q.spill(true)
	}
	lost := 0
	if q.inflight != nil && !q.inflight.onDisk {
		lost += q.inflight.weight()
	}
	q.mu.Lock()
	for q.readyHead < len(q.ready) {
		lost += q.popReady().weight()
	}
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

// closeSink closes the report.Destination, waiting for it until the drain deadline (and
// at least a second, so that a report.Destination whose data are all delivered closes
// cleanly even when draining took the whole time).
func (q *Queue) closeSink() {
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

// notice writes one line about the destination to Notices.
func (q *Queue) notice(format string, args ...any) {
	if q.cfg.Notices == nil {
		return
	}
	line := "flowdedup: export " + q.dest + ": " + fmt.Sprintf(format, args...)
	line = strings.TrimRight(line, "\n") + "\n"
	noticeMu.Lock()
	io.WriteString(q.cfg.Notices, line)
	noticeMu.Unlock()
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

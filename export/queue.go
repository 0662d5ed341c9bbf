package export

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowdedup/flowdedup/record"
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
	// 18 MiB (a record.Record is 72 bytes): at 100000 distinct flows a
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
	// DropRejected: the destination refused them for good (record.ErrRejected).
	DropRejected = "rejected"
	// DropShutdown: still undelivered when Close's drain time ran out,
	// without a spool to keep them (or with a full one).
	DropShutdown = "shutdown"
	// DropSpoolCorrupt: spool files that could not be read back, moved
	// aside: the records of a batch as its header says (at most what its
	// size holds), 1 for a summary, and 1 for a file whose header cannot
	// be read (at least one was lost; the notice tells it apart).
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
var ErrQueueClosed = errors.New("export: export queue closed")

// QueueConfig says how a Queue batches, holds and retries. Zero fields take
// the defaults above.
type QueueConfig struct {
	// BatchSize is the most records in a batch.
	BatchSize int
	// BatchAge is how long after its first record a batch that is not
	// full goes out.
	BatchAge time.Duration
	// MaxQueued bounds the records in memory (filling, waiting and being
	// sent), whatever the batches they are in: at least BatchSize. A batch
	// sealed before it is full (BatchAge, another observer) holds a buffer
	// of its own size, so memory is about MaxQueued records of 72 bytes,
	// plus the buffer of the batch being filled.
	MaxQueued int
	// Spool, when not nil, keeps batches on disk while the destination
	// fails, across restarts (--spool).
	Spool *Spool
	// record.Domain is the observation domain of the run (--observation-domain)
	// that the Queue gives the records of a batch without one
	// (record.Batch.Domain), so that they keep it through the spool into a later
	// run. The zero record.Domain leaves such batches without one.
	Domain record.Domain
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
// and delivers them to its record.Destination from goroutines of its own, so that a slow
// or dead destination never slows the caller: Records and Window copy
// what they are given into memory bounded by MaxQueued and return at once.
// Records are gathered into batches of BatchSize, each given to the
// destination when it is full or BatchAge old, followed by a Flush; a
// summary goes after the records before it. Batches carry IDs, a random
// base per Queue plus a sequence, and the observer and observation domain
// of their records (record.Batch.Observer, record.Batch.Domain), which stay the same on
// every retry and through the spool, into a later run.
//
// A transient error is retried, after a backoff from RetryMin doubling to
// RetryMax, with record.Batch.Retry set; a batch the destination rejects
// (record.ErrRejected) is dropped and counted. While the destination fails, and
// whenever memory is half full, batches go to the Spool, if there is one,
// oldest first, and come back from it in order. What cannot be held is
// dropped, newest first, and counted by reason (see DropReasons).
//
// A Queue is a record.Destination: Records, Window and Flush may be called from one
// goroutine (the Reporter's), Stats from any. Close drains and stops it.
type Queue struct {
	dest        string
	destination record.Destination
	summaries   bool // the destination carries summaries (record.SummaryCarrier)
	cfg         QueueConfig
	base        uint64

	mu          sync.Mutex
	room        sync.Cond       // on mu: a buffer was freed, or the destination failed (Wait)
	fill        []record.Record // the batch being filled, nil when none
	fillSince   time.Time
	fillObs     string        // the observer of fill's records (record.Batch.Observer)
	fillDom     record.Domain // the observation domain of fill's records (record.Batch.Domain)
	after       []*item       // summaries given while fill was being filled: they follow its batch
	ready       []*item       // sealed, oldest first (ready[readyHead:])
	readyHead   int
	free        [][]record.Record // empty buffers of BatchSize
	bufs        [][]record.Record // every buffer getBuf made, for hugepage.Free at Close
	freeItems   []*item
	queued      int // records in memory: fill, ready and in flight; at most cfg.MaxQueued
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
	spoolBuf   []record.Record // records of a batch read back from the spool
	inflight   *item
	busy       bool // a call is with the caller goroutine
	down       bool
	downSince  time.Time
	lastErr    error
	attempts   int
	retryAt    time.Time
	deadline   time.Time // Close's, once closing
	rejectSaid bool
	// rejectLostSaid: a rejected batch could not be kept (the spool full);
	// rejectedKept counts those kept in this run.
	rejectLostSaid bool
	rejectedKept   int
	fixSaid        map[string]bool // the Fixes (record.FixOf) said since the destination began failing
	fullSaid       bool
	spoolErr       bool // a spool write failed (not for room): said once
	markErr        bool // a spool file could not be marked attempted (Queue.mark): said once
	rng            *rand.Rand

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

var _ record.Destination = (*Queue)(nil)

// item is a batch or a summary on its way.
type item struct {
	batch     record.Batch
	sum       *record.Summary // a summary, when not nil
	pooled    bool            // batch.Records is a buffer of BatchSize, for the free list when done
	counted   bool            // its records are in memory, counted in Queue.queued
	onDisk    bool            // it is the oldest file of the spool
	flushing  bool            // Records (Window) succeeded; Flush is due
	attempted bool            // given before with an unknown outcome
	marked    bool            // onDisk, and its file says attempted (Queue.mark)
}

// weight is what it counts for when it is lost: its records, or 1 for a
// summary the destination carries (0 for one it does not: IPFIX).
func (q *Queue) weight(it *item) int {
	if it.sum != nil {
		if !q.summaries {
			return 0
		}
		return 1
	}
	return len(it.batch.Records)
}

// call is one call of the record.Destination, made by the caller goroutine.
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

// NewQueue returns a Queue delivering to the Destination to, which it owns from now on
// (it calls Close on it), under the name dest: the destination's URL
// without credentials, as summaries and metrics show it. With a spool, it
// first sends what an earlier run left there for dest.
func NewQueue(dest string, to record.Destination, cfg QueueConfig) (*Queue, error) {
	if dest == "" || len(dest) > maxDestLen {
		return nil, fmt.Errorf("export: export queue: destination name of %d bytes, want 1 to %d", len(dest), maxDestLen)
	}
	if cfg.BatchSize < 0 || cfg.BatchAge < 0 || cfg.MaxQueued < 0 || cfg.DrainTimeout < 0 || cfg.RetryMin < 0 || cfg.RetryMax < 0 {
		return nil, fmt.Errorf("export: export queue %s: negative size or time in %+v", dest, cfg)
	}
	if cfg.BatchSize > maxSpoolRecords {
		return nil, fmt.Errorf("export: export queue %s: batch size %d, want at most %d", dest, cfg.BatchSize, maxSpoolRecords)
	}
	cfg.BatchSize = orDefault(cfg.BatchSize, DefaultBatchSize)
	cfg.BatchAge = orDefault(cfg.BatchAge, DefaultBatchAge)
	cfg.MaxQueued = max(orDefault(cfg.MaxQueued, DefaultMaxQueued), cfg.BatchSize)
	cfg.DrainTimeout = orDefault(cfg.DrainTimeout, DefaultDrainTimeout)
	cfg.RetryMin = orDefault(cfg.RetryMin, DefaultRetryMin)
	cfg.RetryMax = max(orDefault(cfg.RetryMax, DefaultRetryMax), cfg.RetryMin)
	q := &Queue{
		dest:        dest,
		destination: to,
		cfg:         cfg,
		base:        rand.Uint64(),
		kick:        make(chan struct{}, 1),
		closeCh:     make(chan struct{}),
		done:        make(chan struct{}),
		calls:       make(chan *call, 1),
		results:     make(chan *call, 1),
		rng:         rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
	q.room.L = &q.mu
	q.up.Store(true)
	q.summaries = true
	if c, ok := to.(record.SummaryCarrier); ok {
		q.summaries = c.CarriesSummaries()
	}
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
		if n, size := rejectedFiles(q.spool.rejectedDir()); n > 0 {
			q.notice("%d batches and summaries it rejected are kept in %s (%d bytes of the spool's bound): inspect them, then remove them",
				n, q.spool.rejectedDir(), size)
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
func (q *Queue) Stats() record.ExportStats {
	st := record.ExportStats{
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

package clickhouse

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowdedup/flowdedup/export/internal/hugepage"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// DefaultTimeout bounds each request to the server (connecting, sending,
// the server's work and its answer) when Config.Timeout is zero. An insert
// of a large batch on a busy server takes seconds; one that takes longer
// than this is given up and its outcome is unknown (see Destination.Records).
const DefaultTimeout = 30 * time.Second

// Config says where and how a Destination writes.
type Config struct {
	// Address is the HOST:PORT of the server's HTTP interface; Database
	// the database of the tables, created if missing. ParseURL fills both
	// from an --export URL.
	Address  string
	Database string
	// User and Password log in with HTTP basic authentication; an empty
	// User means the server's default user, without a password.
	User     string
	Password string
	// Observer names this observation point (--observer) in the flows
	// rows of a batch whose own Observer is empty, and in the windows row
	// of a summary whose own Observer is empty.
	Observer string
	// Kind is the key kind of every record (--key). A record of another
	// kind is rejected (record.ErrRejected).
	Kind flow.KeyKind
	// Prefix is the prefix lengths of keys by network (--prefix), whose
	// src and dst are CIDR text; the kind column then says both, as
	// summaries do (src/24,64). The zero Mask: hosts.
	Prefix flow.Mask
	// Timeout bounds each request; zero means DefaultTimeout.
	Timeout time.Duration
	// Compression is the Content-Encoding of insert bodies: "" for none,
	// or CompressionGzip (gzip at its fastest level, which ClickHouse
	// 18.16 and current releases decompress). It costs CPU to save bytes
	// on the wire: for a server across a slow link (see docs/export.md for
	// the figures).
	Compression string
}

// CompressionGzip is the Config.Compression that gzips insert bodies.
const CompressionGzip = "gzip"

// Stats counts what a Destination has done since New.
type Stats struct {
	Batches uint64 // batches whose every row is in flows: inserted, or found there on a retry
	Rows    uint64 // rows inserted into flows
	Windows uint64 // rows inserted into windows
	// SpreadRows counts the rows inserted into spread (a summary's
	// spread written again on a retry counts again).
	SpreadRows uint64
	// Checks counts the batches and summaries looked for in their table
	// before they were written again (see Destination.Records and Window).
	Checks uint64
	// RowsFound and WindowsFound count the rows those checks found in
	// the table already, which were not inserted again.
	RowsFound    uint64
	WindowsFound uint64
	Requests     uint64 // HTTP requests sent
	Failures     uint64 // requests that got no success: no answer, or an error answer
	// InsertBytes counts the bytes of insert bodies sent, compressed
	// when Config.Compression is set.
	InsertBytes uint64
}

// A Destination writes distinct-flow records and window summaries to the
// flows and windows tables of a ClickHouse database over its HTTP
// interface: it is the record.Destination of a clickhouse:// --export destination.
// The package documentation says how it fails; the repository's
// docs/export.md describes its tables and idempotent retries.
//
// A Destination is not safe for concurrent use (record.Destination's rule: one
// goroutine at a time). It starts no goroutines of its own.
type Destination struct {
	cfg           Config
	c             *client
	flows         flowRow
	insertFlows   string
	insertWindows string
	insertSpread  string

	// ready: the tables were found or created with the right columns.
	ready bool
	// buf holds the rows of the batch being written, ends[i] the end of
	// row i in it; retry the rows a retry still has to insert; rows is
	// scratch for the rows a retry finds. All reused across calls.
	buf   []byte
	ends  []int
	chunk []byte // rowStream's buffer, back from the last stream
	retry []byte
	rows  [][]byte
	wrow  []byte
	// unsure holds the IDs of batches whose last insert failed in a way
	// that may have left rows in the table, so that the next attempt
	// checks even without Batch.Retry.
	unsure map[uint64]struct{}

	stats  Stats
	closed bool
}

var _ record.Destination = (*Destination)(nil)

// maxUnsure bounds Destination.unsure: batches the caller gave up on are
// never given again, and their IDs must not pile up. Forgetting one only
// means relying on Batch.Retry for it.
const maxUnsure = 4096

// New returns a Destination writing to cfg's server. It sends nothing: the
// first Records or Window call creates what is missing, and a server that
// is down, or a name that does not resolve yet, is reported by those calls
// as a transient error. Only a malformed Config is an error (ErrConfig).
func New(cfg Config) (*Destination, error) {
	if err := record.CheckAddress(cfg.Address); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if err := checkDatabase(cfg.Database); err != nil || cfg.Database == "" {
		return nil, fmt.Errorf("%w: database %q: %v", ErrConfig, cfg.Database, cmp.Or(err, errors.New("empty")))
	}
	if !cfg.Kind.IsValid() {
		return nil, fmt.Errorf("%w: %w: %v", ErrConfig, flow.ErrBadKind, cfg.Kind)
	}
	if cfg.User == "" && cfg.Password != "" {
		return nil, fmt.Errorf("%w: a password without a user name", ErrConfig)
	}
	if cfg.Compression != "" && cfg.Compression != CompressionGzip {
		return nil, fmt.Errorf("%w: compression %q: want %q or none", ErrConfig, cfg.Compression, CompressionGzip)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: negative timeout %v", ErrConfig, cfg.Timeout)
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	e := &Destination{
		cfg: cfg,
		c:   newClient(&cfg),
		flows: flowRow{
			observerName: cfg.Observer,
			observer:     appendString(nil, cfg.Observer),
			kind:         appendString(nil, flow.KeySpec{Kind: cfg.Kind, Mask: cfg.Prefix}.String()),
		},
		insertFlows:   insertSQL(cfg.Database, flowsTable),
		insertWindows: insertSQL(cfg.Database, windowsTable),
		insertSpread:  insertSQL(cfg.Database, spreadTable),
		unsure:        make(map[uint64]struct{}),
	}
	return e, nil
}

func insertSQL(db string, t *table) string {
	return "INSERT INTO " + qualified(db, t.name) + " (" + t.columns + ") FORMAT RowBinary"
}

// Stats returns the Destination's counts so far.
func (e *Destination) Stats() Stats {
	s := e.stats
	s.Requests, s.Failures, s.InsertBytes = e.c.requests, e.c.failures, e.c.insertBytes
	return s
}

// Records inserts the records of b into flows, in one INSERT: one request,
// whose rows the server writes as one part per partition (month) they fall
// in, each committed whole or not at all.
//
// Every row's observer is b.Observer, the observer of the run that made
// the batch (which may have been spooled by an earlier run), or
// Config.Observer when b's is empty.
//
// When b.Retry is set, or an earlier attempt at b failed after its request
// may have reached the server, Records first reads back the rows of flows
// that carry b's ID (and observer, in b's windows) and inserts only the
// records not among them, so that a retry after an insert that did land,
// wholly or in part, adds nothing twice. The read goes through the same
// server session as every request of the Destination, and the server runs one
// request of a session at a time: while an earlier attempt is still in the
// server's hands, the read fails (SESSION_IS_LOCKED, transient) instead of
// missing rows that attempt is about to write.
//
// A record that is not a valid key of Config.Kind, or whose time or window
// is outside 1970 to 2106, rejects the whole batch before anything is sent
// (ErrBadRecord and record.ErrRejected). Errors of the server are
// *ServerError, permanent ones wrapping record.ErrRejected; a table whose
// columns do not fit is a *SchemaError; anything else (no connection, a
// timeout) is transient.
func (e *Destination) Records(b *record.Batch) error {
	if e.closed {
		return ErrClosed
	}
	if len(b.Records) == 0 {
		return nil
	}
	if err := e.check(b); err != nil {
		return err
	}
	if err := e.ensure(); err != nil {
		return err
	}
	_, unsure := e.unsure[b.ID]
	if !unsure && !b.Retry && e.c.gz == nil {
		return e.stream(b)
	}
	if err := e.encode(b); err != nil {
		return err
	}
	body, rows := e.buf, len(e.ends)
	if unsure || b.Retry {
		var err error
		if body, rows, err = e.missingRows(b); err != nil {
			e.afterError(err)
			return fmt.Errorf("clickhouse: batch %d: look for the rows of an earlier attempt: %w", b.ID, err)
		}
		if rows == 0 {
			delete(e.unsure, b.ID)
			e.stats.Batches++
			return nil
		}
	}
	kept, err := e.c.insert(e.insertFlows, body)
	if !kept { // the transport still reads it: do not write into it
		if len(e.retry) > 0 && &body[0] == &e.retry[0] {
			e.retry = nil
		} else {
			e.buf = nil
		}
	}
	if err != nil {
		e.afterError(err)
		if !sentNothing(err) {
			e.markUnsure(b.ID)
		}
		return fmt.Errorf("clickhouse: insert batch %d (%d rows) into %s.%s: %w", b.ID, rows, e.cfg.Database, FlowsTable, err)
	}
	delete(e.unsure, b.ID)
	e.stats.Batches++
	e.stats.Rows += uint64(rows)
	return nil
}

// stream inserts the rows of b, checked already, encoding them as the
// transport sends them (rowStream): a first attempt at a batch, without
// compression, is never held whole in memory as RowBinary. A retry needs
// the batch's rows to compare with what landed, and gzip its body whole:
// they encode into e.buf first.
func (e *Destination) stream(b *record.Batch) error {
	e.flows.setObserver(e.batchObserver(b))
	chunk := e.chunk
	e.chunk = nil
	kept, err := e.c.insertStream(e.insertFlows, func() stoppableReader {
		s := &rowStream{f: &e.flows, recs: b.Records, id: b.ID, chunk: chunk[:0]}
		chunk = nil // a reader made again (a new connection) has its own
		return s
	})
	if kept {
		e.chunk = e.c.lastChunk
	}
	if err != nil {
		e.afterError(err)
		if !sentNothing(err) {
			e.markUnsure(b.ID)
		}
		return fmt.Errorf("clickhouse: insert batch %d (%d rows) into %s.%s: %w", b.ID, len(b.Records), e.cfg.Database, FlowsTable, err)
	}
	delete(e.unsure, b.ID)
	e.stats.Batches++
	e.stats.Rows += uint64(len(b.Records))
	return nil
}

// check returns the error encode would return for the first record of b
// no row can hold, without encoding anything.
func (e *Destination) check(b *record.Batch) error {
	for i := range b.Records {
		r := &b.Records[i]
		if k := r.Key.Kind(); k != e.cfg.Kind {
			return fmt.Errorf("%w: batch %d, record %d: key %v is not a valid %v key: %w", ErrBadRecord, b.ID, i, r.Key, e.cfg.Kind, record.ErrRejected)
		}
		if _, _, _, err := rowTimes(r); err != nil {
			return fmt.Errorf("%w: batch %d, record %d: %v: %w", ErrBadRecord, b.ID, i, err, record.ErrRejected)
		}
	}
	return nil
}

// typicalRowLen is the length of a typical flows row beyond its observer:
// a 5-tuple of IPv4 addresses is about 100 bytes, of IPv6 addresses 150.
const typicalRowLen = 128

// encode encodes the rows of b into e.buf and e.ends. The buffers are
// grown once for the batch, from the length of the rows of the last, so
// that a large batch is not copied over and over as it grows.
func (e *Destination) encode(b *record.Batch) error {
	rowLen := typicalRowLen + len(e.flows.observer)
	if len(e.ends) > 0 && len(e.buf) > 0 {
		rowLen = len(e.buf)/len(e.ends) + 8
	}
	if need := len(b.Records) * rowLen; cap(e.buf) < need {
		// Off the heap where it is large (package hugepage), rather than
		// slices.Grow, which would clear it: its pages are first touched
		// by the rows, as huge pages where the kernel gives them.
		hugepage.Free(e.buf)
		e.buf = hugepage.Alloc[byte](need)
	}
	e.buf = e.buf[:0]
	e.ends = slices.Grow(e.ends[:0], len(b.Records))
	e.flows.setObserver(e.batchObserver(b))
	// Rows longer than the estimate may outgrow the buffer: append then
	// moves them to the heap, and the buffer left behind goes back.
	defer func(grown []byte) {
		if cap(e.buf) != cap(grown) {
			hugepage.Free(grown)
		}
	}(e.buf)
	for i := range b.Records {
		r := &b.Records[i]
		if k := r.Key.Kind(); k != e.cfg.Kind {
			return fmt.Errorf("%w: batch %d, record %d: key %v is not a valid %v key: %w", ErrBadRecord, b.ID, i, r.Key, e.cfg.Kind, record.ErrRejected)
		}
		var err error
		if e.buf, err = e.flows.appendRecord(e.buf, r, b.ID); err != nil {
			return fmt.Errorf("%w: batch %d, record %d: %v: %w", ErrBadRecord, b.ID, i, err, record.ErrRejected)
		}
		e.ends = append(e.ends, len(e.buf))
	}
	return nil
}

// missingRows returns the rows of the encoded batch b that flows does not
// hold yet, and how many there are. A row counts as there when a row of
// flows has the same value in every column; rows that occur n times in the
// batch (the same key at the same nanosecond, reported twice by a filter)
// need n such rows.
func (e *Destination) missingRows(b *record.Batch) ([]byte, int, error) {
	e.stats.Checks++
	lo, hi := windowSpan(b)
	q := "SELECT " + flowsTable.columns + " FROM " + qualified(e.cfg.Database, FlowsTable) +
		" WHERE `batch` = " + strconv.FormatUint(b.ID, 10) +
		" AND `observer` = " + quoteString(e.batchObserver(b)) +
		" AND `window` >= " + strconv.FormatUint(uint64(lo), 10) +
		" AND `window` <= " + strconv.FormatUint(uint64(hi), 10) +
		" FORMAT RowBinary"
	// The rows found are at most the batch's rows, and twice that only if
	// earlier attempts wrote them twice; the bound keeps a runaway answer
	// out of memory, not a legitimate one.
	answer, err := e.c.exec(q, int64(4*len(e.buf)+1<<20))
	if err != nil {
		return nil, 0, err
	}
	e.rows, err = splitRows(answer, flowsColumns, e.rows[:0])
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrBadAnswer, err)
	}
	landed := make(map[string]int, len(e.rows))
	for _, r := range e.rows {
		landed[string(r)]++
	}
	e.retry = e.retry[:0]
	missing, start := 0, 0
	for _, end := range e.ends {
		row := e.buf[start:end]
		start = end
		if n := landed[string(row)]; n > 0 {
			landed[string(row)] = n - 1
			e.stats.RowsFound++
			continue
		}
		e.retry = append(e.retry, row...)
		missing++
	}
	return e.retry, missing, nil
}

// windowSpan returns the first and last window start, in seconds, of the
// records of b (already checked to be DateTimes).
func windowSpan(b *record.Batch) (lo, hi uint32) {
	lo = maxUnixSeconds
	for i := range b.Records {
		w := uint32(b.Records[i].WindowNs / 1e9)
		lo, hi = min(lo, w), max(hi, w)
	}
	return lo, hi
}

func (e *Destination) markUnsure(id uint64) {
	if len(e.unsure) >= maxUnsure {
		clear(e.unsure)
	}
	e.unsure[id] = struct{}{}
}

// afterError makes the next call look at the tables again when err says
// that they changed under the Destination.
func (e *Destination) afterError(err error) {
	var se *ServerError
	if errors.As(err, &se) && schemaCode(se.Code) {
		e.ready = false
	}
}

// Window inserts the summary s as a row of windows.
//
// A summary has no Retry flag, so Window always looks first for a row of
// windows with the same observer, window start and id, the hash of every
// other column of the row, and inserts only when there is none: a summary
// given again after an insert that did land is not written twice. The
// look-up goes through the Destination's session, as in Records. The price is
// that two runs whose summaries are equal in every column (the same
// capture replayed twice under the same observer, filter and kind) leave
// one row.
//
// A window outside 1970 to 2106 is rejected (ErrBadRecord,
// record.ErrRejected); other errors are as for Records.
func (e *Destination) Window(s *record.Summary) error {
	if e.closed {
		return ErrClosed
	}
	_, id, err := e.windowRow(s) // checks s and gives its id; encoded again below
	if err != nil {
		return err
	}
	if err := e.ensure(); err != nil {
		return err
	}
	e.stats.Checks++
	start, _, _ := seconds(s.StartNs)
	q := "SELECT count() FROM " + qualified(e.cfg.Database, WindowsTable) +
		" WHERE `window_start` = " + strconv.FormatUint(uint64(start), 10) +
		" AND `observer` = " + quoteString(e.observer(s)) +
		" AND `id` = " + strconv.FormatUint(id, 10)
	answer, err := e.c.exec(q, 64)
	if err != nil {
		e.afterError(err)
		return fmt.Errorf("clickhouse: window %s: look for an earlier attempt: %w", time.Unix(int64(start), 0).UTC().Format(time.RFC3339), err)
	}
	n, perr := strconv.ParseUint(string(bytes.TrimSpace(answer)), 10, 64)
	if perr != nil {
		return fmt.Errorf("clickhouse: window %s: look for an earlier attempt: %w: %q", time.Unix(int64(start), 0).UTC().Format(time.RFC3339), ErrBadAnswer, shorten(answer, 64))
	}
	if n > 0 {
		e.stats.WindowsFound++
		return nil
	}
	// The spread rows go first: a windows row found on a retry then says
	// they landed too. Written again (the windows insert failed after
	// them), they replace their copies (spreadEngine).
	if srows := e.spreadRows(s, start); len(srows) > 0 {
		kept, err := e.c.insert(e.insertSpread, srows)
		if !kept {
			e.wrow = nil
		}
		if err != nil {
			e.afterError(err)
			return fmt.Errorf("clickhouse: insert the spread of window %s into %s.%s: %w", time.Unix(int64(start), 0).UTC().Format(time.RFC3339), e.cfg.Database, SpreadTable, err)
		}
		e.stats.SpreadRows += uint64(len(s.Spread.Src) + len(s.Spread.Dst))
	}
	row, _, _ := e.windowRow(s) // spreadRows wrote into the same buffer
	kept, err := e.c.insert(e.insertWindows, row)
	if !kept {
		e.wrow = nil
	}
	if err != nil {
		e.afterError(err)
		return fmt.Errorf("clickhouse: insert window %s into %s.%s: %w", time.Unix(int64(start), 0).UTC().Format(time.RFC3339), e.cfg.Database, WindowsTable, err)
	}
	e.stats.Windows++
	return nil
}

func (e *Destination) observer(s *record.Summary) string {
	return cmp.Or(s.Observer, e.cfg.Observer)
}

// batchObserver returns the observer of the flows rows of b: its own, or
// Config.Observer.
func (e *Destination) batchObserver(b *record.Batch) string {
	return cmp.Or(b.Observer, e.cfg.Observer)
}

// windowRow encodes the windows row of s into e.wrow and returns it with
// its id: the FNV-1a hash of the row's other columns in RowBinary.
func (e *Destination) windowRow(s *record.Summary) ([]byte, uint64, error) {
	start, _, ok1 := seconds(s.StartNs)
	end, _, ok2 := seconds(s.EndNs)
	if !ok1 || !ok2 {
		return nil, 0, fmt.Errorf("%w: window %d ns to %d ns is outside the DateTime range, 1970 to 2106: %w", ErrBadRecord, s.StartNs, s.EndNs, record.ErrRejected)
	}
	b := appendString(e.wrow[:0], e.observer(s))
	b = appendU32(b, start)
	b = appendU32(b, end)
	for _, v := range [...]uint64{s.Packets, s.Malformed, s.Skipped, s.Keys, s.Distinct, s.DistinctEstimate, s.Dropped} {
		b = appendU64(b, v)
	}
	enc := base64.StdEncoding
	b = appendStringLen(b, enc.EncodedLen(len(s.Sketch)))
	b = enc.AppendEncode(b, s.Sketch)
	b = appendU64(b, s.Prefiltered)
	b = appendU64(b, s.Late)
	final := byte(0)
	if s.Final {
		final = 1
	}
	b = append(b, final)
	b = appendString(b, s.Filter)
	b = append(b, e.flows.kind...)
	h := fnv.New64a()
	h.Write(b)
	id := h.Sum64()
	b = appendU64(b, id)
	e.wrow = b
	return b, id, nil
}

// spreadRows encodes the spread rows of s, of window start (seconds),
// into e.wrow; nil without a spread or with empty lists.
func (e *Destination) spreadRows(s *record.Summary, start uint32) []byte {
	if s.Spread == nil || len(s.Spread.Src)+len(s.Spread.Dst) == 0 {
		return nil
	}
	b := e.wrow[:0]
	for _, side := range [...]struct {
		name string
		list []record.SpreadEntry
	}{{"src", s.Spread.Src}, {"dst", s.Spread.Dst}} {
		for _, en := range side.list {
			b = appendString(b, e.observer(s))
			b = appendU32(b, start)
			b = appendString(b, side.name)
			b = appendString(b, en.Addr)
			b = appendU64(b, en.Distinct)
			b = appendU64(b, en.Error)
			b = append(b, e.flows.kind...)
		}
	}
	e.wrow = b
	return b
}

// Flush does nothing: Records and Window write before they return.
func (e *Destination) Flush() error {
	if e.closed {
		return ErrClosed
	}
	return nil
}

// Close releases the Destination's connections. Nothing is buffered, so
// nothing is lost. Later calls return ErrClosed.
func (e *Destination) Close() error {
	if e.closed {
		return ErrClosed
	}
	e.closed = true
	e.c.close()
	hugepage.Free(e.buf) // unless given up while the transport read it (Records)
	e.buf = nil
	return nil
}

// ensure finds the tables, creates what is missing, and checks their
// columns, once; again after an error that says they changed.
func (e *Destination) ensure() error {
	if e.ready {
		return nil
	}
	db := e.cfg.Database
	have, err := e.columns()
	if err != nil {
		return err
	}
	if have[FlowsTable] == nil || have[WindowsTable] == nil || have[SpreadTable] == nil {
		stmts := []string{"CREATE DATABASE IF NOT EXISTS " + quoteIdent(db)}
		for _, t := range tables {
			if have[t.name] == nil {
				stmts = append(stmts, t.createSQL(db))
			}
		}
		for _, s := range stmts {
			if _, err := e.c.exec(s, maxErrorBody); err != nil {
				return fmt.Errorf("clickhouse: %s: %w", firstWords(s, 6), err)
			}
		}
		if have, err = e.columns(); err != nil {
			return err
		}
	}
	for _, t := range tables {
		if have[t.name] == nil {
			return fmt.Errorf("clickhouse: table %s.%s: %w: still missing after CREATE TABLE", db, t.name, ErrBadAnswer)
		}
		if alter := t.addSQL(db, have[t.name]); alter != "" {
			// A table of an earlier release: add its new columns. Another
			// writer adding them at the same moment makes this fail with
			// "already exists" (code 44): the columns are listed again
			// either way, and the check below says what still does not fit.
			if _, err := e.c.exec(alter, maxErrorBody); err != nil {
				var se *ServerError
				if !errors.As(err, &se) || se.Code != codeColumnExists {
					return fmt.Errorf("clickhouse: add the columns of this release to %s.%s: %w", db, t.name, err)
				}
			}
			if have, err = e.columns(); err != nil {
				return err
			}
		}
		if err := t.check(db, have[t.name]); err != nil {
			return err
		}
	}
	e.ready = true
	return nil
}

// columns returns the columns of flows and windows, by table; a table
// that does not exist is not in the map.
func (e *Destination) columns() (map[string]tableColumns, error) {
	answer, err := e.c.exec(columnsSQL(e.cfg.Database), 1<<20)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: list the columns of %s.%s, %s.%s and %s.%s: %w", e.cfg.Database, FlowsTable, e.cfg.Database, WindowsTable, e.cfg.Database, SpreadTable, err)
	}
	have, err := parseColumns(answer)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w: %v", ErrBadAnswer, err)
	}
	return have, nil
}

// firstWords returns the first n words of s, to name a statement in an
// error.
func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = f[:n]
	}
	return strings.Join(f, " ")
}

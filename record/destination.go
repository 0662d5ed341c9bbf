package record

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// ErrRejected is wrapped by a Destination's error when the destination
// refused the batch or summary for good (a schema mismatch, a malformed
// request). The export queues of package export count it under reason
// "rejected" and do not retry it; any other error is taken as transient (an
// unreachable server, a closed connection, a timeout) and retried.
var ErrRejected = errors.New("record: rejected by the destination")

// A Fixer is an error a Destination returns, or wraps, when it waits for
// the operator rather than for the destination (a refused login, a user
// without the right to write, an address that is not the destination's):
// Fix says what to change, in a phrase ("fix the user or password of the
// --export URL"), or "" when nothing is known. Such an error is transient:
// the batch waits (in the spool, with one) and is retried. The export
// queues of package export say a failing destination's error once, not at
// every retry, and once more whenever its Fix changes (a destination that
// was down and now refuses the login). *clickhouse.ServerError is one;
// WithFix makes one of any error.
type Fixer interface {
	Fix() string
}

// FixOf returns the Fix of the first Fixer in err's chain, or "".
func FixOf(err error) string {
	var f Fixer
	if errors.As(err, &f) {
		return f.Fix()
	}
	return ""
}

// WithFix returns err with what the operator must change: a Fixer whose
// message is err's followed by "; " and fix, and which wraps err.
func WithFix(err error, fix string) error {
	return &fixError{err: err, fix: fix}
}

type fixError struct {
	err error
	fix string
}

func (e *fixError) Error() string { return e.err.Error() + "; " + e.fix }
func (e *fixError) Unwrap() error { return e.err }
func (e *fixError) Fix() string   { return e.fix }

// Destination is one destination of a run's output: the record and summary
// files of --out and --summary, and each --export destination (IPFIX,
// ClickHouse). The Reporter feeds every Destination the same stream, from
// its one goroutine: the records of a window in batches, then that window's
// summary once all of its records have been given; Flush when the pipeline
// is idle; Close once at the end.
//
// A Destination is called from one goroutine at a time and need not be safe
// for concurrent use. Pointers it is given (a Batch, its Records, a Summary)
// are valid only for the call: a Destination that keeps one copies it.
type Destination interface {
	// Records writes a batch of distinct-flow records.
	Records(b *Batch) error
	// Window writes the summary of a closed window. Every record of that
	// window was given to Records before.
	Window(s *Summary) error
	// Flush pushes buffered output to the destination.
	Flush() error
	// Close flushes and releases the destination; called once, last.
	Close() error
}

// A SummaryCarrier is a Destination that says whether its Window sends
// the summary anywhere; a Destination that is not one does. IPFIX's
// Window only flushes the window's records (IPFIX has no Information
// Elements for a window's counts): an Export counts no summary as sent or
// lost for it, so that its totals count records alone.
type SummaryCarrier interface {
	CarriesSummaries() bool
}

// An Export is a Destination that delivers from goroutines of its own and
// counts what it could not deliver rather than fail the run: an --export
// destination in its queue (export.Queue). The Reporter never waits for
// one and ignores its errors; it reads its losses into each summary and its
// counts into the run totals.
type Export interface {
	Destination
	// TakeDropped adds to *m (made when nil) what was lost since the
	// previous call, under the export's name, by reason.
	TakeDropped(m *map[string]map[string]uint64)
	// Stats are the export's counts since it was opened.
	Stats() ExportStats
}

// ExportStats are an Export's counts since it was opened.
type ExportStats struct {
	Dest        string
	Sent        uint64 // records the destination took
	SentWindows uint64 // window summaries the destination took
	Queued      int    // records in memory now
	Spooled     int    // records in the spool now, for the next run once the export is closed
	SpooledWins int    // window summaries in the spool now
	Up          bool   // the last attempt succeeded (true until one fails)
	// Dropped counts what was lost, by reason (export.DropReasons).
	Dropped map[string]uint64
}

// A Batch is a run of distinct-flow records on its way to a Destination.
type Batch struct {
	// ID names the batch for its destination: unique within a run and
	// across runs (a random base per run, then a sequence), and the same
	// on every retry, from memory or from the spool, so that a destination
	// can make a retried write idempotent (ClickHouse).
	ID      uint64
	Records []Record
	// Retry is set when the batch was given to this destination before and
	// the outcome was not known (a timeout, a broken connection): it may
	// have landed. A destination that can tell checks before writing again.
	Retry bool
	// Observer names the observation point (--observer) of the run that
	// produced the records, which goes with them through the spool: a
	// batch spooled by one run and sent by a later one, after the router
	// was renamed, is still stored under the name it was seen by.
	// Empty means the destination's own (its configured observer), as for
	// batches spooled by a flowdedup that did not record one. At most
	// MaxObserverLen bytes.
	Observer string
	// Domain is the IPFIX observation domain ID (--observation-domain) of
	// the run that produced the records, which goes with them through the
	// spool likewise: a batch spooled by one run and sent by a later one
	// with another --observation-domain still goes out under the domain it
	// was seen in. Not Valid means the destination's own (its configured
	// domain), as for batches spooled by a flowdedup that did not record
	// one. Queue fills it from QueueConfig.Domain.
	Domain Domain
}

// A Domain is an IPFIX observation domain ID (RFC 7011 section 3.1) that
// may be unknown. Every uint32 is a domain, 0 included, so whether ID is
// known is a field of its own: the zero Domain is "unknown", and
// Domain{ID: 0, Valid: true} is domain 0.
type Domain struct {
	ID    uint32
	Valid bool // ID is the domain; false: unknown
}

// Or returns d's ID when d is Valid, else def.
func (d Domain) Or(def uint32) uint32 {
	if d.Valid {
		return d.ID
	}
	return def
}

// MaxObserverLen bounds an observer's name (Config.Observer,
// Batch.Observer), which every spool file of a batch holds: a host name is
// at most 64 bytes on Linux and a DNS name at most 253.
const MaxObserverLen = 255

// ErrObserver is wrapped by the error of an observer name longer than
// MaxObserverLen: New refuses it, and a spool does not take a batch of it.
var ErrObserver = errors.New("record: observer name too long")

// CheckAddress checks that addr, a destination's address, is HOST:PORT with
// a non-empty host and a port from 1 to 65535.
func CheckAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: want HOST:PORT (%v)", addr, err)
	}
	if host == "" {
		return fmt.Errorf("address %q has no host", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("address %q: port %q is not a number from 1 to 65535", addr, port)
	}
	return nil
}

package collect

import (
	"net/netip"
	"sync/atomic"

	"github.com/flowdedup/flowdedup/collect/netflow"
	"github.com/flowdedup/flowdedup/collect/sflow"
)

// Reasons a datagram or a record is not keyed, counted in Stats.Errors.
// The labels are stable: summaries and metrics use them.
const (
	// RejectedExporter: a datagram (or a TCP connection) from an address
	// --allow does not take.
	RejectedExporter = "rejected_exporter"
	// Oversize: a datagram longer than the receive buffer (64 KiB).
	Oversize = "oversize"
	// MissingField: a flow record without a field of the key kind (a
	// source address for --key src, ...), or an sFlow sample whose
	// header flow.Parse found no key in is counted by the pipeline
	// instead (malformed_by, skipped_by).
	MissingField = "missing_field"
	// Shutdown: a datagram (or TCP message) received but not decoded
	// because the collector was stopping: what its sockets held, or its
	// readers had read, when the pipeline stopped reading (Close), and
	// what came to a socket after Drain or Close stopped its intake.
	Shutdown = "shutdown"
	// BadTime: a flow record whose start is no sane time (before 1993,
	// or not a time at all: e.g. 1 ms before 1970, flowStartMilliseconds
	// 2^64-1). It is keyed with its arrival.
	BadTime = "bad_time"
)

// reasons lists every label of Stats.Errors, in index order: collect's
// own, then the decoders' (netflow.Reason, sflow.Reason), merged by
// label.
var reasons = []string{
	RejectedExporter, Oversize, MissingField,
	"truncated", "bad_version", "bad_set", "bad_template", "no_template", "no_header",
	Shutdown,
	BadTime,
}

const (
	errRejected = iota
	errOversize
	errMissing
	errTruncated
	errBadVersion
)

const (
	errBadTime = 10
	numReasons = 11
)

// errShutdown is the index of Shutdown in reasons.
var errShutdown int

// Reasons returns the labels of Stats.Errors, for metrics registered up
// front. The caller owns the slice.
func Reasons() []string { return append([]string(nil), reasons...) }

var (
	netflowReason [netflow.NumReasons]int
	sflowReason   [sflow.NumReasons]int
)

func init() {
	index := func(label string) int {
		for i, r := range reasons {
			if r == label {
				return i
			}
		}
		panic("collect: no reason " + label)
	}
	errShutdown = index(Shutdown)
	for r := range netflow.NumReasons {
		netflowReason[r] = index(r.String())
	}
	for r := range sflow.NumReasons {
		sflowReason[r] = index(r.String())
	}
	if len(reasons) != numReasons {
		panic("collect: numReasons")
	}
}

// sourceStats are one source's counters, written by its goroutine and
// read by Stats.
type sourceStats struct {
	datagrams        atomic.Uint64
	records          atomic.Uint64
	errors           [numReasons]atomic.Uint64
	templatesEvicted atomic.Uint64
	domainsEvicted   atomic.Uint64
	exportersEvicted atomic.Uint64
	counterSamples   atomic.Uint64
	kernelDrops      atomic.Uint64
	connections      atomic.Uint64 // TCP
	startAhead       atomic.Uint64
	// Templates dropped because their transport session ended: its TCP
	// connection closed, or its UDP exporter was evicted.
	templatesClosed, templatesOfEvicted atomic.Uint64

	// IPFIX over TCP: connections open now, refused for the limit,
	// closed by the idle timeout and by the message timeout.
	tcpOpen                         atomic.Int64
	tcpRefused, tcpIdle, tcpStalled atomic.Uint64
}

// Stats are a Collector's counters since it opened. Safe to take from any
// goroutine while it runs.
type Stats struct {
	Datagrams uint64 // datagrams (TCP: IPFIX messages) received, rejected ones included
	Records   uint64 // flow records and flow samples decoded
	// Errors counts, by reason (Reasons), the datagrams, sets and records
	// not keyed.
	Errors map[string]uint64
	// KernelDrops counts the datagrams the kernel dropped because a
	// socket's receive buffer was full (SO_RXQ_OVFL).
	KernelDrops uint64
	// Evictions for room: templates and observation domains of an
	// exporter's session, exporters' sessions of a socket (their
	// templates are learnt again from the next refresh).
	TemplatesEvicted, DomainsEvicted, ExportersEvicted uint64
	// CounterSamples counts sFlow counter samples, which carry no flows.
	CounterSamples uint64
	// Connections counts the IPFIX-over-TCP connections accepted.
	Connections uint64
	// StartAhead counts the flow records whose start was more than
	// Config.MaxClockAhead after their arrival (an exporter's clock that
	// is wrong): their arrival was taken as their time instead.
	StartAhead uint64
	// IPFIX over TCP: TCPOpen is the connections open now;
	// TCPRefused counts the connections closed at once because the
	// listener had its limit (1024) open; TCPIdleClosed those closed
	// because no message began within Config.TCPIdleTimeout, and
	// TCPStalledClosed those closed because a message that had begun
	// was not whole within Config.TCPMessageTimeout.
	TCPOpen, TCPRefused, TCPIdleClosed, TCPStalledClosed uint64
	// Registry and template memory (issue 25): ObserverShareOverflow
	// counts the exporters' domains counted under their address's
	// ShareName (past Config.ObserversPerAddress); ObserversEvicted the
	// observers that left the registry, idle for Config.ObserverIdle;
	// TemplateMemoryEvicted the templates evicted to keep every session's
	// templates within Config.TemplateMemory; TemplateMemory the bytes
	// they take now.
	ObserverShareOverflow, ObserversEvicted uint64
	TemplateMemoryEvicted                   uint64
	TemplateMemory                          int64
	// Templates dropped, their bytes back in Config.TemplateMemory at
	// once, because their transport session ended (RFC 7011 scopes
	// templates to it): TemplatesSessionClosed those of IPFIX-over-TCP
	// connections that closed (by the exporter, a timeout or an error),
	// TemplatesSessionEvicted those of UDP exporters' sessions evicted
	// for room (ExportersEvicted).
	TemplatesSessionClosed, TemplatesSessionEvicted uint64
	// ObserverOverflow counts the exporters that came after the observer
	// registry was full (Config.MaxObservers), counted as OtherName (and
	// again each time one, looked up again every 10 s, still finds no
	// room; so does ObserverShareOverflow).
	ObserverOverflow uint64
	// Observers holds each exporter's observation domain, by number.
	Observers []ObserverStats
}

// ObserverStats are the counters of one observer: an exporter's
// observation domain.
type ObserverStats struct {
	ID     uint32 // its number, record.Record.ObserverID
	Name   string // Name(Addr, Domain), or OtherName
	Addr   netip.Addr
	Domain uint32
	// Protocol is what it sent last: "netflow5", "netflow9", "ipfix" or
	// "sflow"; "" for OtherName.
	Protocol  string
	Datagrams uint64
	Records   uint64
	// Lost counts what its sequence numbers say was lost in transit, in
	// LostUnit: "datagrams" (NetFlow v9, sFlow) or "records" (v5, IPFIX).
	Lost     uint64
	LostUnit string
	// SamplingRate is the exporter's 1-in-N packet sampling rate as it
	// last said it, 0 when it never did: a count from sampled traffic is
	// a lower bound of the real one.
	SamplingRate uint32
}

func (o *observer) stats() ObserverStats {
	s := ObserverStats{
		ID: o.id, Name: o.name, Addr: o.addr, Domain: o.domain,
		Datagrams: o.datagrams.Load(), Records: o.records.Load(),
		Lost: o.lost.Load(), SamplingRate: o.sampling.Load(),
	}
	switch o.version.Load() {
	case 5:
		s.Protocol, s.LostUnit = "netflow5", "records"
	case 9:
		s.Protocol, s.LostUnit = "netflow9", "datagrams"
	case 10:
		s.Protocol, s.LostUnit = "ipfix", "records"
	case versionSFlow:
		s.Protocol, s.LostUnit = "sflow", "datagrams"
	}
	return s
}

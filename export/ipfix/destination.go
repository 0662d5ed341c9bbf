package ipfix

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// Defaults of Config's zero fields.
const (
	// DefaultTemplateRefresh: on UDP, a template goes out again with the
	// next message of its records once it was last sent this long ago.
	// RFC 7011 (sections 8.4, 10.3.6) leaves the interval to configuration
	// and RFC 6728 suggests 600 s, but a collector that (re)starts cannot
	// decode anything until it has the template, and distinct-flow records
	// cannot be sent again: 30 s bounds that loss, at the cost of one
	// template set (16 to 32 bytes) per template per 30 s.
	DefaultTemplateRefresh = 30 * time.Second
	// DefaultTemplateRefreshMessages: on UDP, a template goes out again in
	// at least every 100th message of its records, which bounds the loss
	// after a collector restart at high rates too (100 messages are about
	// 7000 IPv4 5-tuple records on a 1500-byte path) for at most 0.03 %
	// more bytes. The room for the template is kept free in every message
	// anyway (see Destination), so it never costs a message.
	DefaultTemplateRefreshMessages = 100
	// DefaultReconnectInterval is the least time between two connection
	// attempts: RFC 7011 section 10.4.4 says an exporter in its default
	// configuration MUST NOT try to connect more often than once a minute.
	DefaultReconnectInterval = time.Minute
	// DefaultTimeout bounds a connection attempt and a TCP write: a
	// collector that stops reading must not stall the exporter forever.
	DefaultTimeout = 10 * time.Second
	// DefaultRefusalWait: on UDP, how long the first message after the
	// socket connects, and after the collector refused one, waits for an
	// ICMP port unreachable before the collector is taken as listening.
	// A closed port on the same host answers within the send, one on a
	// LAN within a millisecond; 50 ms covers most WAN paths, and is spent
	// only at start and while the collector is down, in the export
	// Queue's goroutine.
	DefaultRefusalWait = 50 * time.Millisecond
	// DefaultTCPMessageSize is the message size on TCP: the largest an
	// IPFIX message can be, since TCP segments the stream itself (RFC 7011
	// section 10.4.3), which means the fewest writes. Flush sends partly
	// filled messages, so a slow trickle of records is not held back.
	DefaultTCPMessageSize = maxMessageLength
	// MinMessageSize is the least Config.MessageSize: the 512-byte packet
	// RFC 7011 section 10.3.3 asks for when the path MTU is unknown, less
	// its IPv6 and UDP headers. Every template and one record fit in it.
	MinMessageSize = 512 - ipv6UDPHeaders
)

const (
	ipv4UDPHeaders  = 20 + 8
	ipv6UDPHeaders  = 40 + 8
	unknownPathMTU  = 512                    // RFC 7011 section 10.3.3
	maxUDPv4Payload = 65535 - ipv4UDPHeaders // the IPv4 total length counts its header
	maxUDPv6Payload = 65535 - 8              // the IPv6 payload length does not
)

// Errors of the package, wrapped with more detail.
var (
	// ErrURL: an --export URL this package cannot serve (see ParseURL).
	ErrURL = errors.New("ipfix: invalid export URL")
	// ErrConfig: a Config that New cannot serve.
	ErrConfig = errors.New("ipfix: invalid configuration")
	// ErrClosed: the Destination was used after Close.
	ErrClosed = errors.New("ipfix: exporter closed")
	// ErrPeerClosed: the collector closed the TCP connection. The records
	// not yet sent are kept, and the next call connects again.
	ErrPeerClosed = errors.New("ipfix: the collector closed the connection")
	// ErrNotConnected: there is no connection to the collector and the
	// last attempt was less than Config.ReconnectInterval ago. It wraps
	// the error of that attempt, when there was one.
	ErrNotConnected = errors.New("ipfix: not connected to the collector")
)

// Config says where and how a Destination sends.
type Config struct {
	// Network is "udp" or "tcp"; Address the collector's HOST:PORT.
	// ParseURL fills both from an --export URL.
	Network string
	Address string
	// Kind is the key kind of every record (--key). A record of another
	// kind is rejected (record.ErrRejected).
	Kind flow.KeyKind
	// ObservationDomain is the observation domain ID in the message
	// headers of the records of a batch without one of its own
	// (record.Batch.Domain), which tells a collector's records of many
	// routers apart. A batch with its own (spooled by a run with another
	// --observation-domain) goes out in messages of that domain.
	ObservationDomain uint32
	// TemplateRefresh and TemplateRefreshMessages say when, on UDP, a
	// template is sent again: once it was last sent TemplateRefresh ago,
	// and in at least every TemplateRefreshMessages-th message of its
	// records. Zero means DefaultTemplateRefresh and
	// DefaultTemplateRefreshMessages. On TCP a template is sent once per
	// connection, as RFC 7011 section 8.3 asks.
	TemplateRefresh         time.Duration
	TemplateRefreshMessages int
	// MessageSize is the largest message sent, in bytes, from
	// MinMessageSize to 65535 (on UDP at most 65507, the largest IPv4 UDP
	// payload). Zero means, on UDP, the path MTU of the connected socket
	// (IP_MTU, IPV6_MTU; 512 when unknown, per RFC 7011 section 10.3.3)
	// less the IP and UDP headers, and on TCP DefaultTCPMessageSize.
	MessageSize int
	// ReconnectInterval is the least time between two connection attempts;
	// zero means DefaultReconnectInterval.
	ReconnectInterval time.Duration
	// Timeout bounds a connection attempt and a TCP write; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// RefusalWait is how long, on UDP, a message sent while the
	// collector's state is unknown (the first after connecting, the first
	// after a refusal) waits for its ICMP port unreachable; zero means
	// DefaultRefusalWait.
	RefusalWait time.Duration
	// Now is the clock of export times, template refresh and reconnection
	// (tests set it); nil means time.Now. Socket deadlines always use the
	// real clock.
	Now func() time.Time
}

// Stats counts what a Destination has done since New.
type Stats struct {
	Messages   uint64 // messages sent
	Records    uint64 // data records sent: on TCP, whose bytes the collector's host acknowledged (Linux)
	Templates  uint64 // template sets sent
	Dials      uint64 // connection attempts
	SendErrors uint64 // messages that failed to go out (they are kept and sent again)
}

// A Destination sends distinct-flow records to one IPFIX collector: it is
// the record.Destination of an ipfix:// or ipfix+tcp:// --export destination.
//
// Records are gathered into one message per template, so each message
// holds one data set. Each message keeps room at its head for its
// template set, and whether the template goes in is decided when the
// message is sent: a message that fails to go out (a collector that is
// down, a broken connection) stays whole, and goes out again later with
// the header, sequence number and template its new transport session
// needs. A batch that failed part way, given again (record.Batch.Retry,
// same ID), resumes after the records already taken, so a retry does not
// duplicate them.
//
// The records of a batch go out under its observation domain
// (record.Batch.Domain), or Config.ObservationDomain when it has none.
// RFC 7011 scopes sequence numbers (section 3.1) and template IDs
// (section 3.4.1) to the transport session and the observation domain, so
// each domain has its own messages, sequence number and templates: a
// domain's first message on a session carries its templates, whatever
// other domains sent before.
//
// A Destination is not safe for concurrent use (record.Destination's rule: one
// goroutine at a time). It starts no goroutines.
type Destination struct {
	cfg    Config
	now    func() time.Time
	tcp    bool
	conn   net.Conn
	peek   *peeker // TCP: finds a collector that closed the connection
	maxMsg int     // message size limit of the current connection

	// TCP (see acked.go): the connection's raw socket, whether its
	// acknowledged byte count can be read and its value at connect, the
	// bytes written on it, the messages written and not acknowledged,
	// those of a broken connection waiting for the next, and spare
	// buffers for their copies.
	raw      rawConn
	canAck   bool
	ackBase  uint64
	written  uint64
	inflight []inflight
	resend   []inflight
	spare    [][]byte

	session  uint64 // transport sessions opened; a template is due once per session and domain
	lastDial time.Time
	dialErr  error
	dialed   bool

	// doms holds the observation domains records were given for:
	// doms[0] is Config.ObservationDomain's, the others those of batches
	// with a domain of their own (spooled by runs with another), added
	// when first seen and kept for the Destination's life (a few at most:
	// one per --observation-domain the spool holds batches of).
	doms []*domain

	// A batch whose Records call failed part way, and the index of its
	// first record not taken.
	partial   bool
	partialID uint64
	partialAt int

	// UDP: the collector's state is unknown (just connected, or it
	// refused a message): the next message waits for a refusal.
	unconfirmed bool
	rbuf        [1]byte

	stats  Stats
	closed bool
}

var _ record.Destination = (*Destination)(nil)

// domain is what RFC 7011 scopes to an observation domain in a transport
// session: the sequence number, and the templates (a message per
// template, which knows when its template was last sent).
type domain struct {
	id   uint32
	seq  uint32 // data records of this domain sent in this session (RFC 7011 section 3.1)
	msgs [numTemplates]message
}

func newDomain(id uint32) *domain {
	d := &domain{id: id}
	for i := range d.msgs {
		d.msgs[i].t = &templates[i]
	}
	return d
}

// message is the message being filled with the records of one template
// in one domain.
type message struct {
	t    *template
	buf  []byte // [header][template set][data set header][records], nil until first used
	n    int    // records in buf
	room int    // records that fit
	// The template's last sending: its transport session (0: never),
	// time, and the messages sent without it since.
	session uint64
	sentAt  time.Time
	since   int
}

// New returns a Destination sending to cfg's collector. For UDP it connects
// the socket (which sends nothing) to learn the path MTU; for TCP it does
// not connect: the first message does. A collector that is down, or a name
// that does not resolve yet, is not an error here: sending reports it, and
// connecting is tried again (at most once per ReconnectInterval). Only a
// malformed Config is (ErrConfig).
func New(cfg Config) (*Destination, error) {
	if cfg.Network != "udp" && cfg.Network != "tcp" {
		return nil, fmt.Errorf("%w: network %q: want udp or tcp", ErrConfig, cfg.Network)
	}
	if err := record.CheckAddress(cfg.Address); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if !cfg.Kind.IsValid() {
		return nil, fmt.Errorf("%w: %w: %v", ErrConfig, flow.ErrBadKind, cfg.Kind)
	}
	if cfg.MessageSize != 0 && (cfg.MessageSize < MinMessageSize || cfg.MessageSize > maxMessageLength) {
		return nil, fmt.Errorf("%w: message size %d: want %d to %d bytes", ErrConfig, cfg.MessageSize, MinMessageSize, maxMessageLength)
	}
	if cfg.TemplateRefresh < 0 || cfg.TemplateRefreshMessages < 0 || cfg.ReconnectInterval < 0 || cfg.Timeout < 0 || cfg.RefusalWait < 0 {
		return nil, fmt.Errorf("%w: negative template refresh, reconnect interval or timeout", ErrConfig)
	}
	cfg.TemplateRefresh = cmp.Or(cfg.TemplateRefresh, DefaultTemplateRefresh)
	cfg.TemplateRefreshMessages = cmp.Or(cfg.TemplateRefreshMessages, DefaultTemplateRefreshMessages)
	cfg.ReconnectInterval = cmp.Or(cfg.ReconnectInterval, DefaultReconnectInterval)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.RefusalWait = cmp.Or(cfg.RefusalWait, DefaultRefusalWait)
	e := &Destination{cfg: cfg, now: cfg.Now, tcp: cfg.Network == "tcp"}
	if e.now == nil {
		e.now = time.Now
	}
	switch {
	case cfg.MessageSize != 0 && e.tcp:
		e.maxMsg = cfg.MessageSize
	case cfg.MessageSize != 0:
		e.maxMsg = min(cfg.MessageSize, maxUDPv4Payload) // the smaller of the two families'
	case e.tcp:
		e.maxMsg = DefaultTCPMessageSize
	default:
		e.maxMsg = unknownPathMTU - ipv6UDPHeaders // until connected
	}
	e.doms = []*domain{newDomain(cfg.ObservationDomain)}
	if !e.tcp {
		e.connect() // an error is reported by the first send
	}
	return e, nil
}

// MessageSize returns the largest message the Destination sends now: for UDP
// with Config.MessageSize zero, the path MTU of the socket less the IP
// and UDP headers.
func (e *Destination) MessageSize() int { return e.maxMsg }

// Stats returns the Destination's counts so far.
func (e *Destination) Stats() Stats { return e.stats }

// Records encodes one data record per record of b, in messages of b's
// observation domain (Config.ObservationDomain when b.Domain is not
// Valid), and sends every message that fills up. A record that is not a valid key of Config.Kind,
// or whose time is before 1970, rejects the whole batch before anything of
// it is encoded (record.ErrRejected). A failure to send returns an error
// that does not wrap record.ErrRejected: the records taken before it are
// kept and sent later, and the same batch given again resumes after them.
func (e *Destination) Records(b *record.Batch) error {
	if e.closed {
		return ErrClosed
	}
	recs := b.Records
	for i := range recs {
		if k := &recs[i].Key; k.Kind() != e.cfg.Kind {
			return fmt.Errorf("ipfix: batch %d, record %d: %w: key %v is not a valid %v key", b.ID, i, record.ErrRejected, k, e.cfg.Kind)
		}
		if recs[i].TimeNs < 0 {
			return fmt.Errorf("ipfix: batch %d, record %d: %w: time %d ns is before 1970", b.ID, i, record.ErrRejected, recs[i].TimeNs)
		}
	}
	start := 0
	if e.partial && b.ID == e.partialID {
		start = min(e.partialAt, len(recs))
	}
	e.partial = false
	d := e.domain(b.Domain.Or(e.cfg.ObservationDomain))
	for i := start; i < len(recs); i++ {
		r := &recs[i]
		m := &d.msgs[keyTemplate(&r.Key)]
		if m.buf == nil || m.n == m.room {
			if err := e.ready(d, m); err != nil {
				e.partial, e.partialID, e.partialAt = true, b.ID, i
				return err
			}
		}
		m.buf = m.t.layout.appendRecord(m.buf, &r.Key, uint64(r.TimeNs/1e6))
		m.n++
	}
	return nil
}

// domain returns the state of the observation domain id, added when new
// (doms is short: see Destination.doms).
func (e *Destination) domain(id uint32) *domain {
	for _, d := range e.doms {
		if d.id == id {
			return d
		}
	}
	d := newDomain(id)
	e.doms = append(e.doms, d)
	return d
}

// ready makes room in m, a message of d, for one more record: it sends m
// when it is full, and sizes its buffer on first use or after the message
// size grew.
func (e *Destination) ready(d *domain, m *message) error {
	if m.n > 0 {
		if err := e.send(d, m); err != nil {
			return err
		}
	}
	if cap(m.buf) < e.maxMsg {
		m.buf = make([]byte, 0, e.maxMsg)
	}
	head := headerLen + len(m.t.set) + setHeaderLen
	m.buf = m.buf[:head]
	m.room = (e.maxMsg - head) / m.t.recLen
	return nil
}

// Window flushes the records of the window that closed, so that they
// reach the collector when it closes rather than when a message fills.
// Summaries themselves are not exported: IPFIX has no standard Information
// Elements for a window's counts, and --summary and ClickHouse carry them.
func (e *Destination) Window(s *record.Summary) error { return e.Flush() }

// CarriesSummaries is false: Window sends no summary
// (record.SummaryCarrier), so the export's totals count records alone.
func (e *Destination) CarriesSummaries() bool { return false }

var _ record.SummaryCarrier = (*Destination)(nil)

// Flush sends every message that holds records, of every domain. On TCP
// it then waits, up to Config.Timeout, until the collector's host has
// acknowledged every byte written (Linux; see acked.go), so that what a
// successful Flush returns for has reached the collector's host.
func (e *Destination) Flush() error {
	if e.closed {
		return ErrClosed
	}
	for _, d := range e.doms {
		for i := range d.msgs {
			if m := &d.msgs[i]; m.n > 0 {
				if err := e.send(d, m); err != nil {
					return err
				}
			}
		}
	}
	if len(e.resend) > 0 { // a connection broke with nothing new to send
		if err := e.connect(); err != nil {
			return err
		}
		if err := e.sendResend(); err != nil {
			return err
		}
	}
	return e.waitAcked()
}

// Close flushes and closes the connection. Records that could not be sent
// are lost, and the error says so. Later calls return ErrClosed.
func (e *Destination) Close() error {
	if e.closed {
		return ErrClosed
	}
	err := e.Flush()
	e.closed = true
	if e.conn != nil {
		if cerr := e.conn.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("ipfix: close: %w", cerr)
		}
		e.conn = nil
	}
	if err != nil {
		lost := e.unacked()
		for _, d := range e.doms {
			for i := range d.msgs {
				lost += d.msgs[i].n
			}
		}
		return fmt.Errorf("ipfix: close with %d records not sent: %w", lost, err)
	}
	return nil
}

// connect connects when there is no connection, at most once per
// ReconnectInterval.
func (e *Destination) connect() error {
	if e.conn != nil {
		return nil
	}
	now := e.now()
	if e.dialed && now.Sub(e.lastDial) < e.cfg.ReconnectInterval {
		next := e.lastDial.Add(e.cfg.ReconnectInterval)
		if e.dialErr != nil {
			return fmt.Errorf("%w %s (next attempt at %s): %w", ErrNotConnected, e.cfg.Address, next.Format(time.RFC3339), e.dialErr)
		}
		return fmt.Errorf("%w %s (next attempt at %s)", ErrNotConnected, e.cfg.Address, next.Format(time.RFC3339))
	}
	e.dialed, e.lastDial = true, now
	e.stats.Dials++
	d := net.Dialer{Timeout: e.cfg.Timeout}
	c, err := d.Dial(e.cfg.Network, e.cfg.Address)
	if err != nil {
		e.dialErr = err
		return fmt.Errorf("ipfix: connect to %s: %w", e.cfg.Address, err)
	}
	e.dialErr = nil
	e.conn = c
	e.session++
	for _, d := range e.doms {
		d.seq = 0 // a new session counts from 0 (RFC 7011 section 3.1)
	}
	switch c := c.(type) {
	case *net.TCPConn:
		e.peek = newPeeker(c)
		e.written = 0
		e.raw, e.canAck = newRawConn(c)
		if e.canAck {
			e.ackBase, e.canAck = bytesAcked(e.raw)
		}
	case *net.UDPConn:
		if e.cfg.MessageSize == 0 {
			e.maxMsg = udpMessageSize(c)
		}
		e.unconfirmed = true
	}
	return nil
}

// refused waits up to RefusalWait for the collector to refuse the message
// just sent on UDP, and returns the refusal (ECONNREFUSED). A datagram to
// a port nobody listens on is lost, and only the ICMP port unreachable
// that comes back, which the kernel turns into an error of the socket,
// tells; without this wait the message would count as sent and the error
// would fail the next send instead. The wait is only for a message sent
// while the collector's state is unknown, so a collector that is down at
// start, or goes down, costs no record.
func (e *Destination) refused() error {
	c := e.conn
	c.SetReadDeadline(time.Now().Add(e.cfg.RefusalWait))
	_, err := c.Read(e.rbuf[:]) // a collector sends nothing: only an error or the deadline ends it
	c.SetReadDeadline(time.Time{})
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return nil
	}
	return fmt.Errorf("no collector listening (ICMP port unreachable): %w", err)
}

// udpMessageSize returns the message size that fills a packet of the path
// MTU of c.
func udpMessageSize(c *net.UDPConn) int {
	ra, _ := c.RemoteAddr().(*net.UDPAddr)
	v6 := ra != nil && ra.IP.To4() == nil
	mtu := pathMTU(c, v6)
	if mtu <= 0 {
		mtu = unknownPathMTU
	}
	if v6 {
		return max(MinMessageSize, min(mtu-ipv6UDPHeaders, maxUDPv6Payload))
	}
	return max(MinMessageSize, min(mtu-ipv4UDPHeaders, maxUDPv4Payload))
}

// disconnect drops a broken connection: the next send connects again,
// starting a new transport session.
func (e *Destination) disconnect() {
	if e.conn != nil {
		e.conn.Close()
		e.conn, e.peek = nil, nil
	}
}

// forgetTemplates makes every template of every domain due with its next
// message: the collector missed those sent lately.
func (e *Destination) forgetTemplates() {
	for _, d := range e.doms {
		for i := range d.msgs {
			d.msgs[i].session = 0
		}
	}
}

// send sends the records of m, a message of d, in one message with d's
// header and sequence number, and its template when the template is due
// in d, after what a broken TCP connection left unacknowledged. On success
// m is empty; on failure m is unchanged.
func (e *Destination) send(d *domain, m *message) error {
	if err := e.connect(); err != nil {
		e.stats.SendErrors++
		return err
	}
	if len(e.resend) > 0 {
		if err := e.sendResend(); err != nil {
			return err
		}
	}
	return e.write(d, m)
}

// write writes m, a message of d, on the connection: see send.
func (e *Destination) write(d *domain, m *message) error {
	now := e.now()
	t := m.t
	data := headerLen + len(t.set)
	binary.BigEndian.PutUint16(m.buf[data:], t.id)
	binary.BigEndian.PutUint16(m.buf[data+2:], uint16(len(m.buf)-data))
	withTemplate := m.session != e.session ||
		(!e.tcp && (now.Sub(m.sentAt) >= e.cfg.TemplateRefresh || m.since+1 >= e.cfg.TemplateRefreshMessages))
	start := len(t.set) // the header goes right before the data set...
	if withTemplate {
		start = 0 // ...or before the template set
		copy(m.buf[headerLen:], t.set)
	}
	msg := m.buf[start:]
	binary.BigEndian.PutUint16(msg[0:], ipfixVersion)
	binary.BigEndian.PutUint16(msg[2:], uint16(len(msg)))
	binary.BigEndian.PutUint32(msg[4:], uint32(now.Unix()))
	binary.BigEndian.PutUint32(msg[8:], d.seq)
	binary.BigEndian.PutUint32(msg[12:], d.id)

	if e.tcp {
		// A collector that closed the connection would take this write
		// into the kernel's buffer and answer with a reset: the message
		// would be lost without an error. Look before writing.
		if e.peek.peerClosed() {
			e.lostConn()
			e.stats.SendErrors++
			return fmt.Errorf("%w %s", ErrPeerClosed, e.cfg.Address)
		}
		e.conn.SetWriteDeadline(time.Now().Add(e.cfg.Timeout))
	}
	if _, err := e.conn.Write(msg); err != nil {
		if e.tcp {
			// Part of the message may be on the stream: only a new
			// connection can carry a whole one again.
			e.lostConn()
		}
		// On UDP the socket stays: ECONNREFUSED reports an ICMP port
		// unreachable for an earlier datagram, and this one was not sent.
		// No collector was listening, so the templates sent lately are
		// lost too: every template goes again with its next message.
		if !e.tcp {
			e.forgetTemplates()
			e.unconfirmed = true
		}
		e.stats.SendErrors++
		return fmt.Errorf("ipfix: send to %s: %w", e.cfg.Address, err)
	}
	if e.unconfirmed {
		if err := e.refused(); err != nil {
			// Refused: this message was lost, so it is kept, as after a
			// failed write, and so are the templates.
			e.forgetTemplates()
			e.stats.SendErrors++
			return fmt.Errorf("ipfix: send to %s: %w", e.cfg.Address, err)
		}
		e.unconfirmed = false
	}
	d.seq += uint32(m.n)
	e.stats.Messages++
	e.wrote(d, m, len(msg))
	if withTemplate {
		m.session, m.sentAt, m.since = e.session, now, 0
		e.stats.Templates++
	} else {
		m.since++
	}
	m.buf, m.n = m.buf[:data+setHeaderLen], 0
	return nil
}

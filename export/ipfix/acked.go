package ipfix

import (
	"fmt"
	"time"
)

// TCP: a message counts as sent when the collector's host has
// acknowledged its last byte (the kernel's TCP_INFO tcpi_bytes_acked on
// Linux), not when it was written: a write only puts it into the local
// kernel's buffer, and a collector that closes or resets the connection
// loses what was still in that buffer or on the way. Messages written and
// not yet acknowledged are kept (a copy of the message's buffer), and
// when the connection breaks they are sent again, first, on the next one,
// with the header, sequence number and template of the new session.
// Where the acknowledged byte count cannot be read (other systems, or a
// kernel without it), a message counts as sent when written, as on UDP.
//
// An acknowledgement is the host's, not the collector's: bytes its kernel
// took and the collector never read (it closed with data unread) are lost
// without a sign. IPFIX over TCP has no acknowledgement of its own (RFC
// 7011 section 10.4).

// inflight is a message written on the current connection and not yet
// acknowledged.
type inflight struct {
	end uint64  // the stream offset just past its last byte
	d   *domain // its domain, and its template's index in d.msgs
	ti  int
	n   int    // its records
	buf []byte // a copy of the message's buffer (see message.buf), records included
}

// ackPoll bounds the wait between two looks at the acknowledged bytes
// while Flush waits for them: the first look comes at once (on loopback the
// acknowledgement is usually there), later ones back off to this.
const ackPoll = 5 * time.Millisecond

// wrote notes that m, a message of d, went out as n bytes of the stream,
// and keeps a copy of its buffer until the bytes are acknowledged.
func (e *Destination) wrote(d *domain, m *message, n int) {
	e.written += uint64(n)
	if !e.tcp || !e.canAck {
		e.stats.Records += uint64(m.n)
		return
	}
	var buf []byte
	if k := len(e.spare); k > 0 {
		buf, e.spare = e.spare[k-1][:0], e.spare[:k-1]
	}
	ti := int(m.t.id - firstTemplateID)
	e.inflight = append(e.inflight, inflight{end: e.written, d: d, ti: ti, n: m.n, buf: append(buf, m.buf...)})
	e.retire()
}

// retire counts the in-flight messages the collector's host has
// acknowledged as sent, and reports whether any are left.
func (e *Destination) retire() bool {
	if len(e.inflight) == 0 {
		return false
	}
	acked, ok := bytesAcked(e.raw)
	if !ok {
		return true
	}
	acked -= e.ackBase
	i := 0
	for ; i < len(e.inflight) && e.inflight[i].end <= acked; i++ {
		p := &e.inflight[i]
		e.stats.Records += uint64(p.n)
		e.spare = append(e.spare, p.buf)
		*p = inflight{}
	}
	e.inflight = append(e.inflight[:0], e.inflight[i:]...)
	return len(e.inflight) > 0
}

// waitAcked waits, up to Config.Timeout, until every message written is
// acknowledged. A connection that breaks meanwhile, or a collector that
// does not acknowledge in time, fails: the messages not acknowledged go
// again on the next connection.
func (e *Destination) waitAcked() error {
	if !e.tcp || !e.canAck || e.conn == nil {
		return nil
	}
	deadline := time.Now().Add(e.cfg.Timeout)
	wait := 50 * time.Microsecond
	for e.retire() {
		if e.peek.peerClosed() {
			e.lostConn()
			return fmt.Errorf("%w %s before acknowledging %d records", ErrPeerClosed, e.cfg.Address, e.unacked())
		}
		if time.Now().After(deadline) {
			n := e.unacked()
			e.lostConn()
			return fmt.Errorf("ipfix: %s did not acknowledge %d records within %v; they go again on a new connection", e.cfg.Address, n, e.cfg.Timeout)
		}
		time.Sleep(wait)
		wait = min(2*wait, ackPoll)
	}
	return nil
}

// unacked returns the records written and not acknowledged, on this
// connection and waiting for the next.
func (e *Destination) unacked() int {
	n := 0
	for i := range e.inflight {
		n += e.inflight[i].n
	}
	for i := range e.resend {
		n += e.resend[i].n
	}
	return n
}

// lostConn drops a broken TCP connection: what its collector's host
// acknowledged counts as sent, the rest goes again first on the next.
func (e *Destination) lostConn() {
	if e.tcp && e.canAck && e.conn != nil {
		e.retire()
		e.resend = append(e.resend, e.inflight...)
		e.inflight = e.inflight[:0]
	}
	e.disconnect()
}

// sendResend sends, on a new connection, the messages the last one's
// collector host did not acknowledge, oldest first, each with its new
// session's header, sequence number and template. It stops at the first
// failure; what is left goes with the next attempt.
func (e *Destination) sendResend() error {
	for len(e.resend) > 0 {
		p := &e.resend[0]
		real := &p.d.msgs[p.ti]
		m := message{t: real.t, buf: p.buf, n: p.n, session: real.session, sentAt: real.sentAt, since: real.since}
		if err := e.write(p.d, &m); err != nil {
			return err
		}
		real.session, real.sentAt, real.since = m.session, m.sentAt, m.since
		e.spare = append(e.spare, p.buf[:0])
		*p = inflight{}
		e.resend = e.resend[1:]
	}
	e.resend = nil
	return nil
}

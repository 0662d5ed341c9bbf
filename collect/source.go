package collect

import (
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowdedup/flowdedup/capture"
)

var (
	errTimeout = capture.ErrTimeout
	errClosed  = capture.ErrClosed
)

// unit is what an input hands the source: a batch of UDP datagrams, or
// one IPFIX message of a TCP connection.
type unit struct {
	batch *datagrams // UDP
	proto Protocol
	// TCP: the message, in its connection's buffer, which goes back to
	// free once decoded, and its connection's exporter (a session of its
	// own).
	msg  []byte
	exp  *exporter
	free chan<- []byte
	// closed: exp's connection closed after its last message (no msg):
	// its session's templates are dropped (RFC 7011 scopes templates to
	// the transport session), their bytes back in the budget at once.
	closed bool
}

// datagrams returns how many datagrams (or messages) u holds.
func (u *unit) datagrams() uint64 {
	if u.batch != nil {
		return uint64(u.batch.n)
	}
	if u.msg != nil {
		return 1
	}
	return 0
}

// source is the Collector's capture.Source: every listener's datagrams and
// messages, decoded record by record in the one goroutine that calls
// Next. Goroutines of their own receive (a reader per UDP socket, a
// reader per TCP connection) and hand the source units through a channel,
// so that the system calls of several sockets run on several cores while
// the records reach the pipeline through one producer, whose windows
// follow the records' times: several producers would each keep windows
// of their own exporters' clocks, and a quiet one would hold the others'
// back.
type source struct {
	decoder
	units   chan unit
	done    chan struct{}
	timer   *time.Timer
	timeout time.Duration
	allow   []netip.Prefix
	exps    exporters
	rxs     []*receiver
	tls     []*tcpListener
	wg      sync.WaitGroup
	once    sync.Once
	// Drain: drained is closed once every reader has ended (the
	// listeners stopped, the sockets read to their end).
	drained   chan struct{}
	drainOnce sync.Once
	stopOnce  sync.Once

	cur unit // being decoded
	i   int  // cur: the next datagram of the batch
	// pending is the datagrams of cur's batch not begun: Next takes them
	// one by one, and Close takes what is left (counted as Shutdown)
	// by swapping in closedPending, after which Next takes nothing more.
	pending atomic.Int64
}

// closedPending is pending after Close.
const closedPending = math.MinInt64 / 2

var (
	_ capture.Source      = (*source)(nil)
	_ capture.DropCounter = (*source)(nil)
)

// Next returns the next flow record (a key) or sFlow sample (a frame) of
// the listeners' datagrams and messages. It returns capture.ErrTimeout
// when nothing came for the poll interval, capture.ErrClosed after Close,
// and after Drain once everything received is decoded. A packet's Data
// is valid until the next call.
func (s *source) Next(p *capture.Packet) error {
	for {
		if s.next(p) {
			return nil
		}
		if b := s.cur.batch; b != nil && s.i < b.n {
			if s.pending.Add(-1) < 0 {
				return errClosed // Close counted the rest
			}
			s.datagram(b, s.i)
			s.i++
			continue
		}
		s.release()
		u, err := s.wait()
		if err != nil {
			return err
		}
		n := u.datagrams()
		s.stats.datagrams.Add(n)
		pend := int64(0)
		if u.batch != nil {
			pend = int64(n)
		}
		if !s.pending.CompareAndSwap(0, pend) {
			// Closed while we took u: Close did not see it.
			s.stats.errors[errShutdown].Add(n)
			return errClosed
		}
		if u.closed {
			s.endSession(u.exp)
			continue
		}
		s.cur, s.i = u, 0
		if u.batch == nil {
			s.startNetFlow(u.msg, u.exp, time.Now().UnixNano())
		}
	}
}

// wait returns the next unit of the inputs.
func (s *source) wait() (unit, error) {
	select {
	case u := <-s.units:
		return u, nil
	default:
	}
	s.timer.Reset(s.timeout)
	select {
	case u := <-s.units:
		s.timer.Stop()
		return u, nil
	case <-s.timer.C:
		return unit{}, errTimeout
	case <-s.drained:
		s.timer.Stop()
		// Every reader has ended: what is queued is all there is.
		select {
		case u := <-s.units:
			return u, nil
		default:
			return unit{}, errClosed
		}
	case <-s.done:
		s.timer.Stop()
		return unit{}, errClosed
	}
}

// datagram starts decoding datagram i of batch b.
func (s *source) datagram(b *datagrams, i int) {
	d, from, truncated := b.datagram(i)
	switch {
	case truncated:
		s.stats.errors[errOversize].Add(1)
		return
	case !allowed(s.allow, from):
		s.stats.errors[errRejected].Add(1)
		return
	}
	e := s.exps.get(from, b.port(i), s.cur.proto, b.now)
	if s.cur.proto == SFlow {
		s.startSFlow(d, e, b.now)
	} else {
		s.startNetFlow(d, e, b.now)
	}
}

// endSession forgets the session of exporter e, a TCP connection that
// closed after its last message was decoded: its templates (counted,
// TemplatesSessionClosed) and domains.
func (s *source) endSession(e *exporter) {
	if e.nf == nil {
		return
	}
	if n := e.nf.Release(); n != 0 {
		s.stats.templatesClosed.Add(uint64(n))
	}
	if s.sess == e.nf {
		s.sess, s.dom = nil, nil
	}
	if s.exp == e {
		s.exp = nil
	}
	e.nf = nil
}

// release gives the unit just decoded back to its input.
func (s *source) release() {
	switch {
	case s.cur.batch != nil:
		s.cur.batch.rx.free <- s.cur.batch
	case s.cur.free != nil:
		s.cur.free <- s.cur.msg
	}
	s.cur = unit{}
}

// KernelDrops implements capture.DropCounter: datagrams the kernel dropped
// because a socket's buffer was full.
func (s *source) KernelDrops() (uint64, error) {
	var d uint64
	for _, rx := range s.rxs {
		d += rx.drops()
	}
	s.stats.kernelDrops.Store(d)
	return d, nil
}

// stop makes the UDP sockets take no more datagrams and fixes their
// kernel drop counts; their readers then read what the sockets hold
// without waiting.
func (s *source) stop() {
	s.stopOnce.Do(func() {
		for _, rx := range s.rxs {
			rx.stop()
		}
	})
}

// drain implements Collector.Drain.
func (s *source) drain() {
	s.drainOnce.Do(func() {
		s.stop()
		s.KernelDrops()
		for _, tl := range s.tls {
			tl.drain()
		}
		go func() {
			s.wg.Wait()
			close(s.drained)
		}()
	})
}

// Close closes every socket and listener and waits for their readers; a
// Next blocked in a wait returns capture.ErrClosed. What was received
// and is not decoded is counted: the datagrams the sockets hold and the
// batches their readers hold (by the readers, which read the sockets to
// their end first), then the units queued for Next and what is left of
// the one Next was decoding.
func (s *source) Close() error {
	var err error
	s.once.Do(func() {
		s.stop() // before done: a reader that sees done counts what its socket holds, which takes no more
		s.KernelDrops()
		close(s.done)
		var errs []error
		for _, tl := range s.tls {
			errs = append(errs, tl.close())
		}
		s.wg.Wait()
		for _, rx := range s.rxs {
			s.stats.shutdown(rx.lateDrops())
			errs = append(errs, rx.close())
		}
	queued:
		for {
			select {
			case u := <-s.units:
				s.stats.shutdown(u.datagrams())
			default:
				break queued
			}
		}
		if n := s.pending.Swap(closedPending); n > 0 {
			s.stats.errors[errShutdown].Add(uint64(n)) // counted as datagrams when taken
		}
		for _, e := range errs {
			if e != nil && err == nil {
				err = e
			}
		}
	})
	return err
}

// shutdown counts n datagrams (or TCP messages) received and not decoded
// because the source closed.
func (st *sourceStats) shutdown(n uint64) {
	if n != 0 {
		st.datagrams.Add(n)
		st.errors[errShutdown].Add(n)
	}
}

// readUDP hands rx's batches of datagrams to the source until rx is
// drained (after stop: what it held is handed on) or closed. When the
// source closes, it counts what it holds and what the socket holds as
// Shutdown.
func (s *source) readUDP(rx *receiver, proto Protocol) {
	for {
		var b *datagrams
		select {
		case b = <-rx.free:
		case <-s.done:
			s.stats.shutdown(rx.discard())
			return
		}
		if err := rx.recv(b); err != nil {
			rx.free <- b
			if isClosed(s.done) {
				s.stats.shutdown(rx.discard())
			}
			return // drained, or closed
		}
		if isClosed(s.done) {
			s.stats.shutdown(uint64(b.n))
			rx.free <- b
			s.stats.shutdown(rx.discard())
			return
		}
		select {
		case s.units <- unit{batch: b, proto: proto}:
		case <-s.done:
			s.stats.shutdown(uint64(b.n))
			rx.free <- b
			s.stats.shutdown(rx.discard())
			return
		}
	}
}

// allowed reports whether addr is in one of the prefixes, or the list is
// empty.
func allowed(allow []netip.Prefix, addr netip.Addr) bool {
	if len(allow) == 0 {
		return true
	}
	for _, p := range allow {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

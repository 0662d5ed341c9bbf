package collect

import (
	"net/netip"
	"sync"
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
	batch *batch // UDP
	proto Protocol
	// TCP: the message, in a buffer of tl's, and its connection's
	// exporter (a session of its own).
	msg []byte
	exp *exporter
	tl  *tcpListener
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

	cur unit // being decoded
	i   int  // cur: the next datagram of the batch
}

var (
	_ capture.Source      = (*source)(nil)
	_ capture.DropCounter = (*source)(nil)
)

// Next returns the next flow record (a key) or sFlow sample (a frame) of
// the listeners' datagrams and messages. It returns capture.ErrTimeout
// when nothing came for the poll interval, capture.ErrClosed after Close.
// A packet's Data is valid until the next call.
func (s *source) Next(p *capture.Packet) error {
	for {
		if s.next(p) {
			return nil
		}
		if b := s.cur.batch; b != nil && s.i < b.n {
			s.datagram(b, s.i)
			s.i++
			continue
		}
		s.release()
		select {
		case s.cur = <-s.units:
		default:
			s.timer.Reset(s.timeout)
			select {
			case s.cur = <-s.units:
				s.timer.Stop()
			case <-s.timer.C:
				return errTimeout
			case <-s.done:
				s.timer.Stop()
				return errClosed
			}
		}
		s.i = 0
		if s.cur.batch != nil {
			s.stats.datagrams.Add(uint64(s.cur.batch.n))
		} else {
			s.stats.datagrams.Add(1)
			s.startNetFlow(s.cur.msg, s.cur.exp, time.Now().UnixNano())
		}
	}
}

// datagram starts decoding datagram i of batch b.
func (s *source) datagram(b *batch, i int) {
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

// release gives the unit just decoded back to its input.
func (s *source) release() {
	switch {
	case s.cur.batch != nil:
		s.cur.batch.rx.free <- s.cur.batch
	case s.cur.tl != nil:
		s.cur.tl.free <- s.cur.msg[:cap(s.cur.msg)]
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

// Close closes every socket and listener and waits for their readers; a
// Next blocked in a wait returns capture.ErrClosed.
func (s *source) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		var errs []error
		for _, rx := range s.rxs {
			errs = append(errs, rx.close())
		}
		for _, tl := range s.tls {
			errs = append(errs, tl.close())
		}
		s.wg.Wait()
		for _, e := range errs {
			if e != nil && err == nil {
				err = e
			}
		}
	})
	return err
}

// readUDP hands rx's batches of datagrams to the source until rx closes.
func (s *source) readUDP(rx *receiver, proto Protocol) {
	for {
		var b *batch
		select {
		case b = <-rx.free:
		case <-s.done:
			return
		}
		if err := rx.recv(b); err != nil {
			return // closed
		}
		select {
		case s.units <- unit{batch: b, proto: proto}:
		case <-s.done:
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

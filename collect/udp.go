package collect

import (
	"net"
	"net/netip"
	"time"

	"github.com/flowdedup/flowdedup/capture"
)

var (
	errTimeout    = capture.ErrTimeout
	errClosed     = capture.ErrClosed
	errClosedConn = net.ErrClosed // closing a closed socket
)

// udpSource is a capture.Source over one UDP socket: it receives
// datagrams in batches and decodes them record by record as the pipeline
// asks. Everything per datagram and per record happens in the goroutine
// that calls Next; nothing allocates but a new exporter's state.
type udpSource struct {
	decoder
	proto Protocol
	rx    *receiver
	allow []netip.Prefix
	exps  exporters
	i, n  int   // the next datagram of the batch, and the batch's size
	now   int64 // when the batch came
}

var (
	_ capture.Source      = (*udpSource)(nil)
	_ capture.DropCounter = (*udpSource)(nil)
)

// Next returns the next record (a key) or sFlow sample (a frame) of the
// socket's datagrams. It returns capture.ErrTimeout when no datagram came
// for the poll interval, capture.ErrClosed after Close. A packet's Data is
// valid until the next call.
func (s *udpSource) Next(p *capture.Packet) error {
	for {
		if s.next(p) {
			return nil
		}
		if s.i == s.n {
			n, err := s.rx.recv()
			if err != nil {
				s.i, s.n = 0, 0
				return err
			}
			s.i, s.n, s.now = 0, n, time.Now().UnixNano()
			s.stats.datagrams.Add(uint64(n))
		}
		b, from, truncated := s.rx.datagram(s.i)
		s.i++
		switch {
		case truncated:
			s.stats.errors[errOversize].Add(1)
			continue
		case !allowed(s.allow, from):
			s.stats.errors[errRejected].Add(1)
			continue
		}
		e := s.exps.get(from)
		if s.proto == SFlow {
			s.startSFlow(b, e, s.now)
		} else {
			s.startNetFlow(b, e)
		}
	}
}

// KernelDrops implements capture.DropCounter: datagrams the kernel dropped
// because the socket's buffer was full.
func (s *udpSource) KernelDrops() (uint64, error) {
	d := s.rx.drops()
	s.stats.kernelDrops.Store(d)
	return d, nil
}

// Close closes the socket; a Next blocked in it returns capture.ErrClosed.
func (s *udpSource) Close() error { return s.rx.close() }

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

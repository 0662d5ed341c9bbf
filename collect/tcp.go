package collect

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/flowdedup/flowdedup/capture"
)

// TCP limits.
const (
	// tcpBuffers is how many IPFIX messages (of up to 64 KiB each) wait
	// between the connections' readers and the decoder: when all are
	// taken, the readers stop reading and TCP flow control makes the
	// exporters wait (an edge flowdedup spools), so nothing is lost.
	tcpBuffers = 64
	// maxConns bounds the connections at once; more are closed at once.
	maxConns = 1024
)

// tcpSource is a capture.Source of IPFIX over TCP (RFC 7011 section
// 10.4): a goroutine per connection reads whole messages into buffers,
// and Next decodes them. Each connection is a transport session of its
// own, with its own templates.
type tcpSource struct {
	decoder
	ln      net.Listener
	allow   []netip.Prefix
	timeout time.Duration
	msgs    chan tcpMessage
	free    chan []byte
	done    chan struct{}
	timer   *time.Timer
	cur     []byte // the buffer of the message being decoded

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	once   sync.Once
}

// tcpMessage is one IPFIX message of a connection.
type tcpMessage struct {
	exp *exporter // the connection's: its own session
	b   []byte
}

var _ capture.Source = (*tcpSource)(nil)

func listenTCP(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

func newTCPSource(ln net.Listener, d decoder, allow []netip.Prefix, timeout time.Duration) *tcpSource {
	s := &tcpSource{
		decoder: d, ln: ln, allow: allow, timeout: timeout,
		msgs:  make(chan tcpMessage, tcpBuffers),
		free:  make(chan []byte, tcpBuffers),
		done:  make(chan struct{}),
		timer: time.NewTimer(time.Hour),
		conns: make(map[net.Conn]struct{}),
	}
	s.timer.Stop()
	for range tcpBuffers {
		s.free <- make([]byte, maxDatagram)
	}
	s.wg.Go(s.accept)
	return s
}

// accept takes connections until the listener closes.
func (s *tcpSource) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-s.done:
				return
			case <-time.After(10 * time.Millisecond): // EMFILE and the like: do not spin
			}
			continue
		}
		addr, _ := netip.ParseAddrPort(c.RemoteAddr().String())
		from := addr.Addr().Unmap()
		s.mu.Lock()
		full := len(s.conns) >= maxConns || s.closed
		if !full && allowed(s.allow, from) {
			s.conns[c] = struct{}{}
		}
		_, ok := s.conns[c]
		s.mu.Unlock()
		if !ok {
			if !full {
				s.stats.errors[errRejected].Add(1)
			}
			c.Close()
			continue
		}
		s.stats.connections.Add(1)
		e := &exporter{addr: from}
		s.wg.Go(func() { s.read(c, e) })
	}
}

// read reads c's messages until it closes or fails.
func (s *tcpSource) read(c net.Conn, e *exporter) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	var hdr [ipfixHeaderLen]byte
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.stats.errors[errTruncated].Add(1)
			}
			return
		}
		n := int(binary.BigEndian.Uint16(hdr[2:]))
		if binary.BigEndian.Uint16(hdr[:]) != 10 || n < ipfixHeaderLen {
			// Not IPFIX, or a length that cannot be: the stream's
			// framing is lost.
			s.stats.errors[errBadVersion].Add(1)
			return
		}
		var b []byte
		select {
		case b = <-s.free:
		case <-s.done:
			return
		}
		copy(b, hdr[:])
		if _, err := io.ReadFull(c, b[ipfixHeaderLen:n]); err != nil {
			s.stats.errors[errTruncated].Add(1)
			s.free <- b
			return
		}
		select {
		case s.msgs <- tcpMessage{exp: e, b: b[:n]}:
		case <-s.done:
			return
		}
	}
}

// Next returns the next record of the connections' messages, in the order
// their messages came; capture.ErrTimeout when none came for the poll
// interval, capture.ErrClosed after Close.
func (s *tcpSource) Next(p *capture.Packet) error {
	for {
		if s.next(p) {
			return nil
		}
		if s.cur != nil {
			s.free <- s.cur[:cap(s.cur)]
			s.cur = nil
		}
		var m tcpMessage
		select {
		case m = <-s.msgs:
		default:
			s.timer.Reset(s.timeout)
			select {
			case m = <-s.msgs:
				s.timer.Stop()
			case <-s.timer.C:
				return errTimeout
			case <-s.done:
				s.timer.Stop()
				return errClosed
			}
		}
		s.cur = m.b
		s.stats.datagrams.Add(1)
		s.startNetFlow(m.b, m.exp)
	}
}

// Close stops accepting, closes the connections and waits for their
// readers. Messages read but not decoded are dropped.
func (s *tcpSource) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		err = s.ln.Close()
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return err
}

// ipfixHeaderLen is the length of an IPFIX message header.
const ipfixHeaderLen = 16

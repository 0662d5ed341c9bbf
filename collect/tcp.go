package collect

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// TCP limits.
const (
	// tcpBuffers is how many whole IPFIX messages of a listener's
	// connections may wait for the source (room in its channel): when it
	// is full, the readers of the connections with a message read wait,
	// and TCP flow control makes their exporters wait (an edge flowdedup
	// spools meanwhile), so nothing is lost.
	tcpBuffers = 64
	// maxConns bounds a listener's connections at once; more are closed
	// at once (counted, TCPRefused).
	maxConns = 1024
	// ipfixHeaderLen is the length of an IPFIX message header.
	ipfixHeaderLen = 16
	// tcpMinBuffer is the buffer a connection's first message is read
	// into; it grows, by doubling, to the connection's longest message,
	// as the message's bytes come.
	tcpMinBuffer = 4 << 10
)

// tcpListener takes IPFIX over TCP (RFC 7011 section 10.4): a goroutine
// per connection reads whole messages into a buffer of the connection's
// own and hands them to the source, one at a time. A connection holds
// nothing shared until a message of it is whole: a stalled or idle one
// (closed after the message or idle timeout) cannot keep the others'
// messages from being read. Each connection is a transport session of
// its own, with its own templates, dropped (their bytes back in the
// template budget) once it closes.
type tcpListener struct {
	ln     net.Listener
	src    *source
	idle   time.Duration // no message began for that long: closed
	msgMax time.Duration // a message began and is not whole within that: closed
	// drainAt, when not 0, is the time (Unix ns) by which every read ends:
	// Drain's.
	drainAt atomic.Int64
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	done    bool
}

func listenTCP(addr string, idle, msgMax time.Duration) (*tcpListener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &tcpListener{ln: ln, idle: idle, msgMax: msgMax, conns: make(map[net.Conn]struct{})}, nil
}

// accept takes connections until the listener closes.
func (tl *tcpListener) accept() {
	s := tl.src
	for {
		c, err := tl.ln.Accept()
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
		if !allowed(s.allow, from) {
			s.stats.errors[errRejected].Add(1)
			c.Close()
			continue
		}
		tl.mu.Lock()
		ok := len(tl.conns) < maxConns && !tl.done
		if ok {
			tl.conns[c] = struct{}{}
		}
		tl.mu.Unlock()
		if !ok {
			s.stats.tcpRefused.Add(1)
			c.Close()
			continue
		}
		s.stats.connections.Add(1)
		s.stats.tcpOpen.Add(1)
		e := &exporter{addr: from}
		s.wg.Go(func() { tl.read(c, e) })
	}
}

// read reads c's messages until it closes, fails, times out or the source
// stops. Once it ends, the source forgets the connection's session: its
// templates leave the budget at once (RFC 7011: a transport session's
// templates end with it).
func (tl *tcpListener) read(c net.Conn, e *exporter) {
	s := tl.src
	delivered := false // a message went to the source: e has a session
	defer func() {
		c.Close()
		if delivered {
			// After the connection's messages in the channel: the
			// source decodes them first, then drops the session. Before
			// the connection stops counting as open (and against the
			// limit): once none is, every closed one's session is
			// dropped or queued to be, and the sessions waiting to be
			// dropped are bounded as the connections are.
			select {
			case s.units <- unit{exp: e, closed: true}:
			case <-s.done: // the source is closing: its budget with it
			}
		}
		tl.mu.Lock()
		delete(tl.conns, c)
		tl.mu.Unlock()
		s.stats.tcpOpen.Add(-1)
	}()
	// The connection's buffer: with the source while it decodes a message,
	// back in free after.
	free := make(chan []byte, 1)
	var b []byte
	for {
		if b == nil {
			b = make([]byte, 0, tcpMinBuffer)
		}
		// Wait for a message to begin: the idle timeout.
		tl.deadline(c, tl.idle)
		n, err := c.Read(b[:ipfixHeaderLen])
		if err != nil {
			tl.failed(c, err, false)
			return
		}
		// It began: it must be whole within the message timeout.
		tl.deadline(c, tl.msgMax)
		if _, err := io.ReadFull(c, b[n:ipfixHeaderLen]); err != nil {
			tl.failed(c, err, true)
			return
		}
		hdr := b[:ipfixHeaderLen]
		length := int(binary.BigEndian.Uint16(hdr[2:]))
		if binary.BigEndian.Uint16(hdr) != 10 || length < ipfixHeaderLen {
			// Not IPFIX, or a length that cannot be: the stream's
			// framing is lost.
			s.stats.errors[errBadVersion].Add(1)
			return
		}
		if b, err = readBody(c, b[:ipfixHeaderLen], length); err != nil {
			tl.failed(c, err, true)
			return
		}
		select {
		case s.units <- unit{msg: b, exp: e, free: free}:
			delivered = true
		case <-s.done:
			s.stats.shutdown(1)
			return
		}
		select {
		case b = <-free:
			b = b[:0]
		case <-s.done:
			return
		}
	}
}

// readBody reads the rest of a message of length bytes whose header b
// holds, growing b as its bytes come, and returns it.
func readBody(c net.Conn, b []byte, length int) ([]byte, error) {
	for len(b) < length {
		if len(b) == cap(b) {
			nb := make([]byte, len(b), min(length, 2*cap(b)))
			copy(nb, b)
			b = nb
		}
		n, err := c.Read(b[len(b):min(length, cap(b))])
		b = b[:len(b)+n]
		if err != nil && len(b) < length {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return b, err
		}
	}
	return b, nil
}

// deadline sets c's read deadline d from now, or Drain's if earlier. It
// sets, then looks for Drain's: a Drain that stored its time after the
// look sets it on c after this did.
func (tl *tcpListener) deadline(c net.Conn, d time.Duration) {
	t := time.Now().Add(d)
	c.SetReadDeadline(t)
	if at := tl.drainAt.Load(); at != 0 && at < t.UnixNano() {
		c.SetReadDeadline(time.Unix(0, at))
	}
}

// failed counts why a read of c failed: within a message (begun) or
// between two.
func (tl *tcpListener) failed(c net.Conn, err error, begun bool) {
	st := tl.src.stats
	stopping := tl.drainAt.Load() != 0 || isClosed(tl.src.done)
	switch {
	case stopping:
		// Partly received when the collector stopped, or received by
		// the kernel and not read in time (Drain's grace).
		if begun || (errors.Is(err, os.ErrDeadlineExceeded) && unread(c) > 0) {
			st.shutdown(1)
		}
	case errors.Is(err, os.ErrDeadlineExceeded):
		if begun {
			st.tcpStalled.Add(1)
		} else {
			st.tcpIdle.Add(1)
		}
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		// The exporter closed between two messages.
	case begun:
		st.errors[errTruncated].Add(1)
	}
}

// drain stops accepting and makes every read end within tcpDrainGrace.
func (tl *tcpListener) drain() {
	at := time.Now().Add(tcpDrainGrace)
	tl.drainAt.Store(at.UnixNano())
	tl.ln.Close()
	tl.mu.Lock()
	tl.done = true
	for c := range tl.conns {
		c.SetReadDeadline(at)
	}
	tl.mu.Unlock()
}

// close stops accepting and closes the connections.
func (tl *tcpListener) close() error {
	err := tl.ln.Close()
	tl.mu.Lock()
	tl.done = true
	for c := range tl.conns {
		c.Close()
	}
	tl.mu.Unlock()
	if errors.Is(err, net.ErrClosed) {
		err = nil // drained before
	}
	return err
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

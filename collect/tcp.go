package collect

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// TCP limits.
const (
	// tcpBuffers is how many IPFIX messages (of up to 64 KiB each) of a
	// listener's connections may wait for the source: when all are taken,
	// the readers stop reading and TCP flow control makes the exporters
	// wait (an edge flowdedup spools meanwhile), so nothing is lost.
	tcpBuffers = 64
	// maxConns bounds a listener's connections at once; more are closed
	// at once.
	maxConns = 1024
	// ipfixHeaderLen is the length of an IPFIX message header.
	ipfixHeaderLen = 16
)

// tcpListener takes IPFIX over TCP (RFC 7011 section 10.4): a goroutine
// per connection reads whole messages into the listener's buffers and
// hands them to the source. Each connection is a transport session of its
// own, with its own templates.
type tcpListener struct {
	ln    net.Listener
	src   *source
	free  chan []byte
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
}

func listenTCP(addr string) (*tcpListener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	tl := &tcpListener{ln: ln, free: make(chan []byte, tcpBuffers), conns: make(map[net.Conn]struct{})}
	for range tcpBuffers {
		tl.free <- make([]byte, maxDatagram)
	}
	return tl, nil
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
			c.Close()
			continue
		}
		s.stats.connections.Add(1)
		e := &exporter{addr: from}
		s.wg.Go(func() { tl.read(c, e) })
	}
}

// read reads c's messages until it closes or fails.
func (tl *tcpListener) read(c net.Conn, e *exporter) {
	s := tl.src
	defer func() {
		tl.mu.Lock()
		delete(tl.conns, c)
		tl.mu.Unlock()
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
		case b = <-tl.free:
		case <-s.done:
			return
		}
		copy(b, hdr[:])
		if _, err := io.ReadFull(c, b[ipfixHeaderLen:n]); err != nil {
			s.stats.errors[errTruncated].Add(1)
			tl.free <- b
			return
		}
		select {
		case s.units <- unit{msg: b[:n], exp: e, tl: tl}:
		case <-s.done:
			return
		}
	}
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
	return err
}

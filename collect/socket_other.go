//go:build !linux

package collect

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"time"
)

// receiver reads one datagram at a time from a UDP socket: the portable
// fallback of the Linux receiver (recvmmsg, SO_REUSEPORT, SO_RXQ_OVFL),
// for replay-only platforms that still build collect.
type receiver struct {
	conn    *net.UDPConn
	buf     []byte
	n       int
	from    netip.Addr
	trunc   bool
	timeout time.Duration
}

func listenUDP(addr string, rcvbuf int, timeout time.Duration) (*receiver, int, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, 0, err
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, 0, err
	}
	granted := rcvbuf
	if conn.SetReadBuffer(rcvbuf) != nil {
		granted = 0
	}
	return &receiver{conn: conn, buf: make([]byte, maxDatagram+1), timeout: timeout}, granted, nil
}

const maxDatagram = 65535

func (r *receiver) recv() (int, error) {
	r.conn.SetReadDeadline(time.Now().Add(r.timeout))
	n, _, _, from, err := r.conn.ReadMsgUDPAddrPort(r.buf, nil)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return 0, errTimeout
	case err != nil:
		return 0, errClosed
	}
	r.n, r.from, r.trunc = n, from.Addr().Unmap(), n > maxDatagram
	return 1, nil
}

func (r *receiver) datagram(int) ([]byte, netip.Addr, bool) {
	return r.buf[:min(r.n, maxDatagram)], r.from, r.trunc
}

func (r *receiver) drops() uint64 { return 0 }

func (r *receiver) close() error { return r.conn.Close() }

func (r *receiver) localAddr() net.Addr { return r.conn.LocalAddr() }

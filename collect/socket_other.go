//go:build !linux

package collect

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"
)

// receiver reads one datagram at a time from a UDP socket: the portable
// fallback of the Linux receiver (recvmmsg, SO_REUSEPORT, SO_RXQ_OVFL),
// for replay-only platforms that still build collect.
type receiver struct {
	conn *net.UDPConn
	free chan *datagrams
	ovfl atomic.Uint32
	// stopped: the reader reads for drainWait more, then ends
	// (errDrained); there is no socket filter to stop the intake here.
	stopped atomic.Bool
}

// drainWait is how long a stopped receiver reads on.
const drainWait = 20 * time.Millisecond

// errDrained: the receiver stopped and read what came within drainWait.
var errDrained = errors.New("collect: socket drained")

// datagrams holds one datagram (a batch of one).
type datagrams struct {
	rx    *receiver
	buf   []byte
	n     int // datagrams: 1
	len   int
	from  netip.Addr
	trunc bool
	now   int64
}

const (
	maxDatagram      = 65535
	batchesPerSocket = 64
)

func listenUDP(addr string, rcvbuf int) (*receiver, int, error) {
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
	r := &receiver{conn: conn, free: make(chan *datagrams, batchesPerSocket)}
	for range batchesPerSocket {
		r.free <- &datagrams{rx: r, buf: make([]byte, maxDatagram+1)}
	}
	return r, granted, nil
}

func (r *receiver) recv(b *datagrams) error {
	n, _, _, from, err := r.conn.ReadMsgUDPAddrPort(b.buf, nil)
	if err != nil {
		if r.stopped.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
			return errDrained
		}
		return errClosed
	}
	b.n, b.len, b.from, b.trunc, b.now = 1, min(n, maxDatagram), from.Addr().Unmap(), n > maxDatagram, time.Now().UnixNano()
	return nil
}

func (b *datagrams) datagram(int) ([]byte, netip.Addr, bool) { return b.buf[:b.len], b.from, b.trunc }

func (r *receiver) drops() uint64 { return 0 }

// dropCountErr: this platform counts no kernel drops.
func (r *receiver) dropCountErr() error { return errNoDropCount }

var errNoDropCount = errors.New("no kernel drop count on this platform")

func (r *receiver) stop() {
	r.stopped.Store(true)
	r.conn.SetReadDeadline(time.Now().Add(drainWait))
}

func (r *receiver) lateDrops() uint64 { return 0 }

func unread(net.Conn) int { return 0 }

// discard counts nothing: what the socket holds is lost at its close
// without a number here (Linux counts it).
func (r *receiver) discard() uint64 { return 0 }

func (r *receiver) close() error { return r.conn.Close() }

func (r *receiver) localAddr() net.Addr { return r.conn.LocalAddr() }

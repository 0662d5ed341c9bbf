package ipfix

import (
	"net"
	"syscall"
)

// pathMTU returns the path MTU the kernel holds for the connected UDP
// socket c (IP_MTU, IPV6_MTU: the route's MTU, lowered by any ICMP
// "fragmentation needed" or "packet too big" seen since), or 0 when it
// cannot tell.
func pathMTU(c *net.UDPConn, v6 bool) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	mtu := 0
	ctrl := rc.Control(func(fd uintptr) {
		level, opt := syscall.IPPROTO_IP, syscall.IP_MTU
		if v6 {
			level, opt = syscall.IPPROTO_IPV6, syscall.IPV6_MTU
		}
		if v, err := syscall.GetsockoptInt(int(fd), level, opt); err == nil {
			mtu = v
		}
	})
	if ctrl != nil {
		return 0
	}
	return mtu
}

// peeker tells whether the peer of a TCP connection has closed it, without
// blocking and without consuming data: a collector never sends anything to
// an exporter, so a readable socket means end of stream or an error.
type peeker struct {
	rc     syscall.RawConn
	fn     func(fd uintptr) bool // p.peek, bound once so that a check does not allocate
	closed bool
	buf    [1]byte
}

func newPeeker(c *net.TCPConn) *peeker {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	p := &peeker{rc: rc}
	p.fn = p.peek
	return p
}

func (p *peeker) peek(fd uintptr) bool {
	n, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case err == syscall.EAGAIN || err == syscall.EINTR:
		p.closed = false // nothing to read: the connection is open
	case err != nil:
		p.closed = true // ECONNRESET and the like
	default:
		p.closed = n == 0 // end of stream; data (n > 0) is ignored
	}
	return true
}

// peerClosed reports whether the collector closed the connection.
func (p *peeker) peerClosed() bool {
	if p == nil {
		return false
	}
	if err := p.rc.Read(p.fn); err != nil {
		return true
	}
	return p.closed
}

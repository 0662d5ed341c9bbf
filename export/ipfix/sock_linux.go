package ipfix

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
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

// rawConn reads the acknowledged byte count of a TCP connection's socket,
// without allocating: the TCP_INFO buffer and the function given to
// RawConn.Control are made once per connection.
type rawConn = *acker

type acker struct {
	rc syscall.RawConn
	fn func(fd uintptr)
	ti unix.TCPInfo
	ok bool
}

func newRawConn(c *net.TCPConn) (rawConn, bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, false
	}
	a := &acker{rc: rc}
	a.fn = a.read
	return a, true
}

func (a *acker) read(fd uintptr) {
	// unix.GetsockoptTCPInfo allocates its result: the same call into a
	// buffer of our own.
	n := uint32(unsafe.Sizeof(a.ti))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.IPPROTO_TCP, unix.TCP_INFO,
		uintptr(unsafe.Pointer(&a.ti)), uintptr(unsafe.Pointer(&n)), 0)
	// Kernels before 4.1 fill a shorter struct, without tcpi_bytes_acked.
	a.ok = errno == 0 && uintptr(n) >= unsafe.Offsetof(a.ti.Bytes_acked)+unsafe.Sizeof(a.ti.Bytes_acked)
}

// bytesAcked returns the bytes of the stream the peer's host has
// acknowledged (TCP_INFO tcpi_bytes_acked, Linux 4.1 and later; 1 for the
// SYN once connected), and false when the kernel does not say.
func bytesAcked(a rawConn) (uint64, bool) {
	if a == nil || a.rc.Control(a.fn) != nil || !a.ok {
		return 0, false
	}
	return a.ti.Bytes_acked, true
}

//go:build linux

package collect

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// batchSize is how many datagrams one recvmmsg(2) takes at most: a
// router's burst of 30-record datagrams is 1,000 records per system call.
const batchSize = 32

// maxDatagram is the longest datagram read whole (a UDP payload's limit);
// a longer one is counted as Oversize.
const maxDatagram = 65535

// mmsghdr is struct mmsghdr of recvmmsg(2): Go lays it out as C does (the
// trailing padding on 64-bit platforms included).
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

// receiver reads batches of datagrams from one UDP socket with
// recvmmsg(2), through the Go runtime's poller so that a read deadline
// and Close wake it.
type receiver struct {
	conn    *net.UDPConn
	raw     syscall.RawConn
	msgs    []mmsghdr
	iovs    []unix.Iovec
	bufs    []byte // batchSize buffers of maxDatagram bytes
	names   []unix.RawSockaddrInet6
	control []byte // batchSize control buffers of ctlLen bytes
	ctlLen  int
	n       int   // datagrams of the last batch
	errno   error // of the last recvmmsg
	readFn  func(fd uintptr) bool
	ovfl    uint32 // the largest SO_RXQ_OVFL count seen
	timeout time.Duration
}

// listenUDP opens one UDP socket bound to addr with SO_REUSEPORT (so that
// several sockets share the port and the kernel spreads exporters over
// them), a receive buffer of rcvbuf bytes (SO_RCVBUFFORCE where the
// process has CAP_NET_ADMIN, else SO_RCVBUF, which the kernel caps at
// net.core.rmem_max) and SO_RXQ_OVFL. It returns the receive buffer the
// kernel granted, which the caller compares with what it asked.
func listenUDP(addr string, rcvbuf int, timeout time.Duration) (*receiver, int, error) {
	var granted int
	lc := net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			s := int(fd)
			if serr = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); serr != nil {
				serr = fmt.Errorf("SO_REUSEPORT: %w", serr)
				return
			}
			if rcvbuf > 0 {
				if unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf) != nil {
					if serr = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf); serr != nil {
						serr = fmt.Errorf("SO_RCVBUF: %w", serr)
						return
					}
				}
			}
			if serr = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1); serr != nil {
				serr = fmt.Errorf("SO_RXQ_OVFL: %w", serr)
				return
			}
			// The kernel doubles what it is given (for its bookkeeping)
			// and reports the doubled size.
			v, gerr := unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF)
			if gerr == nil {
				granted = v / 2
			}
		})
		return errors.Join(err, serr)
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp", addr)
	if err != nil {
		return nil, 0, err
	}
	conn := pc.(*net.UDPConn)
	raw, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, 0, err
	}
	r := &receiver{
		conn:    conn,
		raw:     raw,
		msgs:    make([]mmsghdr, batchSize),
		iovs:    make([]unix.Iovec, batchSize),
		bufs:    make([]byte, batchSize*maxDatagram),
		names:   make([]unix.RawSockaddrInet6, batchSize),
		ctlLen:  unix.CmsgSpace(4),
		timeout: timeout,
	}
	r.control = make([]byte, batchSize*r.ctlLen)
	for i := range r.msgs {
		r.iovs[i].Base = &r.bufs[i*maxDatagram]
		r.iovs[i].SetLen(maxDatagram)
		h := &r.msgs[i].hdr
		h.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		h.Iov = &r.iovs[i]
		h.SetIovlen(1)
		h.Control = &r.control[i*r.ctlLen]
	}
	r.readFn = r.read
	return r, granted, nil
}

// recv waits up to the timeout for datagrams and reads a batch of them.
// It returns capture.ErrTimeout (as errTimeout) when none came and
// errClosed after close.
func (r *receiver) recv() (int, error) {
	if err := r.conn.SetReadDeadline(time.Now().Add(r.timeout)); err != nil {
		return 0, errClosed
	}
	err := r.raw.Read(r.readFn)
	switch {
	case err == nil && r.errno == nil:
		return r.n, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return 0, errTimeout
	case err != nil:
		return 0, errClosed
	}
	return 0, fmt.Errorf("recvmmsg: %w", r.errno)
}

// read is the RawConn.Read callback: one recvmmsg(2), false to wait when
// nothing is there.
func (r *receiver) read(fd uintptr) bool {
	for i := range r.msgs {
		h := &r.msgs[i].hdr
		h.Namelen = uint32(unsafe.Sizeof(r.names[0]))
		h.SetControllen(r.ctlLen)
		h.Flags = 0
	}
	n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.msgs[0])), uintptr(len(r.msgs)), unix.MSG_DONTWAIT, 0, 0)
	switch e {
	case 0:
		r.n, r.errno = int(n), nil
		return true
	case unix.EAGAIN:
		return false
	case unix.EINTR:
		r.n, r.errno = 0, nil
		return true
	}
	r.n, r.errno = 0, e
	return true
}

// datagram returns datagram i of the last batch, in the receiver's buffer
// (valid until the next recv), its source address, and whether it was
// longer than the buffer.
func (r *receiver) datagram(i int) (b []byte, from netip.Addr, truncated bool) {
	m := &r.msgs[i]
	b = r.bufs[i*maxDatagram : i*maxDatagram+int(m.n)]
	name := &r.names[i]
	switch name.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(name))
		from = netip.AddrFrom4(sa.Addr)
	case unix.AF_INET6:
		from = netip.AddrFrom16(name.Addr).Unmap()
	}
	if m.hdr.Controllen > 0 {
		// SO_RXQ_OVFL: the socket's drop count when the datagram was
		// queued.
		c := r.control[i*r.ctlLen : (i+1)*r.ctlLen]
		h := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SO_RXQ_OVFL {
			if v := binary.NativeEndian.Uint32(c[unix.CmsgLen(0):]); v-r.ovfl < 1<<31 {
				r.ovfl = v
			}
		}
	}
	return b, from, m.hdr.Flags&unix.MSG_TRUNC != 0
}

// drops returns the datagrams the kernel dropped on this socket for want
// of room in its buffer: the larger of what SO_RXQ_OVFL said and what
// SO_MEMINFO says now (drops after the last datagram read show there).
func (r *receiver) drops() uint64 {
	d := r.ovfl
	r.raw.Control(func(fd uintptr) {
		var mem [unix.SK_MEMINFO_VARS]uint32
		n := uint32(unsafe.Sizeof(mem))
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO, uintptr(unsafe.Pointer(&mem[0])), uintptr(unsafe.Pointer(&n)), 0)
		if e == 0 && n >= (unix.SK_MEMINFO_DROPS+1)*4 {
			d = max(d, mem[unix.SK_MEMINFO_DROPS])
		}
	})
	return uint64(d)
}

func (r *receiver) close() error { return r.conn.Close() }

func (r *receiver) localAddr() net.Addr { return r.conn.LocalAddr() }

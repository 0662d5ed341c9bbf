//go:build linux

package collect

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
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

// batchesPerSocket is how many batches a socket's reader may fill ahead of
// the decoding source (the rest waits in the kernel's socket buffer).
const batchesPerSocket = 4

// receiver reads batches of datagrams from one UDP socket with
// recvmmsg(2), through the Go runtime's poller so that Close wakes a read.
// Its reader goroutine fills the batches of free and hands them to the
// source, which gives them back once decoded.
type receiver struct {
	conn   *net.UDPConn
	raw    syscall.RawConn
	free   chan *datagrams
	cur    *datagrams // the batch being read into
	n      int        // datagrams of the last recvmmsg
	errno  error
	readFn func(fd uintptr) bool
	ovfl   atomic.Uint32 // the largest SO_RXQ_OVFL count seen
	ctlLen int
	noOvfl error // why SO_RXQ_OVFL was refused (nil: it was taken)

	// After stop: the socket takes no more datagrams, its drop count is
	// final (the filter's drops are of datagrams that came after), and
	// the reader reads what it holds without waiting, at most
	// maxQueuedBatches recvmmsg calls (with no filter, a flood could
	// otherwise keep it reading).
	stopped    atomic.Bool
	finalDrops uint32     // written before stopped is set
	queued     int        // recvmmsg calls after stop
	sink       *datagrams // small buffers: datagrams counted, not kept
}

// maxQueuedBatches bounds the batches read from a socket after stop: more
// than a 2 GiB receive buffer holds.
const maxQueuedBatches = 1 << 16

// datagrams is batchSize datagram buffers with their recvmmsg(2) headers.
type datagrams struct {
	rx      *receiver
	msgs    []mmsghdr
	iovs    []unix.Iovec
	bufs    []byte // batchSize buffers of maxDatagram bytes
	names   []unix.RawSockaddrInet6
	control []byte // batchSize control buffers of rx.ctlLen bytes
	n       int    // datagrams received
	now     int64  // when, Unix ns
}

// listenUDP opens one UDP socket bound to addr with SO_REUSEPORT (so that
// several sockets share the port and the kernel spreads exporters over
// them), a receive buffer of rcvbuf bytes (SO_RCVBUFFORCE where the
// process has CAP_NET_ADMIN, else SO_RCVBUF, which the kernel caps at
// net.core.rmem_max) and SO_RXQ_OVFL. It returns the receive buffer the
// kernel granted, which the caller compares with what it asked.
func listenUDP(addr string, rcvbuf int) (*receiver, int, error) {
	var granted int
	var noOvfl error
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
			// Where the option is unknown (ENOPROTOOPT: qemu-user, which
			// make test-32bit runs the tests under, and some sandboxes)
			// drops() still reads the count from SO_MEMINFO.
			if err := unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1); errors.Is(err, unix.ENOPROTOOPT) {
				noOvfl = err
			} else if err != nil {
				serr = fmt.Errorf("SO_RXQ_OVFL: %w", err)
				return
			}
			// The kernel doubles what it is given (for its bookkeeping)
			// and reports the doubled size.
			if v, gerr := unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF); gerr == nil {
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
	r := &receiver{noOvfl: noOvfl, conn: conn, raw: raw, free: make(chan *datagrams, batchesPerSocket), ctlLen: unix.CmsgSpace(4)}
	for range batchesPerSocket {
		r.free <- r.newBatch(maxDatagram)
	}
	r.readFn = r.read
	return r, granted, nil
}

// newBatch returns a batch of buffers of size bytes.
func (r *receiver) newBatch(size int) *datagrams {
	b := &datagrams{
		rx:      r,
		msgs:    make([]mmsghdr, batchSize),
		iovs:    make([]unix.Iovec, batchSize),
		bufs:    make([]byte, batchSize*size),
		names:   make([]unix.RawSockaddrInet6, batchSize),
		control: make([]byte, batchSize*r.ctlLen),
	}
	for i := range b.msgs {
		b.iovs[i].Base = &b.bufs[i*size]
		b.iovs[i].SetLen(size)
		h := &b.msgs[i].hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Iov = &b.iovs[i]
		h.SetIovlen(1)
		h.Control = &b.control[i*r.ctlLen]
	}
	return b
}

// recv waits for datagrams and reads a batch of them into b. It returns an
// error once the socket is closed, and errDrained after stop once the
// socket holds no more.
func (r *receiver) recv(b *datagrams) error {
	r.cur = b
	for {
		if r.stopped.Load() {
			return r.recvQueued(b)
		}
		if err := r.raw.Read(r.readFn); err != nil {
			if r.stopped.Load() {
				continue // woken by stop: read what the socket holds
			}
			return errClosed
		}
		if r.errno != nil {
			return fmt.Errorf("recvmmsg: %w", r.errno)
		}
		if r.n > 0 {
			b.n, b.now = r.n, time.Now().UnixNano()
			return nil
		}
	}
}

// errDrained: after stop, the socket holds no more datagrams.
var errDrained = errors.New("collect: socket drained")

// recvQueued reads a batch of what the socket holds into b, without
// waiting: errDrained when it holds nothing (or after maxQueuedBatches).
func (r *receiver) recvQueued(b *datagrams) error {
	for range 16 { // EINTR
		if r.queued++; r.queued > maxQueuedBatches {
			return errDrained
		}
		var n int
		var e syscall.Errno
		if err := r.raw.Control(func(fd uintptr) { n, e = recvmmsg(fd, b) }); err != nil {
			return errClosed
		}
		switch {
		case e == unix.EINTR:
			continue
		case e != 0 || n == 0:
			return errDrained // EAGAIN: empty
		}
		b.n, b.now = n, time.Now().UnixNano()
		return nil
	}
	return errDrained
}

// read is the RawConn.Read callback: one recvmmsg(2) into r.cur, false to
// wait when nothing is there.
func (r *receiver) read(fd uintptr) bool {
	n, e := recvmmsg(fd, r.cur)
	switch e {
	case 0:
		r.n, r.errno = n, nil
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

// recvmmsg reads what fd holds into b, up to a batch, without waiting.
func recvmmsg(fd uintptr, b *datagrams) (int, syscall.Errno) {
	for i := range b.msgs {
		h := &b.msgs[i].hdr
		h.Namelen = uint32(unsafe.Sizeof(b.names[0]))
		h.SetControllen(b.rx.ctlLen)
		h.Flags = 0
	}
	n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.msgs[0])), uintptr(len(b.msgs)), unix.MSG_DONTWAIT, 0, 0)
	return int(n), e
}

// stop makes the socket take no more datagrams: a socket filter that
// drops every one (the datagrams it holds stay), then takes the drop
// count, final from now on, and wakes the reader, which then reads what
// the socket holds without waiting (recvQueued). Without the filter (an
// error), the reader still reads no more than maxQueuedBatches.
func (r *receiver) stop() {
	r.raw.Control(func(fd uintptr) {
		prog := [1]unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}
		unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: 1, Filter: &prog[0]})
	})
	r.finalDrops = r.liveDrops()
	r.stopped.Store(true)
	r.conn.SetReadDeadline(time.Now()) // wakes a reader waiting in Read
}

// lateDrops returns the datagrams the socket dropped since stop: those
// its filter dropped, which came after stop, or were on their way (in the
// kernel's backlog) when it was called. For Close, before the socket
// closes.
func (r *receiver) lateDrops() uint64 {
	if !r.stopped.Load() {
		return 0
	}
	return uint64(r.liveDrops() - r.finalDrops)
}

// unread returns the bytes c's socket received that were not read
// (SIOCINQ), 0 when it cannot tell.
func unread(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	raw.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n
}

// discard reads and counts what the socket holds, after stop: datagrams
// received and not to be decoded.
func (r *receiver) discard() uint64 {
	if r.sink == nil {
		r.sink = r.newBatch(1) // truncated: only counted
	}
	var n uint64
	for r.recvQueued(r.sink) == nil {
		n += uint64(r.sink.n)
	}
	return n
}

// datagram returns datagram i of the batch, in its buffer (valid until the
// batch goes back to its receiver), its source address, and whether it was
// longer than the buffer.
func (b *datagrams) datagram(i int) (d []byte, from netip.Addr, truncated bool) {
	m := &b.msgs[i]
	d = b.bufs[i*maxDatagram : i*maxDatagram+int(m.n)]
	name := &b.names[i]
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
		c := b.control[i*b.rx.ctlLen : (i+1)*b.rx.ctlLen]
		h := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SO_RXQ_OVFL {
			v := binary.NativeEndian.Uint32(c[unix.CmsgLen(0):])
			if old := b.rx.ovfl.Load(); v-old < 1<<31 {
				b.rx.ovfl.Store(v) // only the source goroutine stores
			}
		}
	}
	return d, from, m.hdr.Flags&unix.MSG_TRUNC != 0
}

// drops returns the datagrams the kernel dropped on this socket for want
// of room in its buffer: the larger of what SO_RXQ_OVFL said and what
// SO_MEMINFO says now (drops after the last datagram read show there).
func (r *receiver) drops() uint64 {
	if r.stopped.Load() {
		return uint64(max(r.finalDrops, r.ovfl.Load()))
	}
	return uint64(r.liveDrops())
}

func (r *receiver) liveDrops() uint32 {
	d := r.ovfl.Load()
	r.raw.Control(func(fd uintptr) {
		var mem [unix.SK_MEMINFO_VARS]uint32
		n := uint32(unsafe.Sizeof(mem))
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO, uintptr(unsafe.Pointer(&mem[0])), uintptr(unsafe.Pointer(&n)), 0)
		if e == 0 && n >= (unix.SK_MEMINFO_DROPS+1)*4 {
			d = max(d, mem[unix.SK_MEMINFO_DROPS])
		}
	})
	return d
}

func (r *receiver) close() error { return r.conn.Close() }

// dropCountErr says why the kernel's drops on this socket may go
// uncounted: SO_RXQ_OVFL refused (they are read from SO_MEMINFO alone,
// which qemu-user and some sandboxes do not answer either); nil when it
// was taken.
func (r *receiver) dropCountErr() error { return r.noOvfl }

func (r *receiver) localAddr() net.Addr { return r.conn.LocalAddr() }

//go:build linux && !(mips || mips64 || ppc64 || s390x)

package afxdp

// AF_XDP sockets written on golang.org/x/sys/unix, after the kernel's
// Documentation/networking/af_xdp.rst. Each socket has a UMEM of its own
// (anonymous memory cut in frames and registered with XDP_UMEM_REG), a fill
// ring through which user space hands the kernel empty frames, and an RX
// ring through which the kernel hands back filled ones as (address, length)
// descriptors. The kernel wants a completion ring too, for transmission: it
// is made, at its smallest useful size, but never mapped.
//
// The rings are single-producer single-consumer queues of a power-of-two
// size in memory shared with the kernel: the producer writes entries, then
// publishes them by storing its index (release); the consumer loads that
// index (acquire), reads the entries, then frees them by storing its own
// index. Go's sync/atomic operations are sequentially consistent, stronger
// than the acquire and release the protocol needs.
//
// Every frame is always in exactly one place: the fill ring (or the kernel,
// which took it from there), the RX ring, the reader's batch, its current
// packet, or free, a stack of the frames user space owns and has not yet
// given back. The slow path of Next, once per batch, pushes free into the
// fill ring, then copies up to xskBatch descriptors out of the RX ring and
// frees their entries at once, or waits when the RX ring is empty; the fast
// path returns the batch's frames one by one, moving the previous packet's
// frame to free. So a busy socket costs no system call and no allocation
// per frame, and the fast path touches no ring: Close, which waits for the
// slow path, can always unmap the rings and release the socket. Only the
// UMEM may stay mapped after Close, until the reader lets go of its packet.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/internal/sockwait"
	"github.com/flowdedup/flowdedup/capture/xdp"
	"github.com/flowdedup/flowdedup/flow"
)

const (
	// xskBatch is the most RX descriptors a reader takes at once: the
	// fill ring is refilled and the RX ring freed between batches.
	xskBatch = 64
	// xskCompletionRing is the size of the unused completion ring.
	xskCompletionRing = 64
	// xskDescSize is sizeof(struct xdp_desc); a fill ring entry is a u64.
	xskDescSize = int(unsafe.Sizeof(unix.XDPDesc{}))
)

// Source is the AF_XDP socket of one receive queue, read by one
// goroutine. It implements capture.Source and capture.DropCounter.
type Source struct {
	iface       string
	queue       int
	zeroCopy    bool
	pollTimeout time.Duration
	frameMask   uint64 // clears the offset of an address in its frame
	detach      func(queue int)

	res *xskResources

	// The rings, in res's mappings.
	ringMask  uint32
	rxProd    *uint32
	rxCons    *uint32
	rxDescs   []unix.XDPDesc
	fillProd  *uint32
	fillCons  *uint32
	fillFlags *uint32
	fillAddrs []uint64

	// The reader's state, touched only by the goroutine calling Next (and,
	// with mu held, by Close through held).
	umem      []byte // res.umem, for building packets
	batch     [xskBatch]unix.XDPDesc
	batchLen  int      // descriptors in batch
	batchNext int      // the next one to return
	rxHead    uint32   // the local consumer index of the RX ring
	fillHead  uint32   // the local producer index of the fill ring
	fillLimit uint32   // the kernel's consumer index + ring size, as last read
	free      []uint64 // frames user space owns and has not given back
	cur       uint64   // the frame of the last packet returned
	hasCur    bool
	batchTime int64         // TimeNs of the current batch's packets
	held      bool          // the reader may use the UMEM without mu; guarded by mu
	pf        *prefilterMem // the in-kernel prefilter, nil without one
	rnd       uint64        // xorshift state of learn
	fillTotal uint64        // frames ever put in the fill ring
	rxTotal   uint64        // frames ever received in the RX ring, as last read
	rxLast    uint32        // the RX producer index last read

	closed  atomic.Bool
	mu      sync.Mutex // serialises Next's slow path with Close
	statsMu sync.Mutex // guards stats and res.fd against KernelDrops
	stats   unix.XDPStatistics
}

var (
	_ capture.Source      = (*Source)(nil)
	_ capture.DropCounter = (*Source)(nil)
)

// xskResources are the kernel objects of a source, apart from it so that a
// cleanup can release them if the source is dropped without Close.
type xskResources struct {
	fd   int              // the AF_XDP socket, -1 once closed
	wait *sockwait.Waiter // Next waits on the socket here; Close wakes it
	umem []byte           // the UMEM, nil once unmapped
	rx   []byte           // the mapped RX ring, nil once unmapped
	fill []byte           // the mapped fill ring, nil once unmapped
}

// unmapRings unmaps the rings: with the fd closed, that releases the socket.
func (r *xskResources) unmapRings() { sockwait.Unmap(&r.rx, &r.fill) }

func (r *xskResources) unmapUMEM() { sockwait.Unmap(&r.umem) }

func (r *xskResources) closeFDs() { sockwait.CloseSocket(&r.fd, r.wait) }

func (r *xskResources) release() {
	r.closeFDs()
	r.unmapRings()
	r.unmapUMEM()
}

// openXSK makes the socket of one queue, with its UMEM and rings, every
// frame in the fill ring, and binds it to the queue.
func openXSK(cfg Config, ifindex, queue int, bind BindMode, pf *prefilterMem) (*Source, error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.EAFNOSUPPORT):
			return nil, fmt.Errorf("%w: the kernel has no AF_XDP sockets (Linux 4.18+ built with CONFIG_XDP_SOCKETS): %v", xdp.ErrUnsupported, err)
		case xdp.IsPermission(err):
			return nil, fmt.Errorf("%w: opening an AF_XDP socket needs CAP_NET_RAW: %v", xdp.ErrPermission, err)
		}
		return nil, fmt.Errorf("afxdp: afxdp: opening an AF_XDP socket: %w", err)
	}
	res := &xskResources{fd: fd}
	fail := func(format string, args ...any) (*Source, error) {
		res.release()
		return nil, fmt.Errorf("afxdp: afxdp %s queue %d: "+format, append([]any{cfg.Iface, queue}, args...)...)
	}
	n := cfg.NumFrames
	s := &Source{
		iface:       cfg.Iface,
		queue:       queue,
		pollTimeout: cfg.PollTimeout,
		frameMask:   ^uint64(cfg.FrameSize - 1),
		res:         res,
		ringMask:    uint32(n - 1),
		free:        make([]uint64, 0, n),
		pf:          pf,
		rnd:         uint64(queue)*0x9e3779b97f4a7c15 | 1,
	}

	// The UMEM.
	if res.umem, err = unix.Mmap(-1, 0, n*cfg.FrameSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
		return fail("allocating a %d-byte UMEM: %w", n*cfg.FrameSize, err)
	}
	s.umem = res.umem
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(&res.umem[0]))),
		Len:  uint64(len(res.umem)),
		Size: uint32(cfg.FrameSize),
	}
	if err := xskSetsockopt(fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EPERM) {
			return fail("registering a %d-byte UMEM (the pinned memory counts against RLIMIT_MEMLOCK without CAP_IPC_LOCK): %w", len(res.umem), err)
		}
		return fail("registering the UMEM: %w", err)
	}
	for _, r := range []struct {
		opt, size int
		name      string
	}{
		{unix.XDP_UMEM_FILL_RING, n, "fill"},
		{unix.XDP_UMEM_COMPLETION_RING, xskCompletionRing, "completion"},
		{unix.XDP_RX_RING, n, "RX"},
	} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, r.opt, r.size); err != nil {
			return fail("setting up a %d-entry %s ring: %w", r.size, r.name, err)
		}
	}
	var off unix.XDPMmapOffsets
	offLen := uint32(unsafe.Sizeof(off))
	if err := xskGetsockopt(fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), &offLen); err != nil {
		return fail("reading the ring offsets: %w", err)
	}
	if offLen < uint32(unsafe.Sizeof(off)) {
		// Before Linux 5.4 the offsets have no flags field: those kernels
		// have no need_wakeup and no XDP links either.
		res.release()
		return nil, fmt.Errorf("%w: AF_XDP of this kernel is too old (need Linux 5.4+)", xdp.ErrUnsupported)
	}
	pageOpts := unix.MAP_SHARED | unix.MAP_POPULATE
	if res.fill, err = unix.Mmap(fd, unix.XDP_UMEM_PGOFF_FILL_RING, int(off.Fr.Desc)+n*8, unix.PROT_READ|unix.PROT_WRITE, pageOpts); err != nil {
		return fail("mapping the fill ring: %w", err)
	}
	if res.rx, err = unix.Mmap(fd, unix.XDP_PGOFF_RX_RING, int(off.Rx.Desc)+n*xskDescSize, unix.PROT_READ|unix.PROT_WRITE, pageOpts); err != nil {
		return fail("mapping the RX ring: %w", err)
	}
	s.fillProd = (*uint32)(unsafe.Pointer(&res.fill[off.Fr.Producer]))
	s.fillCons = (*uint32)(unsafe.Pointer(&res.fill[off.Fr.Consumer]))
	s.fillFlags = (*uint32)(unsafe.Pointer(&res.fill[off.Fr.Flags]))
	s.fillAddrs = unsafe.Slice((*uint64)(unsafe.Pointer(&res.fill[off.Fr.Desc])), n)
	s.rxProd = (*uint32)(unsafe.Pointer(&res.rx[off.Rx.Producer]))
	s.rxCons = (*uint32)(unsafe.Pointer(&res.rx[off.Rx.Consumer]))
	s.rxDescs = unsafe.Slice((*unix.XDPDesc)(unsafe.Pointer(&res.rx[off.Rx.Desc])), n)
	// The rings are new: both indexes are 0 and the fill ring is empty.
	s.fillHead = atomic.LoadUint32(s.fillProd)
	s.fillLimit = atomic.LoadUint32(s.fillCons) + uint32(n)
	s.rxHead = atomic.LoadUint32(s.rxCons)
	s.rxLast = atomic.LoadUint32(s.rxProd)
	// Every frame to the fill ring, before the bind, so that a zero-copy
	// driver finds buffers as soon as it sets the queue up.
	for i := n - 1; i >= 0; i-- {
		s.free = append(s.free, uint64(i*cfg.FrameSize))
	}
	s.refill()

	if res.wait, err = sockwait.New(fd); err != nil {
		return fail("eventfd: %w", err)
	}
	flags := uint16(unix.XDP_USE_NEED_WAKEUP)
	switch bind {
	case BindCopy:
		flags |= unix.XDP_COPY
	case BindZeroCopy:
		flags |= unix.XDP_ZEROCOPY
	}
	sa := &unix.SockaddrXDP{Flags: flags, Ifindex: uint32(ifindex), QueueID: uint32(queue)}
	if err := xskBind(fd, sa); err != nil {
		switch {
		case errors.Is(err, unix.EBUSY):
			return fail("the queue already has an AF_XDP socket (another capture on it?): %w", err)
		case bind == BindZeroCopy && (errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)):
			res.release()
			return nil, fmt.Errorf("%w: afxdp %s queue %d: the driver has no zero-copy AF_XDP (use copy or auto): %v", xdp.ErrUnsupported, cfg.Iface, queue, err)
		case errors.Is(err, unix.EINVAL):
			return fail("binding (a queue the interface does not have?): %w", err)
		}
		return fail("binding: %w", err)
	}
	var opts uint32
	optsLen := uint32(unsafe.Sizeof(opts))
	if err := xskGetsockopt(fd, unix.XDP_OPTIONS, unsafe.Pointer(&opts), &optsLen); err == nil {
		s.zeroCopy = opts&unix.XDP_OPTIONS_ZEROCOPY != 0
	} else {
		s.zeroCopy = bind == BindZeroCopy // before Linux 5.3 no XDP_OPTIONS: the kernel did as told
	}
	runtime.AddCleanup(s, (*xskResources).release, res)
	return s, nil
}

// xskBindBusyWait is how long xskBind retries a queue that has a socket:
// the kernel frees a closed socket's queue from a workqueue, a moment after
// the close, so a capture reopened at once finds it busy.
const xskBindBusyWait = time.Second

// xskBind binds the socket, waiting a moment for a queue that is busy.
func xskBind(fd int, sa *unix.SockaddrXDP) error {
	deadline := time.Now().Add(xskBindBusyWait)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		err := unix.Bind(fd, sa)
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(delay)
	}
}

func xskSetsockopt(fd, opt int, p unsafe.Pointer, n uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0)
	if e != 0 {
		return e
	}
	return nil
}

func xskGetsockopt(fd, opt int, p unsafe.Pointer, n *uint32) error {
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(n)), 0)
	if e != 0 {
		return e
	}
	return nil
}

// Iface returns the interface the source captures on.
func (s *Source) Iface() string { return s.iface }

// Queue returns the receive queue the source captures.
func (s *Source) Queue() int { return s.queue }

// ZeroCopy says whether the driver receives straight into the socket's
// UMEM (else the kernel copies each frame into it).
func (s *Source) ZeroCopy() bool { return s.zeroCopy }

// Next reads the next frame into p, waiting up to the poll timeout. p.Data
// points into the socket's UMEM and is valid until the next call to Next,
// even when Close comes in between. TimeNs is the time the frame's batch
// was taken from the ring (AF_XDP has no receive timestamp; with the
// in-kernel prefilter it is the time the program stamped the frame with, from
// its metadata), WireLen the
// frame's length. It returns capture.ErrTimeout after the poll timeout
// without a frame, capture.ErrClosed after Close (a Next waiting in the
// kernel returns at once), and an error wrapping the socket's error when
// the kernel reports one (ENETDOWN when the interface goes away).
func (s *Source) Next(p *capture.Packet) error {
	if s.hasCur {
		s.free = append(s.free, s.cur) // never grows: there are len(rxDescs) frames in all
		s.hasCur = false
	}
	for {
		if s.batchNext < s.batchLen && !s.closed.Load() {
			d := &s.batch[s.batchNext]
			addr, n := d.Addr, uint64(d.Len)
			s.batchNext++
			s.cur, s.hasCur = addr&s.frameMask, true
			p.TimeNs = s.batchTime
			if s.pf != nil {
				if t := s.learn(addr); t != 0 {
					p.TimeNs = t // the kernel's, which its window counts follow
				}
			}
			p.Data = s.umem[addr : addr+n : addr+n]
			p.WireLen = int(n)
			p.LinkType = flow.LinkEthernet
			p.Key = flow.Key{}
			return nil
		}
		if err := s.nextBatch(); err != nil {
			return err
		}
	}
}

// refill gives the kernel as many free frames as the fill ring takes.
func (s *Source) refill() {
	n := uint32(len(s.free))
	if n == 0 {
		return
	}
	if room := s.fillLimit - s.fillHead; room < n {
		s.fillLimit = atomic.LoadUint32(s.fillCons) + s.ringMask + 1
		if room = s.fillLimit - s.fillHead; room < n {
			n = room
		}
	}
	top := uint32(len(s.free))
	for i := range n {
		s.fillAddrs[(s.fillHead+i)&s.ringMask] = s.free[top-1-i]
	}
	s.free = s.free[:top-n]
	s.fillHead += n
	s.fillTotal += uint64(n)
	atomic.StoreUint32(s.fillProd, s.fillHead)
}

// setRoom tells the prefilter's program how many free frames the fill
// ring holds at least (see fd_xsk_learn in bpf/xsk.c): the frames put in
// it, plus the frames the program had redirected, minus the frames the RX
// ring had received, the redirected ones read first. Call it after refill,
// only once the socket is in the program's map (Open does, then the reader
// after each refill): the program learns keys itself while it is sure the
// socket takes their frames.
func (s *Source) setRoom() {
	q := s.queue * bpf.XSKHitsBytes / 8
	r := atomic.LoadUint64(&s.pf.hits[q+bpf.XSKQueueRedirected])
	prod := atomic.LoadUint32(s.rxProd)
	s.rxTotal += uint64(prod - s.rxLast)
	s.rxLast = prod
	atomic.StoreUint64(&s.pf.hits[q+bpf.XSKQueueRoom], s.fillTotal+r-s.rxTotal)
}

// wakeup kicks a driver that stopped receiving for want of fill ring
// entries (need_wakeup: only zero-copy drivers ask; poll does it too).
func (s *Source) wakeup() {
	if atomic.LoadUint32(s.fillFlags)&unix.XDP_RING_NEED_WAKEUP != 0 {
		unix.Syscall6(unix.SYS_RECVFROM, uintptr(s.res.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	}
}

// nextBatch hands the entries read back to the kernel and waits for more.
func (s *Source) nextBatch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = false // holding mu: the UMEM is not used outside it
	if s.closed.Load() {
		s.res.unmapUMEM() // Close left it mapped for the frame we held
		return capture.ErrClosed
	}
	s.refill()
	if s.pf != nil {
		s.setRoom()
	}
	s.wakeup()
	var deadline time.Time
	if s.pollTimeout > 0 {
		deadline = time.Now().Add(s.pollTimeout)
	}
	for {
		if avail := atomic.LoadUint32(s.rxProd) - s.rxHead; avail > 0 {
			n := int(min(avail, xskBatch))
			for i := range n {
				s.batch[i] = s.rxDescs[(s.rxHead+uint32(i))&s.ringMask]
			}
			s.rxHead += uint32(n)
			atomic.StoreUint32(s.rxCons, s.rxHead)
			s.batchLen, s.batchNext = n, 0
			s.batchTime = time.Now().UnixNano()
			s.held = true
			return nil
		}
		r, err := s.res.wait.Wait(deadline)
		switch {
		case err != nil:
			return fmt.Errorf("afxdp: afxdp %s queue %d: %w", s.iface, s.queue, err)
		case r == sockwait.Woken || s.closed.Load():
			s.res.unmapUMEM() // holding nothing: Close (waiting for mu) leaves this to us or does it again
			return capture.ErrClosed
		case r == sockwait.Timeout:
			return s.timeout()
		}
	}
}

// timeout returns the socket's pending error, or capture.ErrTimeout: an
// idle queue is the moment to notice that the interface went away.
func (s *Source) timeout() error {
	if err := sockwait.SockError(s.res.fd); err != nil {
		return fmt.Errorf("afxdp: afxdp %s queue %d: %w", s.iface, s.queue, err)
	}
	return capture.ErrTimeout
}

// Close takes the socket out of the redirect program's map (the queue's
// frames go to the stack again) and closes it. A Next waiting in the kernel
// returns capture.ErrClosed at once; Close is safe to call from any
// goroutine and more than once.
func (s *Source) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.detach != nil {
		s.detach(s.queue)
	}
	s.res.wait.Wake() // wakes a poll in progress; it then releases mu
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statsMu.Lock()
	s.readStats()
	s.res.closeFDs()
	s.statsMu.Unlock()
	s.res.unmapRings() // the last reference to the socket: the kernel releases it
	if !s.held {
		s.res.unmapUMEM()
	} // else the reader may still be using a frame: its next Next unmaps
	return nil
}

// Stats returns the socket's XDP_STATISTICS counters, cumulative since it
// opened (the last ones read after Close).
func (s *Source) Stats() (unix.XDPStatistics, error) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if err := s.readStats(); err != nil {
		return s.stats, fmt.Errorf("afxdp: afxdp %s queue %d: statistics: %w", s.iface, s.queue, err)
	}
	return s.stats, nil
}

// KernelDrops returns the number of frames the socket lost since it opened:
// rx_dropped (no free frame in the fill ring when a frame came, or a frame
// longer than a UMEM frame) plus rx_ring_full (the RX ring was full). Both
// count frames. rx_fill_ring_empty_descs is not added: it counts the times
// the kernel found the fill ring empty, which in copy mode are frames
// rx_dropped already has, and in zero-copy mode allocation attempts of the
// driver, whose lost frames only the driver's own counters (ethtool -S) see.
// It may be called from any goroutine, also after Close.
func (s *Source) KernelDrops() (uint64, error) {
	st, err := s.Stats()
	return st.Rx_dropped + st.Rx_ring_full, err
}

// readStats refreshes stats. statsMu must be held.
func (s *Source) readStats() error {
	if s.res.fd < 0 {
		return nil
	}
	var st unix.XDPStatistics
	n := uint32(unsafe.Sizeof(st))
	if err := xskGetsockopt(s.res.fd, unix.XDP_STATISTICS, unsafe.Pointer(&st), &n); err != nil {
		return err
	}
	s.stats = st
	return nil
}

// rxQueueCount returns the number of receive queues of the interface: the
// rx-* entries of /sys/class/net/NAME/queues, when that is the interface of
// the caller's network namespace (sysfs shows the namespace it was mounted
// in, which `ip netns exec` remounts but a mere setns does not), else the
// channels the driver reports to ethtool (rx-only plus combined ones).
func rxQueueCount(name string, ifindex int) (int, error) {
	dir := filepath.Join("/sys/class/net", name)
	if sysfsIsOurs(dir, name, ifindex) {
		rx, err := filepath.Glob(filepath.Join(dir, "queues", "rx-*"))
		if err == nil && len(rx) > 0 {
			return len(rx), nil
		}
	}
	var ch ethtoolChannels
	err := ethtoolChannelsIoctl(name, unix.ETHTOOL_GCHANNELS, &ch)
	if err == nil {
		if n := int(ch.RxCount + ch.CombinedCount); n > 0 {
			return n, nil
		}
		err = errors.New("no rx or combined channels")
	}
	return 0, fmt.Errorf("afxdp: afxdp %s: cannot count the receive queues (%s belongs to another network namespace; ethtool channels: %v): list them in Queues", name, dir, err)
}

// sysfsIsOurs says whether dir, /sys/class/net/NAME, shows the interface of
// the caller's namespace: same index and same hardware address.
func sysfsIsOurs(dir, name string, ifindex int) bool {
	idx, err := os.ReadFile(filepath.Join(dir, "ifindex"))
	if err != nil || strings.TrimSpace(string(idx)) != strconv.Itoa(ifindex) {
		return false
	}
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return false
	}
	addr, err := os.ReadFile(filepath.Join(dir, "address"))
	if err != nil {
		return false
	}
	sysAddr := strings.TrimSpace(string(addr))
	if len(ifi.HardwareAddr) == 0 { // none, or all zeros (loopback): Go shows neither
		return strings.Trim(sysAddr, "0:") == ""
	}
	return strings.EqualFold(sysAddr, ifi.HardwareAddr.String())
}

// ethtoolChannels is struct ethtool_channels (`ethtool -l`).
type ethtoolChannels struct {
	Cmd                                         uint32
	MaxRx, MaxTx, MaxOther, MaxCombined         uint32
	RxCount, TxCount, OtherCount, CombinedCount uint32
}

// ethtoolChannelsIoctl runs ETHTOOL_GCHANNELS or ETHTOOL_SCHANNELS (cmd) on
// the interface of the caller's network namespace.
func ethtoolChannelsIoctl(name string, cmd uint32, ch *ethtoolChannels) error {
	if len(name) >= unix.IFNAMSIZ {
		return fmt.Errorf("interface name %q is too long", name)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ch.Cmd = cmd
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [16]byte // the rest of struct ifreq's union
	}
	copy(ifr.name[:], name)
	ifr.data = unsafe.Pointer(ch)
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(ch)
	if e != 0 {
		return e
	}
	return nil
}

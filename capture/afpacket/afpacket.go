//go:build linux

package afpacket

// Live capture from AF_PACKET sockets with TPACKET_V3 rings, written on
// golang.org/x/sys/unix rather than gopacket/afpacket, because the capture
// needs four things that package does not give:
//
//   - Close from another goroutine while Next waits: its Close unmaps the
//     ring under a reader still polling or reading it, and nothing wakes a
//     blocked poll. Here an eventfd wakes the poll, and the ring is unmapped
//     only once the reader holds no frame of it.
//   - No unfiltered frame and no frame outside the fanout: it binds the
//     socket to every protocol before the filter is attached and before the
//     socket joins a fanout group, so the first frames bypass both. Here a
//     socket receives through a drop-everything filter until all sockets of
//     the group have joined, and only then gets the real one.
//   - The packet type, to drop loopback's outgoing copy of every frame.
//   - The hardware type, to tell Ethernet from raw-IP interfaces.
//
// The ring is read as the kernel's Documentation/networking/packet_mmap.rst
// describes: blocks in order, each owned by user space from the moment its
// status has TP_STATUS_USER until it is handed back with TP_STATUS_KERNEL.

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/internal/sockwait"
	"github.com/flowdedup/flowdedup/capture/pcapfilter"
	"github.com/flowdedup/flowdedup/flow"
)

// Defaults of Config.
const (
	// DefaultSnapLen keeps the first 256 bytes of a frame: a flow
	// key needs only headers, and 256 bytes hold Ethernet, a few VLAN tags
	// or MPLS labels, an IPv6 header with common extension headers, and the
	// ports. Frames are counted whole (WireLen) however short the snap.
	DefaultSnapLen = 256
	// DefaultBlockSize and DefaultNumBlocks give each socket
	// a 32 MiB ring: about 90,000 frames at the default snap length, or
	// 90 ms of a 1 Mpps link that the reader leaves unread.
	DefaultBlockSize = 1 << 20
	DefaultNumBlocks = 32
	// DefaultBlockTimeout is how long the kernel keeps filling a
	// block before handing it over part full: the latency on a quiet link.
	DefaultBlockTimeout = 10 * time.Millisecond
	// DefaultPollTimeout is how long Next waits for a frame before
	// it returns capture.ErrTimeout.
	DefaultPollTimeout = 100 * time.Millisecond
	// MaxSockets is the kernel's limit on the members of a fanout
	// group (PACKET_FANOUT_MAX).
	MaxSockets = 256
)

// Config describes a live capture on one interface.
type Config struct {
	// Iface is the interface to capture on (required). Its hardware type
	// gives the frames' link type: Ethernet for Ethernet and loopback
	// interfaces, raw IP for tun, WireGuard, PPP and IP-in-IP interfaces.
	Iface string
	// Sockets is the number of sockets, each a capture.Source for one reader
	// (default 1). Several sockets share the interface's frames in a
	// PACKET_FANOUT group by flow hash, so all frames of a flow, in both
	// directions, reach the same socket.
	Sockets int
	// FanoutGroup is the fanout group id. 0 lets the kernel pick one no
	// other socket uses; give one only to share the frames with another
	// process's sockets (both must then use the same interface and mode).
	FanoutGroup uint16
	// SnapLen is the number of bytes kept of each frame
	// (default DefaultSnapLen).
	SnapLen int
	// Promisc puts the interface in promiscuous mode while the sockets
	// are open (a per-socket membership the kernel drops on close).
	Promisc bool
	// BPF is a filter expression in pcap-filter(7) syntax, compiled by
	// pcapfilter.Compile and run by the kernel before a frame enters the ring.
	// Empty keeps every frame.
	BPF string
	// BlockSize is the size of a ring block in bytes: a multiple of the
	// page size, best a power of two (the kernel allocates blocks in
	// power-of-two pages). Default DefaultBlockSize.
	BlockSize int
	// NumBlocks is the number of blocks in each socket's ring, at least 2
	// (default DefaultNumBlocks).
	NumBlocks int
	// BlockTimeout is how long the kernel fills a block before it hands it
	// over part full (default DefaultBlockTimeout, whole ms).
	BlockTimeout time.Duration
	// PollTimeout is how long Next waits for a frame before returning
	// capture.ErrTimeout (default DefaultPollTimeout; negative: forever).
	PollTimeout time.Duration
}

// BindFlags registers the flags of AF_PACKET's own settings on fs, with the
// defaults above. Iface, Promisc and PollTimeout are not among them: every
// live capture mode takes those, so the caller binds them once for all
// modes (flowdedup run does) and copies them in.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.Sockets, "afpacket-sockets", 1, "AF_PACKET sockets in the fanout group, one per reader")
	fs.Func("afpacket-fanout-group", "fanout group id shared with other processes (default: a unique id)", func(s string) error {
		n, err := strconv.ParseUint(s, 0, 16)
		if err != nil || n == 0 {
			return fmt.Errorf("fanout group must be 1 to 65535")
		}
		c.FanoutGroup = uint16(n)
		return nil
	})
	fs.IntVar(&c.SnapLen, "snaplen", DefaultSnapLen, "bytes kept of each frame (headers are enough for flow keys)")
	fs.StringVar(&c.BPF, "bpf", c.BPF, "capture filter in pcap-filter(7) syntax, run in the kernel")
	fs.IntVar(&c.BlockSize, "afpacket-block-size", DefaultBlockSize, "ring block size in bytes (multiple of the page size)")
	fs.IntVar(&c.NumBlocks, "afpacket-blocks", DefaultNumBlocks, "ring blocks per socket")
	fs.DurationVar(&c.BlockTimeout, "afpacket-block-timeout", DefaultBlockTimeout, "longest wait before the kernel hands over a part-full block")
}

// withDefaults fills in zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Sockets == 0 {
		c.Sockets = 1
	}
	if c.SnapLen == 0 {
		c.SnapLen = DefaultSnapLen
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.NumBlocks == 0 {
		c.NumBlocks = DefaultNumBlocks
	}
	if c.BlockTimeout == 0 {
		c.BlockTimeout = DefaultBlockTimeout
	}
	if c.PollTimeout == 0 {
		c.PollTimeout = DefaultPollTimeout
	}
	page := os.Getpagesize()
	switch {
	case c.Iface == "":
		return c, errors.New("capture: afpacket: no interface given")
	case c.Sockets < 1 || c.Sockets > MaxSockets:
		return c, fmt.Errorf("capture: afpacket: %d sockets: want 1 to %d", c.Sockets, MaxSockets)
	case c.SnapLen < 1 || c.SnapLen > pcapfilter.DefaultSnapLen:
		return c, fmt.Errorf("capture: afpacket: snap length %d: want 1 to %d", c.SnapLen, pcapfilter.DefaultSnapLen)
	case c.BlockSize < page || c.BlockSize%page != 0:
		return c, fmt.Errorf("capture: afpacket: block size %d is not a multiple of the page size %d", c.BlockSize, page)
	case c.BlockSize < blockHeaderLen+frameSize(c.SnapLen):
		return c, fmt.Errorf("capture: afpacket: block size %d cannot hold a %d-byte frame", c.BlockSize, c.SnapLen)
	case c.NumBlocks < 2:
		return c, fmt.Errorf("capture: afpacket: %d blocks: want at least 2", c.NumBlocks)
	case int64(c.BlockSize)*int64(c.NumBlocks) > 1<<34:
		return c, fmt.Errorf("capture: afpacket: ring of %d x %d bytes is over 16 GiB", c.NumBlocks, c.BlockSize)
	case c.BlockTimeout < time.Millisecond || c.BlockTimeout > time.Hour:
		return c, fmt.Errorf("capture: afpacket: block timeout %v: want 1ms to 1h", c.BlockTimeout)
	}
	return c, nil
}

// Layout of the ring, from linux/if_packet.h.
const (
	blockHeaderLen = 48                           // struct tpacket_block_desc, aligned: where frames may start
	headerLen      = 48                           // TPACKET_ALIGN(sizeof(struct tpacket3_hdr))
	sockaddrLen    = unix.SizeofSockaddrLinklayer // struct sockaddr_ll, right after the frame header
	pktTypeOff     = headerLen + 10               // sll_pkttype in the sockaddr_ll
	statusOff      = 8                            // block_status in the block header
	numPktsOff     = 12                           // num_pkts
	firstPktOff    = 16                           // offset_to_first_pkt
)

func align(n int) int {
	return (n + unix.TPACKET_ALIGNMENT - 1) &^ (unix.TPACKET_ALIGNMENT - 1)
}

// frameSize is the tp_frame_size asked for: TPACKET_V3 packs frames of
// any size in a block, but the kernel still checks the frame count.
func frameSize(snaplen int) int { return align(headerLen + sockaddrLen + snaplen) }

// dropAll is the filter a socket carries until the real one goes on.
var dropAll = []bpf.RawInstruction{{Op: 0x06, K: 0}} // ret #0

// Socket is one AF_PACKET socket of a capture, read by one goroutine.
// It implements capture.Source and capture.DropCounter.
type Socket struct {
	iface        string
	lt           flow.LinkType
	group        uint16
	grouped      bool
	skipOutgoing bool // loopback without PACKET_IGNORE_OUTGOING: drop the outgoing copy
	pollTimeout  time.Duration
	blockSize    int
	numBlocks    int

	res *resources

	// The reader's position, touched only by the goroutine calling Next
	// (and, with mu held, by Close through held).
	blk   []byte // the block being read
	index int    // its index in the ring, or that of the next block to wait for
	held  bool   // blk belongs to user space; guarded by mu
	left  uint32 // frames of blk not yet returned
	off   int    // offset in blk of the next frame's header

	closed  atomic.Bool
	mu      sync.Mutex // serialises Next's waiting and releasing with Close
	statsMu sync.Mutex // guards drops and res.fd against KernelDrops
	drops   uint64
}

var (
	_ capture.Source      = (*Socket)(nil)
	_ capture.DropCounter = (*Socket)(nil)
)

// resources are the kernel objects of a source, apart from it so that a
// cleanup can release them if the source is dropped without Close.
type resources struct {
	fd   int              // the packet socket, -1 once closed
	wait *sockwait.Waiter // Next waits on the socket here; Close wakes it
	ring []byte           // the mapped ring, nil once unmapped
}

func (r *resources) closeFDs() { sockwait.CloseSocket(&r.fd, r.wait) }

func (r *resources) unmap() { sockwait.Unmap(&r.ring) }

func (r *resources) release() {
	r.closeFDs()
	r.unmap()
}

// Open opens cfg.Sockets AF_PACKET sockets on cfg.Iface, joined in one
// fanout group when there are several (or cfg.FanoutGroup is given), and
// returns them as capture.Sources: *Socket, one per reader goroutine.
//
// Frames are zero-copy views of the socket's ring: a capture.Packet's Data
// is valid until the next Next on the same socket. Packet.TimeNs is the
// kernel's receive timestamp. VLAN tags the driver stripped (offload) are
// not put back; flow keys do not depend on them.
//
// Opening needs CAP_NET_RAW; without it the error says so and wraps
// os.ErrPermission. Close every source; each Close stops its socket.
func Open(cfg Config) ([]capture.Source, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	opened := make([]*Socket, 0, cfg.Sockets)
	fail := func(err error) ([]capture.Source, error) {
		for _, s := range opened {
			s.Close()
		}
		return nil, err
	}
	var ifc ifaceInfo
	for i := range cfg.Sockets {
		fd, err := newPacketSocket()
		if err != nil {
			return fail(err)
		}
		if i == 0 {
			// The first socket resolves the interface for the rest.
			if ifc, err = lookupIface(fd, cfg.Iface); err != nil {
				unix.Close(fd)
				return fail(err)
			}
		}
		s, err := openSocket(cfg, fd, ifc)
		if err != nil {
			return fail(err)
		}
		opened = append(opened, s)
	}
	prog, err := pcapfilter.Compile(cfg.BPF, ifc.lt, cfg.SnapLen)
	if err != nil {
		return fail(err)
	}
	if cfg.Sockets > 1 || cfg.FanoutGroup != 0 {
		id, err := joinFanout(opened, cfg.FanoutGroup)
		if err != nil {
			return fail(fmt.Errorf("capture: afpacket %s: joining fanout group: %w", cfg.Iface, err))
		}
		for _, s := range opened {
			s.group, s.grouped = id, true
		}
	}
	// Every socket is in the group: from here on a flow's frames go to
	// one socket only, so the sockets may start keeping them.
	for _, s := range opened {
		if err := attachFilter(s.res.fd, prog); err != nil {
			if errors.Is(err, unix.ENOMEM) {
				err = fmt.Errorf("%w (a %d-instruction program: the kernel bounds a socket's filter by sysctl net.core.optmem_max)", err, len(prog))
			}
			return fail(fmt.Errorf("capture: afpacket %s: attaching filter %q: %w", cfg.Iface, cfg.BPF, err))
		}
	}
	srcs := make([]capture.Source, len(opened))
	for i, s := range opened {
		srcs[i] = s
	}
	return srcs, nil
}

// newPacketSocket opens an AF_PACKET socket of protocol 0: it receives
// nothing until openSocket binds it.
func newPacketSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return -1, fmt.Errorf("capture: afpacket: opening a packet socket needs CAP_NET_RAW (run as root or grant the capability): %w", err)
		}
		return -1, fmt.Errorf("capture: afpacket: opening a packet socket: %w", err)
	}
	return fd, nil
}

// openSocket gives the packet socket fd its ring and binds it to the
// interface ifc, dropping every frame until the real filter goes on. It
// owns fd from the call on: on error fd is closed.
func openSocket(cfg Config, fd int, ifc ifaceInfo) (*Socket, error) {
	res := &resources{fd: fd}
	fail := func(format string, args ...any) (*Socket, error) {
		res.release()
		return nil, fmt.Errorf("capture: afpacket %s: "+format, append([]any{cfg.Iface}, args...)...)
	}
	var err error
	s := &Socket{
		iface:       cfg.Iface,
		lt:          ifc.lt,
		pollTimeout: cfg.PollTimeout,
		blockSize:   cfg.BlockSize,
		numBlocks:   cfg.NumBlocks,
		res:         res,
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return fail("TPACKET_V3 (Linux 3.2+): %w", err)
	}
	if err := attachFilter(fd, dropAll); err != nil {
		return fail("attaching a filter: %w", err)
	}
	frame := frameSize(cfg.SnapLen)
	req := unix.TpacketReq3{
		Block_size:     uint32(cfg.BlockSize),
		Block_nr:       uint32(cfg.NumBlocks),
		Frame_size:     uint32(frame),
		Frame_nr:       uint32(cfg.BlockSize / frame * cfg.NumBlocks),
		Retire_blk_tov: uint32(cfg.BlockTimeout / time.Millisecond),
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return fail("setting up a %d x %d-byte ring: %w", cfg.NumBlocks, cfg.BlockSize, err)
	}
	if res.ring, err = unix.Mmap(fd, 0, cfg.BlockSize*cfg.NumBlocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fail("mapping the ring: %w", err)
	}
	if res.wait, err = sockwait.New(fd); err != nil {
		return fail("eventfd: %w", err)
	}
	if ifc.hwtype == unix.ARPHRD_LOOPBACK {
		// Loopback shows every frame twice, leaving and arriving: keep one.
		if unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1) != nil {
			s.skipOutgoing = true // before Linux 4.20: drop them when reading
		}
	}
	sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.index}
	if err := unix.Bind(fd, sa); err != nil {
		return fail("binding: %w", err)
	}
	if cfg.Promisc {
		mreq := unix.PacketMreq{Ifindex: int32(ifc.index), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			return fail("promiscuous mode: %w", err)
		}
	}
	runtime.AddCleanup(s, (*resources).release, res)
	return s, nil
}

// ifaceInfo is what the packet sockets of a capture need to know of their
// interface.
type ifaceInfo struct {
	index  int
	hwtype uint16        // ARPHRD_*
	lt     flow.LinkType // of the frames a SOCK_RAW socket reads from it
}

// lookupIface resolves name to its index, hardware type and link type in the
// network namespace of the socket fd.
func lookupIface(fd int, name string) (ifaceInfo, error) {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return ifaceInfo{}, fmt.Errorf("capture: afpacket: interface name %q: %w", name, err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		if errors.Is(err, unix.ENODEV) {
			return ifaceInfo{}, fmt.Errorf("capture: afpacket: interface %q does not exist: %w", name, err)
		}
		return ifaceInfo{}, fmt.Errorf("capture: afpacket: interface %q: %w", name, err)
	}
	ifc := ifaceInfo{index: int(ifr.Uint32())}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFHWADDR, ifr); err != nil {
		return ifaceInfo{}, fmt.Errorf("capture: afpacket: interface %q: hardware type: %w", name, err)
	}
	ifc.hwtype = ifr.Uint16() // ifr_hwaddr.sa_family is the ARPHRD type
	if ifc.lt, err = linkTypeOf(ifc.hwtype); err != nil {
		return ifaceInfo{}, fmt.Errorf("capture: afpacket %s: %w", name, err)
	}
	return ifc, nil
}

// linkTypeOf maps an interface's hardware type to the link type of what a
// SOCK_RAW packet socket reads from it.
func linkTypeOf(hwtype uint16) (flow.LinkType, error) {
	switch hwtype {
	case unix.ARPHRD_ETHER, unix.ARPHRD_LOOPBACK:
		return flow.LinkEthernet, nil
	case unix.ARPHRD_NONE, unix.ARPHRD_RAWIP, unix.ARPHRD_PPP, unix.ARPHRD_TUNNEL, unix.ARPHRD_TUNNEL6:
		// No link header: tun, WireGuard, PPP, IP-in-IP.
		return flow.LinkRaw, nil
	}
	return 0, fmt.Errorf("hardware type %d (ARPHRD_*) is not supported: Ethernet, loopback and raw-IP interfaces are", hwtype)
}

func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

func attachFilter(fd int, prog []bpf.RawInstruction) error {
	fprog := unix.SockFprog{
		Len:    uint16(len(prog)),
		Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0])),
	}
	err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog)
	runtime.KeepAlive(prog)
	return err
}

// joinFanout puts every socket in one PACKET_FANOUT_HASH group and
// returns its id. With id 0 the kernel picks an id no group uses.
func joinFanout(socks []*Socket, id uint16) (uint16, error) {
	const hash = unix.PACKET_FANOUT_HASH << 16
	for i, s := range socks {
		if i == 0 && id == 0 {
			err := unix.SetsockoptInt(s.res.fd, unix.SOL_PACKET, unix.PACKET_FANOUT, hash|unix.PACKET_FANOUT_FLAG_UNIQUEID<<16)
			if errors.Is(err, unix.EINVAL) {
				// Before Linux 4.3 there is no kernel-picked id: derive one
				// from the pid, as libpcap users do.
				id = uint16(os.Getpid())
				err = unix.SetsockoptInt(s.res.fd, unix.SOL_PACKET, unix.PACKET_FANOUT, hash|int(id))
			} else if err == nil {
				v, gerr := unix.GetsockoptInt(s.res.fd, unix.SOL_PACKET, unix.PACKET_FANOUT)
				id, err = uint16(v), gerr // the low 16 bits are the id
			}
			if err != nil {
				return 0, err
			}
			continue
		}
		if err := unix.SetsockoptInt(s.res.fd, unix.SOL_PACKET, unix.PACKET_FANOUT, hash|int(id)); err != nil {
			return 0, fmt.Errorf("group %d: %w", id, err)
		}
	}
	return id, nil
}

// Iface returns the interface the source captures on.
func (s *Socket) Iface() string { return s.iface }

// LinkType returns the link type of the frames.
func (s *Socket) LinkType() flow.LinkType { return s.lt }

// FanoutGroup returns the id of the fanout group the socket is in, and
// false when it is in none (a single socket with no group asked for).
func (s *Socket) FanoutGroup() (uint16, bool) { return s.group, s.grouped }

// Next reads the next frame into p, waiting up to the poll timeout. p.Data
// points into the ring and is valid until the next call to Next, even when
// Close comes in between: the ring is unmapped only once the reader has let
// go of it. It returns capture.ErrTimeout after the poll timeout without a
// frame, capture.ErrClosed after Close (a Next waiting in the kernel returns
// at once), and an error wrapping the socket's error when the kernel
// reports one (ENETDOWN when the interface goes down: capture resumes if it
// comes back up, so Next may be called again).
func (s *Socket) Next(p *capture.Packet) error {
	for {
		if s.left > 0 && !s.closed.Load() {
			if s.readFrame(p) {
				return nil
			}
			continue
		}
		if err := s.nextBlock(); err != nil {
			return err
		}
	}
}

// readFrame takes the next frame of the held block, and returns false for a
// frame the source drops.
func (s *Socket) readFrame(p *capture.Packet) bool {
	h := s.blk[s.off : s.off+headerLen+sockaddrLen]
	hdr := (*unix.Tpacket3Hdr)(unsafe.Pointer(&h[0]))
	start := s.off + int(hdr.Mac)
	data := s.blk[start : start+int(hdr.Snaplen) : start+int(hdr.Snaplen)]
	s.left--
	s.off += int(hdr.Next_offset)
	if s.skipOutgoing && h[pktTypeOff] == unix.PACKET_OUTGOING {
		return false
	}
	p.Data = data
	p.WireLen = int(hdr.Len)
	p.TimeNs = int64(hdr.Sec)*int64(time.Second) + int64(hdr.Nsec)
	p.LinkType = s.lt
	return true
}

func (s *Socket) status() *uint32 {
	return (*uint32)(unsafe.Pointer(&s.blk[statusOff]))
}

// nextBlock hands the block read back to the kernel and waits for the next.
func (s *Socket) nextBlock() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		s.held = false
		s.blk = nil
		s.res.unmap() // Close left it mapped for the frame we held
		return capture.ErrClosed
	}
	if s.held {
		atomic.StoreUint32(s.status(), unix.TP_STATUS_KERNEL)
		s.held = false
		s.index = (s.index + 1) % s.numBlocks
	}
	s.blk = s.res.ring[s.index*s.blockSize : (s.index+1)*s.blockSize]
	var deadline time.Time
	if s.pollTimeout > 0 {
		deadline = time.Now().Add(s.pollTimeout)
	}
	for {
		if atomic.LoadUint32(s.status())&unix.TP_STATUS_USER != 0 {
			n := binary.NativeEndian.Uint32(s.blk[numPktsOff:])
			if n == 0 { // a block retired empty: nothing to read in it
				atomic.StoreUint32(s.status(), unix.TP_STATUS_KERNEL)
				s.index = (s.index + 1) % s.numBlocks
				s.blk = s.res.ring[s.index*s.blockSize : (s.index+1)*s.blockSize]
				continue
			}
			s.held = true
			s.left = n
			s.off = int(binary.NativeEndian.Uint32(s.blk[firstPktOff:]))
			return nil
		}
		r, err := s.res.wait.Wait(deadline)
		switch {
		case err != nil:
			return fmt.Errorf("capture: afpacket %s: %w", s.iface, err)
		case r == sockwait.Woken || s.closed.Load():
			s.blk = nil
			s.res.unmap() // holding no block, so Close (waiting for mu) leaves this to us or does it again
			return capture.ErrClosed
		case r == sockwait.Timeout:
			return capture.ErrTimeout
		}
	}
}

// Close stops the socket and releases it. A Next waiting in the kernel
// returns capture.ErrClosed at once; Close is safe to call from any
// goroutine and more than once.
func (s *Socket) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.res.wait.Wake() // wakes a poll in progress; it then releases mu
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statsMu.Lock()
	s.readDrops()
	// While the ring stays mapped the socket lives on: make it drop
	// everything, so nothing more is captured into it.
	attachFilter(s.res.fd, dropAll)
	s.res.closeFDs()
	s.statsMu.Unlock()
	if !s.held {
		s.res.unmap()
	} // else the reader may still be using a frame: its next Next unmaps
	return nil
}

// KernelDrops returns the number of frames the kernel dropped because this
// socket's ring was full, since the socket opened. It may be called from any
// goroutine, also after Close (it then returns the final count).
func (s *Socket) KernelDrops() (uint64, error) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if err := s.readDrops(); err != nil {
		return s.drops, fmt.Errorf("capture: afpacket %s: statistics: %w", s.iface, err)
	}
	return s.drops, nil
}

// readDrops adds the drops since the last read (reading resets the
// kernel's counters). statsMu must be held.
func (s *Socket) readDrops() error {
	if s.res.fd < 0 {
		return nil
	}
	st, err := unix.GetsockoptTpacketStatsV3(s.res.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return err
	}
	s.drops += uint64(st.Drops)
	return nil
}

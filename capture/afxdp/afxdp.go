//go:build linux && !(mips || mips64 || ppc64 || s390x)

package afxdp

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/xdp"
)

// Defaults and limits of Config.
const (
	// DefaultFrameSize is the size of a UMEM frame: one frame holds
	// one received frame of up to 2048 bytes less the kernel's 256-byte
	// XDP headroom, so 1792 bytes (an MTU of 1500 with room for tags).
	DefaultFrameSize = 2048
	// DefaultNumFrames is the number of UMEM frames per queue
	// (8 MiB of UMEM at the default frame size). The fill and RX rings
	// have as many entries.
	DefaultNumFrames = 4096
	// DefaultPollTimeout is how long Next waits for a frame before
	// it returns capture.ErrTimeout.
	DefaultPollTimeout = 100 * time.Millisecond
	// MaxNumFrames bounds NumFrames.
	MaxNumFrames = 1 << 20
	// afxdpMinNumFrames is the least NumFrames: two reader batches and
	// room for the kernel.
	afxdpMinNumFrames = 4 * xskBatch
)

// xdpPacketHeadroom is the kernel's XDP_PACKET_HEADROOM, in front of a
// received frame in its UMEM frame.
const xdpPacketHeadroom = 256

// xskLearnMargin is the margin of the program's own learning
// (bpf.XSKPrefilter.Margin): the frames a NAPI poll may have taken from
// the fill ring before it publishes them in the RX ring, twice a driver's
// usual budget of 64. The keys of the last frames before the UMEM would
// fill are left to the reader: the smaller the margin, the fewer frames
// cross again while the reader is descheduled. Less than afxdpMinNumFrames.
const xskLearnMargin = 128

// ErrNoQueue: the interface has no receive queue with the id asked for.
var ErrNoQueue = errors.New("afxdp: no such receive queue")

// BindMode says whether AF_XDP sockets share the driver's buffers
// (zero-copy) or get a copy of each frame.
type BindMode string

// Bind modes.
const (
	// BindAuto lets the kernel choose: zero-copy where the driver
	// supports it in native XDP mode, else copy.
	BindAuto BindMode = "auto"
	// BindCopy makes the kernel copy each frame into the socket's
	// UMEM (XDP_COPY): every driver, native and generic XDP.
	BindCopy BindMode = "copy"
	// BindZeroCopy has the driver receive straight into the UMEM
	// (XDP_ZEROCOPY): it needs driver support and native XDP, and fails
	// without them.
	BindZeroCopy BindMode = "zerocopy"
)

// ParseBindMode returns the BindMode named s ("" is BindAuto).
func ParseBindMode(s string) (BindMode, error) {
	switch m := BindMode(s); m {
	case "":
		return BindAuto, nil
	case BindAuto, BindCopy, BindZeroCopy:
		return m, nil
	}
	return "", fmt.Errorf("afxdp: unknown AF_XDP bind mode %q: valid modes are auto, copy, zerocopy", s)
}

// String returns the mode's name.
func (m BindMode) String() string { return string(m) }

// Set implements flag.Value.
func (m *BindMode) Set(s string) error {
	v, err := ParseBindMode(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// ParseQueues parses a list of receive queue ids such as "0,2,4-7" (for a
// --queues flag). The empty string gives nil: every queue.
func ParseQueues(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var qs []int
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b-a >= 1<<16 {
			return nil, fmt.Errorf("afxdp: queue list %q: %q is not a queue id or a range such as 4-7", s, part)
		}
		for q := a; q <= b; q++ {
			qs = append(qs, q)
		}
	}
	return qs, nil
}

// Config describes an AF_XDP capture on one interface.
type Config struct {
	// Iface is the interface to capture on (required).
	Iface string
	// Queues are the receive queues to capture, one AF_XDP socket (one
	// Source) each; nil means every receive queue of the interface.
	// Frames arriving on other queues go to the kernel's stack as usual.
	Queues []int
	// Attach is the XDP hook of the redirect program (default xdp.AttachAuto).
	Attach xdp.AttachMode
	// Bind chooses copy or zero-copy sockets (default BindAuto).
	Bind BindMode
	// FrameSize is the size of a UMEM frame: a power of two from 2048 to
	// the page size (default DefaultFrameSize). A frame holds a
	// received frame of up to FrameSize-256 bytes; longer ones are
	// dropped and counted in KernelDrops.
	FrameSize int
	// NumFrames is the number of UMEM frames of each queue's socket, a
	// power of two (default DefaultNumFrames); the fill and RX
	// rings have as many entries.
	NumFrames int
	// PollTimeout is how long Next waits for a frame before returning
	// capture.ErrTimeout (default DefaultPollTimeout; negative:
	// forever).
	PollTimeout time.Duration
	// Prefilter, when not nil, keys the frames in the kernel and drops
	// those whose key the queue's reader has already handed on, counting
	// them (see Prefilter and Open); nil hands every frame to user space.
	Prefilter *Prefilter
}

// withDefaults fills in zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Attach == "" {
		c.Attach = xdp.AttachAuto
	}
	if c.Bind == "" {
		c.Bind = BindAuto
	}
	if c.FrameSize == 0 {
		c.FrameSize = DefaultFrameSize
	}
	if c.NumFrames == 0 {
		c.NumFrames = DefaultNumFrames
	}
	if c.PollTimeout == 0 {
		c.PollTimeout = DefaultPollTimeout
	}
	page := os.Getpagesize()
	isPow2 := func(n int) bool { return n > 0 && n&(n-1) == 0 }
	if _, err := xdp.ParseAttachMode(string(c.Attach)); err != nil {
		return c, err
	}
	if _, err := ParseBindMode(string(c.Bind)); err != nil {
		return c, err
	}
	switch {
	case c.Attach == xdp.AttachGeneric && c.Bind == BindZeroCopy:
		return c, fmt.Errorf("%w: zero-copy AF_XDP needs the native XDP hook, not generic", xdp.ErrUnsupported)
	case !isPow2(c.FrameSize) || c.FrameSize < 2048 || c.FrameSize > page:
		return c, fmt.Errorf("afxdp: afxdp: frame size %d: want a power of two from 2048 to the page size %d", c.FrameSize, page)
	case !isPow2(c.NumFrames) || c.NumFrames < afxdpMinNumFrames || c.NumFrames > MaxNumFrames:
		return c, fmt.Errorf("afxdp: afxdp: %d frames: want a power of two from %d to %d", c.NumFrames, afxdpMinNumFrames, MaxNumFrames)
	}
	if c.Prefilter != nil {
		if _, err := c.Prefilter.rows(); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Capture is an AF_XDP capture: the redirect program attached to an
// interface and one socket per captured receive queue.
type Capture struct {
	iface   string
	mode    string
	srcs    []*Source
	closing sync.Once

	mu   sync.Mutex // guards objs and lnk against the sources' Close
	objs *bpf.XSKObjects
	lnk  link.Link

	stop chan struct{}  // closed by Close: syncClock returns (nil without a prefilter)
	done sync.WaitGroup // syncClock
}

// clockSyncEvery is how often the prefilter's Unix-time offset is
// refreshed, so that its windows follow a slewed or stepped wall clock as
// the pipeline's do (as capture/xdp does).
const clockSyncEvery = time.Second

// syncClock keeps the prefilter's clock offset current until Close.
func (a *Capture) syncClock() {
	defer a.done.Done()
	t := time.NewTicker(clockSyncEvery)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			a.mu.Lock()
			if a.objs != nil {
				_ = a.objs.SyncClock() // on failure the last offset stays: windows drift by the clock's slew
			}
			a.mu.Unlock()
		}
	}
}

// endWindow ends window i of the prefilter's clock (bpf.XSKObjects.EndWindow);
// after Close there is nothing left to end.
func (a *Capture) endWindow(i int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.objs == nil {
		return nil
	}
	return a.objs.EndWindow(i)
}

// Open opens an AF_XDP capture of cfg.Iface, for mirror and SPAN
// ports: it attaches an XDP program (through a BPF link) that redirects
// every frame of each captured receive queue into an AF_XDP socket bound to
// that queue. Those frames are taken away from the kernel's network stack:
// while the capture is open the host does not receive them (no ARP, no IP,
// no sockets, no tcpdump), so use it only on an interface that carries
// copied traffic. Frames of queues not captured still go to the stack.
//
// Each socket is a capture.Source (Sources), read by one goroutine, whose
// Packet.Data is a zero-copy view of the socket's UMEM valid until the next
// Next. Close detaches the program and closes the sockets; if the process
// dies first, the kernel detaches the program when the link's last file
// descriptor goes, and nothing is left on the interface.
//
// Errors wrap xdp.ErrNoInterface (no such interface in the caller's network
// namespace), ErrNoQueue (a queue the interface does not have),
// xdp.ErrPermission (it needs CAP_BPF, CAP_NET_ADMIN and CAP_NET_RAW, or root)
// or xdp.ErrUnsupported (a kernel without AF_XDP sockets or XDP links, a driver
// without native XDP when Attach is xdp.AttachNative, or without zero-copy when
// Bind is BindZeroCopy).
func Open(cfg Config) (*Capture, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ifindex, err := xdp.InterfaceIndex(cfg.Iface)
	if err != nil {
		return nil, err
	}
	nq, err := rxQueueCount(cfg.Iface, ifindex)
	if err != nil {
		if len(cfg.Queues) == 0 {
			return nil, err
		}
		// Queues given: trust them, the bind checks each.
		nq = slices.Max(cfg.Queues) + 1
	}
	queues := cfg.Queues
	if queues == nil {
		for q := range nq {
			queues = append(queues, q)
		}
	}
	if len(queues) == 0 {
		return nil, fmt.Errorf("%w: afxdp %s: an empty list of queues", ErrNoQueue, cfg.Iface)
	}
	seen := make(map[int]bool, len(queues))
	for _, q := range queues {
		if q < 0 || q >= nq {
			return nil, fmt.Errorf("%w: afxdp %s: queue %d: the interface's receive queues are 0 to %d", ErrNoQueue, cfg.Iface, q, nq-1)
		}
		if seen[q] {
			return nil, fmt.Errorf("afxdp: afxdp %s: queue %d is listed twice", cfg.Iface, q)
		}
		seen[q] = true
	}
	queues = slices.Clone(queues)

	var objs *bpf.XSKObjects
	if cfg.Prefilter != nil {
		rows, _ := cfg.Prefilter.rows() // checked by withDefaults
		objs, err = bpf.LoadXSKPrefilter(nq, bpf.XSKPrefilter{
			Kind: cfg.Prefilter.Kind, Seed: cfg.Prefilter.Seed, Rows: rows,
			Window: cfg.Prefilter.Window, Now: cfg.Prefilter.Now,
			MaxLen: uint32(cfg.FrameSize - xdpPacketHeadroom - 4*bpf.XSKMetaBytes),
			Margin: xskLearnMargin,
		})
	} else {
		objs, err = bpf.LoadXSK(nq)
	}
	if err != nil {
		return nil, xdp.LoadError(err)
	}
	a := &Capture{iface: cfg.Iface, objs: objs}
	var pf *prefilterMem
	if cfg.Prefilter != nil {
		if pf, err = mapPrefilter(objs, nq, cfg.Prefilter.Window); err != nil {
			objs.Close()
			return nil, err
		}
		pf.endWindow = a.endWindow
		a.stop = make(chan struct{})
		a.done.Add(1)
		go a.syncClock()
	}
	fail := func(err error) (*Capture, error) {
		a.Close()
		return nil, err
	}
	// Zero-copy sockets need the native hook: with auto, insist on it.
	attachMode := cfg.Attach
	if cfg.Bind == BindZeroCopy && attachMode == xdp.AttachAuto {
		attachMode = xdp.AttachNative
	}
	// Until a queue's socket is in the map, the program passes its frames
	// to the stack: attaching first loses nothing and tells which hook
	// the sockets get.
	lnk, hook, err := xdp.Attach(objs.Program, ifindex, attachMode)
	if err != nil {
		return fail(err)
	}
	a.lnk = lnk
	bind := cfg.Bind
	if hook == xdp.AttachGeneric && bind == BindAuto {
		bind = BindCopy // the generic hook copies anyway
	}
	for _, q := range queues {
		s, err := openXSK(cfg, ifindex, q, bind, pf)
		if err != nil {
			return fail(err)
		}
		s.detach = a.deleteSocket
		a.srcs = append(a.srcs, s)
		if err := objs.SetSocket(q, s.res.fd); err != nil {
			return fail(fmt.Errorf("afxdp: afxdp %s: adding queue %d's socket to the XSKMAP: %w", cfg.Iface, q, err))
		}
		if pf != nil {
			// The socket is in the map: the program may learn keys
			// from here on, before its reader first runs.
			s.setRoom()
		}
	}
	zc := 0
	for _, s := range a.srcs {
		if s.zeroCopy {
			zc++
		}
	}
	switch zc {
	case 0:
		a.mode = string(hook) + "/copy"
	case len(a.srcs):
		a.mode = string(hook) + "/zerocopy"
	default:
		a.mode = fmt.Sprintf("%s/zerocopy on %d of %d queues, copy on the others", hook, zc, len(a.srcs))
	}
	return a, nil
}

// deleteSocket takes queue's socket out of the XSKMAP, so that the
// program passes the queue's frames to the stack again.
func (a *Capture) deleteSocket(queue int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.objs != nil {
		a.objs.DeleteSocket(queue)
	}
}

// Sources returns the capture's sources, one per queue in the order of
// Config.Queues (or of the queue ids): each is an *Source, which
// also implements capture.DropCounter, for one reader goroutine.
func (a *Capture) Sources() []capture.Source {
	srcs := make([]capture.Source, len(a.srcs))
	for i, s := range a.srcs {
		if s.pf != nil {
			srcs[i] = prefilteredSource{s}
		} else {
			srcs[i] = s
		}
	}
	return srcs
}

// Prefiltered says whether the capture has the in-kernel prefilter
// (Config.Prefilter).
func (a *Capture) Prefiltered() bool { return len(a.srcs) > 0 && a.srcs[0].pf != nil }

// Iface returns the interface captured on.
func (a *Capture) Iface() string { return a.iface }

// Mode says how the capture runs: the XDP hook and whether the sockets
// copy frames, e.g. "native/copy", "generic/copy", "native/zerocopy".
func (a *Capture) Mode() string { return a.mode }

// Close detaches the program, closes every source (a Next waiting in the
// kernel returns capture.ErrClosed at once) and releases the program. It
// may be called from any goroutine and more than once.
func (a *Capture) Close() error {
	var errs []error
	a.closing.Do(func() {
		if a.stop != nil {
			close(a.stop)
			a.done.Wait()
		}
		a.mu.Lock()
		lnk := a.lnk
		a.lnk = nil
		a.mu.Unlock()
		if lnk != nil {
			if err := lnk.Close(); err != nil {
				errs = append(errs, fmt.Errorf("afxdp: afxdp %s: detaching: %w", a.iface, err))
			}
		}
		for _, s := range a.srcs {
			errs = append(errs, s.Close())
		}
		a.mu.Lock()
		if a.objs != nil {
			errs = append(errs, a.objs.Close())
			a.objs = nil
		}
		a.mu.Unlock()
	})
	return errors.Join(errs...)
}

//go:build linux && !(mips || mips64 || ppc64 || s390x)

package xdp

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// Defaults of Config.
const (
	DefaultPollTimeout = 100 * time.Millisecond
	// clockSyncEvery is how often the program's Unix-time offset is
	// refreshed, so that its windows follow a slewed or stepped wall
	// clock as the pipeline's do.
	clockSyncEvery = time.Second
)

// Config configures Open.
type Config struct {
	// Iface is the interface to attach to.
	Iface string
	// Key is the key kind the kernel builds.
	Key flow.KeyKind
	// Prefix masks the keys' addresses to their networks in the kernel
	// (flow.Mask, --prefix), before its prefilter: the prefilter and the
	// rings carry networks. The zero Mask keys hosts.
	Prefix flow.Mask
	// Seed keys the prefilter's hash; it should be secret and random
	// per run (an attacker who can predict it can hide flows behind
	// prefilter collisions).
	Seed uint64
	// Window is the pipeline's window: the prefilter forgets every key at
	// each window boundary, so each key reaches user space again in every
	// window it occurs in, and the kernel counts frames by window
	// (WindowCounts). 0: one window.
	Window time.Duration
	// Attach selects the XDP hook (AttachAuto when empty).
	Attach AttachMode
	// PrefilterBytes sizes each CPU's prefilter (bpf.Config); 0 means
	// bpf.DefaultPrefilterBytes, negative turns it off.
	PrefilterBytes int
	// RingBytes sizes each CPU's ring buffer (bpf.Config); 0 means
	// bpf.DefaultRingBytes.
	RingBytes int
	// PollTimeout is how long Next waits for a key before it returns
	// capture.ErrTimeout; 0 means DefaultPollTimeout.
	PollTimeout time.Duration
	// Now is the wall clock the kernel's frame times follow (bpf.Config);
	// nil means time.Now. Tests inject one.
	Now func() time.Time
	// Decap decapsulates in the kernel (bpf.Config.Decap, --decap): the
	// program keys the innermost IP header reached through the tunnels
	// it lists, as flow.Key.DecodeDecap does, with VXLAN and Geneve VNIs
	// as segments unless NoSegment, and counts the tunnel reasons. The
	// zero Decap is off: the outermost header, as before.
	Decap flow.Decap
}

// Capture is the XDP fast path attached to an interface: the program of package
// bpf, its BPF link and a reader of each CPU's ring buffer.
type Capture struct {
	objs    *bpf.Objects
	link    link.Link
	mode    AttachMode
	sources []*ringSource
	stop    chan struct{}
	done    sync.WaitGroup

	mu       sync.Mutex // serialises counter reads (one buffer for all sources)
	counters []bpf.Counters
	wins     windowReader // for WindowCounts, under mu

	closeOnce sync.Once
	closeErr  error
}

// Open loads the XDP program, opens a reader on each CPU's ring buffer
// and attaches the program to cfg.Iface through a BPF link: when the process
// exits or is killed, the kernel detaches it. With AttachAuto it uses the
// driver's hook where the driver has one and the generic hook otherwise;
// Mode says which.
//
// The program never drops or alters a frame: the interface keeps working as
// before. Errors wrap ErrNoInterface, ErrPermission or ErrUnsupported where
// one of those is the cause.
func Open(cfg Config) (*Capture, error) {
	if !cfg.Key.IsValid() {
		return nil, fmt.Errorf("xdp: %w", flow.ErrBadKind)
	}
	if cfg.Window < 0 {
		return nil, fmt.Errorf("xdp: negative window %v", cfg.Window)
	}
	mode, err := ParseAttachMode(string(cfg.Attach))
	if err != nil {
		return nil, err
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = DefaultPollTimeout
	}
	ifindex, err := InterfaceIndex(cfg.Iface)
	if err != nil {
		return nil, err
	}
	// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK; newer ones
	// ignore it. Failing to lift it is not an error in itself: the load
	// says what is wrong.
	_ = rlimit.RemoveMemlock()
	objs, err := bpf.Load(bpf.Config{
		Kind:           cfg.Key,
		Prefix:         cfg.Prefix,
		Seed:           cfg.Seed,
		Window:         cfg.Window,
		PrefilterBytes: cfg.PrefilterBytes,
		RingBytes:      cfg.RingBytes,
		Now:            cfg.Now,
		Decap:          cfg.Decap,
	})
	if err != nil {
		return nil, LoadError(err)
	}
	x := &Capture{objs: objs, stop: make(chan struct{})}
	for cpu, m := range objs.Rings {
		rd, err := ringbuf.NewReader(m)
		if err != nil {
			x.Close()
			return nil, fmt.Errorf("xdp: reading the ring buffer of CPU %d: %w", cpu, err)
		}
		x.sources = append(x.sources, &ringSource{x: x, cpu: cpu, rd: rd, poll: cfg.PollTimeout})
	}
	// Attach last: from here on the program runs, and its keys have
	// readers.
	x.link, x.mode, err = Attach(objs.Program, ifindex, mode)
	if err != nil {
		x.Close()
		return nil, fmt.Errorf("%w (interface %s)", err, cfg.Iface)
	}
	x.done.Add(1)
	go x.syncClock()
	return x, nil
}

// Mode returns the hook the program is attached to: AttachNative or
// AttachGeneric.
func (x *Capture) Mode() AttachMode { return x.mode }

// Sources returns one source per CPU, in CPU order. Each yields the keys its
// CPU's prefilter had not seen (capture.Packet.Key set, Data empty, TimeNs
// the kernel's Unix time for the frame) and implements
// capture.WindowCounter with the CPU's counters (see WindowCounts for when a
// window's counts are final). Each source is read by one goroutine.
func (x *Capture) Sources() []capture.Source {
	out := make([]capture.Source, len(x.sources))
	for i, s := range x.sources {
		out[i] = s
	}
	return out
}

// WindowSlots implements capture.WindowCounter: each CPU keeps the counts
// of its last bpf.WindowSlots windows.
func (x *Capture) WindowSlots() int { return bpf.WindowSlots }

// KernelCounts implements capture.KernelCounter with the sum of the CPUs'
// counters.
func (x *Capture) KernelCounts(c *capture.KernelCounts) error { return x.kernelCounts(-1, c) }

// WindowCounts implements capture.WindowCounter with the sum of the CPUs'
// counts of window i: the frames the kernel stamped with a time in window
// i (the time their events carry), with the window length of
// Config.Window (with one window, window 0 holds every frame). It
// returns an error wrapping capture.ErrWindowGone when a CPU's clock has
// moved bpf.WindowSlots windows past i.
//
// The counts it returns are final: when a CPU's clock has not yet passed
// window i, it ends the window in the kernel first (bpf.Objects.EndWindow,
// an RCU grace period: milliseconds), after which every CPU stamps each
// frame with a time in window i+1 or later, even when its clock still reads
// a time in window i. So call it when window i is over, and once its
// events have been read from the CPUs' rings, so that the keys read and the
// counts describe the same frames. The pipeline does so when it closes a
// window on reading, from the CPU's ring, an event of a later window: a
// CPU's events come in the order of their windows, so every event of
// window i came before. When a live pipeline closes a window by the wall
// clock instead (its end plus the lateness has passed), events of the
// window can still be in the ring if the reader is behind, or if the
// kernel's clock lags the wall clock (by the slew since the last clock
// sync, under a millisecond): they then arrive after their window's counts
// and are counted late. A lateness that covers both avoids it. A window
// that has not begun is not ended, and its counts (none yet) are not final.
func (x *Capture) WindowCounts(i int64, c *capture.KernelCounts) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.wins.read(x.objs, -1, i, c)
}

// Counters returns each CPU's kernel counters.
func (x *Capture) Counters() ([]bpf.Counters, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var err error
	x.counters, err = x.objs.Counters(x.counters)
	return append([]bpf.Counters(nil), x.counters...), err
}

// Close detaches the program, then closes the readers (a Next blocked in
// one returns capture.ErrClosed) and the program and maps. It is safe to
// call more than once.
func (x *Capture) Close() error {
	x.closeOnce.Do(func() {
		var errs []error
		if x.link != nil {
			errs = append(errs, x.link.Close())
		}
		close(x.stop)
		x.done.Wait()
		for _, s := range x.sources {
			s.closed.Store(true)
			errs = append(errs, s.rd.Close())
		}
		errs = append(errs, x.objs.Close())
		x.closeErr = errors.Join(errs...)
	})
	return x.closeErr
}

// syncClock keeps the program's Unix-time offset current until Close.
func (x *Capture) syncClock() {
	defer x.done.Done()
	t := time.NewTicker(clockSyncEvery)
	defer t.Stop()
	for {
		select {
		case <-x.stop:
			return
		case <-t.C:
			_ = x.objs.SyncClock() // on failure the last offset stays: windows drift by the clock's slew
		}
	}
}

// kernelCounts fills c with the counters of cpu, or of every CPU when cpu
// is negative.
func (x *Capture) kernelCounts(cpu int, c *capture.KernelCounts) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var err error
	if x.counters, err = x.objs.Counters(x.counters); err != nil {
		return err
	}
	if cpu >= len(x.counters) {
		return fmt.Errorf("xdp: no counters for CPU %d", cpu)
	}
	var k bpf.Counters
	for i := range x.counters {
		if cpu < 0 || i == cpu {
			addCounters(&k, &x.counters[i])
		}
	}
	fillKernelCounts(c, &k)
	return nil
}

// windowReader reads the kernel's counts of a window into buffers of its
// own.
type windowReader struct {
	cpus []int64
	wins []bpf.WindowCounters
}

// read fills c with the counts of window i of cpu, or of every CPU when
// cpu is negative, ending the window first on a CPU whose clock has not
// passed it (see XDP.WindowCounts).
func (r *windowReader) read(o *bpf.Objects, cpu int, i int64, c *capture.KernelCounts) error {
	var err error
	if r.cpus, err = o.CPUWindows(r.cpus); err != nil {
		return err
	}
	if cpu >= len(r.cpus) {
		return fmt.Errorf("xdp: no counters for CPU %d", cpu)
	}
	for n, w := range r.cpus {
		if (cpu < 0 || n == cpu) && w <= i {
			// This CPU may still count a frame in window i.
			if err := o.EndWindow(i); err != nil {
				return fmt.Errorf("xdp: ending window %d: %w", i, err)
			}
			break
		}
	}
	if r.wins, err = o.WindowCounters(i, r.wins); err != nil {
		return err
	}
	var k bpf.Counters
	for n := range r.wins {
		if cpu >= 0 && n != cpu {
			continue
		}
		if r.wins[n].Gone {
			return fmt.Errorf("xdp: window %d of CPU %d: %w", i, n, capture.ErrWindowGone)
		}
		addCounters(&k, &r.wins[n].Counters)
	}
	fillKernelCounts(c, &k)
	return nil
}

// addCounters adds b to a.
func addCounters(a, b *bpf.Counters) {
	a.Packets += b.Packets
	a.Keyed += b.Keyed
	a.PrefilterHits += b.PrefilterHits
	a.Emitted += b.Emitted
	a.RingFull += b.RingFull
	for i, n := range b.Errors {
		a.Errors[i] += n
	}
}

// fillKernelCounts sets c to k, reusing c's map.
func fillKernelCounts(c *capture.KernelCounts, k *bpf.Counters) {
	c.Packets, c.Keyed, c.Prefiltered, c.RingFull = k.Packets, k.Keyed, k.PrefilterHits, k.RingFull
	if c.Errors == nil {
		c.Errors = make(map[string]uint64, bpf.NumErrs)
	}
	clear(c.Errors)
	for i, n := range k.Errors {
		c.Errors[bpf.Reasons[i]] = n
	}
}

// ringSource reads one CPU's ring buffer.
type ringSource struct {
	x      *Capture
	cpu    int
	rd     *ringbuf.Reader
	rec    ringbuf.Record
	poll   time.Duration
	wins   windowReader // for WindowCounts, by the reading goroutine
	closed atomic.Bool
}

// Next returns the next key of the CPU's ring buffer, capture.ErrTimeout
// after PollTimeout without one, or capture.ErrClosed after Close. A record
// that is not a valid key (which a correct program never writes) is an error
// wrapping capture.ErrCorrupt: counted, and reading goes on.
func (s *ringSource) Next(p *capture.Packet) error {
	if s.closed.Load() {
		return capture.ErrClosed
	}
	if s.rd.AvailableBytes() == 0 {
		s.rd.SetDeadline(time.Now().Add(s.poll))
	}
	if err := s.rd.ReadInto(&s.rec); err != nil {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return capture.ErrTimeout
		case errors.Is(err, os.ErrClosed), errors.Is(err, ringbuf.ErrClosed), s.closed.Load():
			return capture.ErrClosed
		}
		return fmt.Errorf("xdp: reading the ring buffer of CPU %d: %w", s.cpu, err)
	}
	key, t, err := bpf.DecodeEvent(s.rec.RawSample)
	if err != nil {
		return fmt.Errorf("%w: CPU %d ring buffer record of %d bytes: %v", capture.ErrCorrupt, s.cpu, len(s.rec.RawSample), err)
	}
	*p = capture.Packet{Key: key, TimeNs: t, LinkType: flow.LinkEthernet}
	return nil
}

// KernelCounts implements capture.KernelCounter with the CPU's counters.
func (s *ringSource) KernelCounts(c *capture.KernelCounts) error {
	return s.x.kernelCounts(s.cpu, c)
}

// WindowCounts implements capture.WindowCounter with the CPU's counts of
// window i; see XDP.WindowCounts, whose contract it shares. Call it from
// the goroutine that reads the source.
func (s *ringSource) WindowCounts(i int64, c *capture.KernelCounts) error {
	return s.wins.read(s.x.objs, s.cpu, i, c)
}

// WindowSlots implements capture.WindowCounter.
func (s *ringSource) WindowSlots() int { return bpf.WindowSlots }

// Close closes the whole fast path (all CPUs' sources): the pipeline's
// caller owns it and closes it once; this is for capture.Source.
func (s *ringSource) Close() error { return s.x.Close() }

var (
	_ capture.Source        = (*ringSource)(nil)
	_ capture.WindowCounter = (*ringSource)(nil)
	_ capture.WindowCounter = (*Capture)(nil)
)

//go:build linux

package fastpath

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

// Defaults of XDPConfig.
const (
	DefaultPollTimeout = 100 * time.Millisecond
	// clockSyncEvery is how often the program's Unix-time offset is
	// refreshed, so that its windows follow a slewed or stepped wall
	// clock as the pipeline's do.
	clockSyncEvery = time.Second
)

// XDPConfig configures OpenXDP.
type XDPConfig struct {
	// Iface is the interface to attach to.
	Iface string
	// Key is the key kind the kernel builds.
	Key flow.KeyKind
	// Seed keys the prefilter's hash; it should be secret and random
	// per run (an attacker who can predict it can hide flows behind
	// prefilter collisions).
	Seed uint64
	// Window is the pipeline's window: the prefilter forgets every key at
	// each window boundary, so each key reaches user space again in every
	// window it occurs in. 0: one window.
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
}

// XDP is the XDP fast path attached to an interface: the program of package
// bpf, its BPF link and a reader of each CPU's ring buffer.
type XDP struct {
	objs    *bpf.Objects
	link    link.Link
	mode    AttachMode
	sources []*ringSource
	stop    chan struct{}
	done    sync.WaitGroup

	mu       sync.Mutex // serialises counter reads (one buffer for all sources)
	counters []bpf.Counters

	closeOnce sync.Once
	closeErr  error
}

// OpenXDP loads the XDP program, opens a reader on each CPU's ring buffer
// and attaches the program to cfg.Iface through a BPF link: when the process
// exits or is killed, the kernel detaches it. With AttachAuto it uses the
// driver's hook where the driver has one and the generic hook otherwise;
// Mode says which.
//
// The program never drops or alters a frame: the interface keeps working as
// before. Errors wrap ErrNoInterface, ErrPermission or ErrUnsupported where
// one of those is the cause.
func OpenXDP(cfg XDPConfig) (*XDP, error) {
	if !cfg.Key.IsValid() {
		return nil, fmt.Errorf("fastpath: %w", flow.ErrBadKind)
	}
	if cfg.Window < 0 {
		return nil, fmt.Errorf("fastpath: negative window %v", cfg.Window)
	}
	mode, err := ParseAttachMode(string(cfg.Attach))
	if err != nil {
		return nil, err
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = DefaultPollTimeout
	}
	ifindex, err := interfaceIndex(cfg.Iface)
	if err != nil {
		return nil, err
	}
	// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK; newer ones
	// ignore it. Failing to lift it is not an error in itself: the load
	// says what is wrong.
	_ = rlimit.RemoveMemlock()
	objs, err := bpf.Load(bpf.Config{
		Kind:           cfg.Key,
		Seed:           cfg.Seed,
		Window:         cfg.Window,
		PrefilterBytes: cfg.PrefilterBytes,
		RingBytes:      cfg.RingBytes,
	})
	if err != nil {
		return nil, loadError(err)
	}
	x := &XDP{objs: objs, stop: make(chan struct{})}
	for cpu, m := range objs.Rings {
		rd, err := ringbuf.NewReader(m)
		if err != nil {
			x.Close()
			return nil, fmt.Errorf("fastpath: reading the ring buffer of CPU %d: %w", cpu, err)
		}
		x.sources = append(x.sources, &ringSource{x: x, cpu: cpu, rd: rd, poll: cfg.PollTimeout})
	}
	// Attach last: from here on the program runs, and its keys have
	// readers.
	x.link, x.mode, err = attach(objs.Program, ifindex, mode)
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
func (x *XDP) Mode() AttachMode { return x.mode }

// Sources returns one source per CPU, in CPU order. Each yields the keys its
// CPU's prefilter had not seen (capture.Packet.Key set, Data empty, TimeNs
// the kernel's Unix time for the frame) and implements capture.KernelCounter
// with the CPU's counters. Each source is read by one goroutine.
func (x *XDP) Sources() []capture.Source {
	out := make([]capture.Source, len(x.sources))
	for i, s := range x.sources {
		out[i] = s
	}
	return out
}

// Counters returns each CPU's kernel counters.
func (x *XDP) Counters() ([]bpf.Counters, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var err error
	x.counters, err = x.objs.Counters(x.counters)
	return append([]bpf.Counters(nil), x.counters...), err
}

// Close detaches the program, then closes the readers (a Next blocked in
// one returns capture.ErrClosed) and the program and maps. It is safe to
// call more than once.
func (x *XDP) Close() error {
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
func (x *XDP) syncClock() {
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

// kernelCounts fills c with the counters of cpu.
func (x *XDP) kernelCounts(cpu int, c *capture.KernelCounts) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var err error
	if x.counters, err = x.objs.Counters(x.counters); err != nil {
		return err
	}
	if cpu >= len(x.counters) {
		return fmt.Errorf("fastpath: no counters for CPU %d", cpu)
	}
	k := &x.counters[cpu]
	c.Packets, c.Keyed, c.Prefiltered, c.RingFull = k.Packets, k.Keyed, k.PrefilterHits, k.RingFull
	if c.Errors == nil {
		c.Errors = make(map[string]uint64, bpf.NumErrs)
	}
	for i, n := range k.Errors {
		c.Errors[flow.Reason(bpf.Errs[i])] = n
	}
	return nil
}

// ringSource reads one CPU's ring buffer.
type ringSource struct {
	x      *XDP
	cpu    int
	rd     *ringbuf.Reader
	rec    ringbuf.Record
	poll   time.Duration
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
		return fmt.Errorf("fastpath: reading the ring buffer of CPU %d: %w", s.cpu, err)
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

// Close closes the whole fast path (all CPUs' sources): the pipeline's
// caller owns it and closes it once; this is for capture.Source.
func (s *ringSource) Close() error { return s.x.Close() }

var (
	_ capture.Source        = (*ringSource)(nil)
	_ capture.KernelCounter = (*ringSource)(nil)
)

//go:build linux && !(mips || mips64 || ppc64 || s390x)

package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/flowdedup/flowdedup/flow"
)

// Sizes and defaults.
const (
	// EventSize is the length of a ring buffer record (struct fd_event):
	// the time, the 44-byte key and 4 bytes of padding.
	EventSize = 56
	// KeyBytes is the length of the key in a record (struct fd_key), with
	// its segment.
	KeyBytes = 44
	// RowBytes is the size of one prefilter row (struct fd_row).
	RowBytes = 32
	// DefaultRingBytes is each CPU's ring buffer size when Config.RingBytes is 0.
	DefaultRingBytes = 4 << 20
	// DefaultPrefilterBytes is each CPU's prefilter size when Config.PrefilterBytes is 0.
	DefaultPrefilterBytes = 256 << 10
	// WindowSlots is how many windows each CPU keeps counts of
	// (FD_WINDOW_SLOTS): the counts of window i are there until the CPU's
	// clock reaches window i+WindowSlots. It is twice the most windows
	// the pipeline keeps open, so a pipeline that many windows behind
	// still finds them.
	WindowSlots = 128
)

// Config configures Load.
type Config struct {
	// Kind is the key kind the program builds.
	Kind flow.KeyKind
	// Prefix masks every key's addresses to their networks in the
	// kernel, before the prefilter (flow.Mask.Apply): the prefilter and
	// the rings carry networks. The zero Mask keys hosts.
	Prefix flow.Mask
	// Seed keys the prefilter's hash; it should be random per run.
	Seed uint64
	// Window is the window length: the prefilter forgets every key at
	// each multiple of Window in Unix time (as pipeline windows do).
	// 0: one window for the whole run.
	Window time.Duration
	// PrefilterBytes is the size of each CPU's prefilter, rounded down to
	// whole rows; 0 means DefaultPrefilterBytes, a negative value turns
	// the prefilter off (every key is emitted: the parity tests use this).
	PrefilterBytes int
	// RingBytes is the size of each CPU's ring buffer: a power of two
	// and a multiple of the page size. 0 means DefaultRingBytes.
	RingBytes int
	// Now is the wall clock the program's Unix time follows (SyncClock
	// sets its offset from CLOCK_BOOTTIME to Now); nil means time.Now.
	// Tests inject one to put the program's clock where they need it,
	// such as in the middle of a window.
	Now func() time.Time
	// Decap makes the program key the innermost IP header reached
	// through the tunnels it lists, on its ports, with the VNI of VXLAN
	// and Geneve as the key's segment unless NoSegment: the key
	// flow.Key.DecodeDecap gives, or its error class. The zero Decap
	// (no tunnels) is today's program, the outermost header; the
	// decapsulating parser is then dead code the verifier prunes.
	Decap flow.Decap
}

// decapPorts returns d's ports in network byte order, as the program
// compares them (0 matches nothing, as in flow).
func decapPorts(d flow.Decap) (vxlan [2]uint16, geneve, gtpu uint16) {
	be := func(p uint16) uint16 { return p<<8 | p>>8 } // the object is bpfel
	return [2]uint16{be(d.VXLANPorts[0]), be(d.VXLANPorts[1])}, be(d.GenevePort), be(d.GTPUPort)
}

// Counters are one CPU's counters (struct fd_counters), cumulative since
// Load or of one window. Packets = Keyed + the sum of Errors; Keyed =
// PrefilterHits + Emitted + RingFull.
type Counters struct {
	Packets       uint64
	Keyed         uint64
	PrefilterHits uint64
	Emitted       uint64
	RingFull      uint64
	Errors        [NumErrs]uint64 // by ErrIndex
}

// WindowCounters are one CPU's counters of one window.
type WindowCounters struct {
	Counters
	// Gone says the CPU's clock has reached WindowSlots windows past this
	// one, so that its slot may hold a newer window's counts: this
	// window's are lost (Counters is zero). Its frames are still in the
	// totals.
	Gone bool
}

// NumErrs is the number of error classes the program counts (FD_NUM_ERRS).
const NumErrs = 9

// Errs maps the error indexes of Counters.Errors (enum fd_err) to flow's
// sentinel errors. The last five come only with decapsulation.
var Errs = [NumErrs]error{flow.ErrTruncated, flow.ErrNotIP, flow.ErrBadHeader, flow.ErrTooManyHeaders,
	flow.ErrTunnelTruncated, flow.ErrTunnelUnknown, flow.ErrTunnelNotData, flow.ErrTunnelTooDeep, flow.ErrTunnelBadHeader}

// Reasons are the labels of Errs (flow.Reason): the reason each error
// index is counted under.
var Reasons = [NumErrs]string{"truncated", "not_ip", "bad_header", "too_many_headers",
	"tunnel_truncated", "tunnel_unknown", "tunnel_not_data", "tunnel_too_deep", "tunnel_bad_header"}

// Objects is a loaded XDP program with its maps. Attaching it is the
// caller's business (capture/xdp uses a BPF link).
type Objects struct {
	// Program is the XDP program.
	Program *ebpf.Program
	// Rings are the per-CPU ring buffers, indexed by CPU number: Rings[i]
	// holds the keys CPU i emitted.
	Rings []*ebpf.Map

	outer     *ebpf.Map      // fd_rings: Rings by CPU
	cpu       *ebpf.Map      // fd_cpu: totals and clock by CPU
	windows   *ebpf.Map      // fd_windows: counts by window slot and CPU
	prefilter *ebpf.Map      // fd_prefilter
	config    *ebpf.Map      // fd_config
	floor     *ebpf.Variable // fd_floor_ns
	windowNs  uint64
	now       func() time.Time // Config.Now; nil: CLOCK_REALTIME

	mu      sync.Mutex    // serialises EndWindow, and the reads into the buffers
	floorNs uint64        // the floor last set
	cpuBuf  []xdpFdCpu    // values of fd_cpu
	winBuf  []xdpFdWindow // values of one fd_windows slot
}

// settings are a Config checked, with its defaults applied.
type settings struct {
	kind      flow.KeyKind
	decap     flow.Decap
	prefix    flow.Mask
	seed      uint64
	windowNs  uint64
	rows      uint32 // 0: prefilter off
	ringBytes uint32
}

func (cfg Config) check() (settings, error) {
	s := settings{kind: cfg.Kind, prefix: cfg.Prefix, seed: cfg.Seed, decap: cfg.Decap}
	if !cfg.Kind.IsValid() {
		return s, fmt.Errorf("bpf: invalid key kind %d", uint8(cfg.Kind))
	}
	if cfg.Decap.Tunnels&^flow.TunnelsAll != 0 {
		return s, fmt.Errorf("bpf: unknown tunnel kinds %#x", uint8(cfg.Decap.Tunnels&^flow.TunnelsAll))
	}
	if cfg.Window < 0 {
		return s, fmt.Errorf("bpf: negative window %v", cfg.Window)
	}
	s.windowNs = uint64(cfg.Window)

	if pb := cfg.PrefilterBytes; pb >= 0 { // else off: rows 0
		if pb == 0 {
			pb = DefaultPrefilterBytes
		}
		rows := pb / RowBytes
		if rows == 0 {
			return s, fmt.Errorf("bpf: prefilter of %d bytes holds no %d-byte row (a negative size turns the prefilter off)", pb, RowBytes)
		}
		if uint64(rows) > math.MaxUint32 {
			return s, fmt.Errorf("bpf: prefilter of %d bytes has more than 2^32 rows", pb)
		}
		s.rows = uint32(rows)
	}

	rb := cfg.RingBytes
	if rb == 0 {
		rb = DefaultRingBytes
	}
	page := os.Getpagesize()
	if rb <= 0 || rb&(rb-1) != 0 || rb%page != 0 || uint64(rb) > math.MaxUint32 {
		return s, fmt.Errorf("bpf: ring buffer size %d is not a power of two multiple of the page size (%d bytes) below 4 GiB", rb, page)
	}
	s.ringBytes = uint32(rb)
	return s, nil
}

// Load checks cfg, loads the program and creates its maps: one ring buffer
// and one prefilter per possible CPU. It sets the clock offset to the
// current difference of the Unix clock and CLOCK_BOOTTIME.
func Load(cfg Config) (*Objects, error) {
	s, err := cfg.check()
	if err != nil {
		return nil, err
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("bpf: counting possible CPUs: %w", err)
	}
	spec, err := loadXdp()
	if err != nil {
		return nil, fmt.Errorf("bpf: reading the XDP object: %w", err)
	}
	vars := map[string]any{
		xdpVarFdKeyKind:       uint8(s.kind),
		xdpVarFdHashSeed:      s.seed,
		xdpVarFdWindowNs:      s.windowNs,
		xdpVarFdPrefilterRows: s.rows,
	}
	if s.decap.Tunnels != 0 {
		vxlan, geneve, gtpu := decapPorts(s.decap)
		vars[xdpVarFdDecap] = uint8(s.decap.Tunnels)
		vars[xdpVarFdVxlanPorts] = vxlan
		vars[xdpVarFdGenevePort] = geneve
		vars[xdpVarFdGtpuPort] = gtpu
		if !s.decap.NoSegment {
			vars[xdpVarFdSegment] = uint8(1)
		}
	}
	if !s.prefix.IsZero() {
		b4, b6 := s.prefix.Bits(false), s.prefix.Bits(true)
		mask4, mask6 := prefixMasks(b4, b6)
		vars[xdpVarFdPrefix] = uint8(1)
		vars[xdpVarFdPrefixV4] = uint8(b4)
		vars[xdpVarFdPrefixV6] = uint8(b6)
		vars[xdpVarFdMask4] = mask4
		vars[xdpVarFdMask6] = mask6
	}
	for name, v := range vars {
		vs, ok := spec.Variables[name]
		if !ok {
			return nil, fmt.Errorf("bpf: the XDP object has no variable %s", name)
		}
		if err := vs.Set(v); err != nil {
			return nil, fmt.Errorf("bpf: setting %s: %w", name, err)
		}
	}
	spec.Maps[xdpMapFdPrefilter].MaxEntries = max(s.rows, 1)

	outer := spec.Maps[xdpMapFdRings]
	outer.MaxEntries = uint32(cpus)
	outer.InnerMap.MaxEntries = s.ringBytes
	o := &Objects{Rings: make([]*ebpf.Map, 0, cpus)}
	for cpu := range cpus {
		ring, err := ebpf.NewMap(outer.InnerMap.Copy())
		if err != nil {
			o.Close()
			return nil, fmt.Errorf("bpf: creating the ring buffer of CPU %d (%d bytes): %w", cpu, s.ringBytes, err)
		}
		o.Rings = append(o.Rings, ring)
		outer.Contents = append(outer.Contents, ebpf.MapKV{Key: uint32(cpu), Value: ring})
	}

	var objs struct {
		xdpPrograms
		xdpMaps
		xdpVariables
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		o.Close()
		return nil, fmt.Errorf("bpf: loading the XDP program: %w", err)
	}
	o.Program, o.outer, o.cpu, o.windows, o.prefilter, o.config = objs.FdXdp, objs.FdRings, objs.FdCpu, objs.FdWindows, objs.FdPrefilter, objs.FdConfig
	o.floor, o.windowNs, o.now = objs.FdFloorNs, s.windowNs, cfg.Now
	if err := o.SyncClock(); err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// prefixMasks returns the masks of IPv4 addresses of prefix length b4 and
// of IPv6 addresses of length b6, as the program reads them: the mask's
// bytes in network order, read as little-endian words (the object is
// bpfel).
func prefixMasks(b4, b6 int) (uint32, [2]uint64) {
	var m [16]byte
	binary.BigEndian.PutUint32(m[:4], ^uint32(0)<<(32-uint(b4)))
	mask4 := binary.LittleEndian.Uint32(m[:4])
	binary.BigEndian.PutUint64(m[:8], ^uint64(0)<<(64-uint(min(b6, 64))))
	binary.BigEndian.PutUint64(m[8:], ^uint64(0)<<(128-uint(max(b6, 64))))
	return mask4, [2]uint64{binary.LittleEndian.Uint64(m[:8]), binary.LittleEndian.Uint64(m[8:])}
}

// Close releases the program and its maps (a program still attached
// through a link stays loaded until the link is closed).
func (o *Objects) Close() error {
	// (Close methods of nil Programs and Maps do nothing.)
	errs := []error{o.Program.Close(), o.outer.Close(), o.cpu.Close(), o.windows.Close(), o.prefilter.Close(), o.config.Close()}
	for _, r := range o.Rings {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}

// Counters reads every CPU's counters into dst, resized to the number of
// possible CPUs, and returns it.
func (o *Objects) Counters(dst []Counters) ([]Counters, error) {
	var vals []xdpFdCpu
	if err := o.cpu.Lookup(uint32(0), &vals); err != nil {
		return dst, fmt.Errorf("bpf: reading the counters: %w", err)
	}
	dst = slices.Grow(dst[:0], len(vals))[:len(vals)]
	for i := range vals {
		dst[i] = counters(&vals[i].Total)
	}
	return dst, nil
}

func counters(v *xdpFdCounters) Counters {
	return Counters{
		Packets:       v.Packets,
		Keyed:         v.Keyed,
		PrefilterHits: v.PrefilterHits,
		Emitted:       v.Emitted,
		RingFull:      v.RingFull,
		Errors:        v.Errors,
	}
}

// CPUWindows reads every CPU's window into dst, resized to the number of
// possible CPUs, and returns it: the newest window the CPU has counted a
// frame in (0 with one window, or before the CPU's first frame). A CPU
// counts no frame in an earlier window.
func (o *Objects) CPUWindows(dst []int64) ([]int64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.cpu.Lookup(uint32(0), &o.cpuBuf); err != nil {
		return dst, fmt.Errorf("bpf: reading the CPUs' windows: %w", err)
	}
	dst = slices.Grow(dst[:0], len(o.cpuBuf))[:len(o.cpuBuf)]
	for i := range o.cpuBuf {
		dst[i] = int64(o.cpuBuf[i].Window)
	}
	return dst, nil
}

// WindowCounters reads every CPU's counts of window i (the frames the CPU
// stamped with a time in [i*Window, (i+1)*Window)) into dst, resized to
// the number of possible CPUs, and returns it. With one window
// (Config.Window 0) every frame is in window 0. A CPU that counted no
// frame of window i has zero counts; one whose clock has reached window
// i+WindowSlots has Gone set. The counts may still grow while a CPU's
// clock is in window i or earlier: see EndWindow.
func (o *Objects) WindowCounters(i int64, dst []WindowCounters) ([]WindowCounters, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	// The slot, then the CPUs' windows: a CPU takes a slot over only
	// after its window has moved on (fd_clock, fd_xdp), so if its window
	// is still within WindowSlots of i after the slot was read, the slot
	// was not taken over before or while it was read.
	if err := o.windows.Lookup(uint32(slotOf(i)), &o.winBuf); err != nil {
		return dst, fmt.Errorf("bpf: reading the counts of window %d: %w", i, err)
	}
	if err := o.cpu.Lookup(uint32(0), &o.cpuBuf); err != nil {
		return dst, fmt.Errorf("bpf: reading the CPUs' windows: %w", err)
	}
	n := min(len(o.winBuf), len(o.cpuBuf))
	dst = slices.Grow(dst[:0], n)[:n]
	for cpu := range n {
		w, cur := &o.winBuf[cpu], int64(o.cpuBuf[cpu].Window)
		switch {
		case i < 0:
			// Before 1970: the program's times are unsigned.
			dst[cpu] = WindowCounters{}
		case cur > i && uint64(cur-i) >= WindowSlots:
			dst[cpu] = WindowCounters{Gone: true}
		case w.Window == uint64(i):
			dst[cpu] = WindowCounters{Counters: counters(&w.Counts)}
		default:
			// The slot holds an older window (a newer one would be
			// WindowSlots past i): the CPU counted no frame in i.
			dst[cpu] = WindowCounters{}
		}
	}
	return dst, nil
}

// slotOf returns the slot of window i: i modulo WindowSlots, as the
// program computes it from the unsigned window.
func slotOf(i int64) int { return int(uint64(i) % WindowSlots) }

// EndWindow ends window i: when it returns, no CPU counts a frame in
// window i or an earlier one, so their counts are final. It raises the
// floor of the program's clock to the start of window i+1, so that a frame
// whose time is earlier (a CPU still in window i, its clock a little behind
// the caller's) is stamped with that start, and counted, keyed and emitted
// in window i+1; then it waits for the program's runs in progress, which
// may have read the old floor, to finish (the kernel waits for them when a
// map of maps is updated, so that user space knows they all use the new
// value: this updates fd_rings with the ring it holds). This takes an RCU
// grace period, milliseconds; ending a window already ended returns at
// once.
//
// It never moves the floor past the end of the window the program's clock
// (the boot clock plus the offset) is in now: ending a window that has not
// begun ends only the current one. With one window it does nothing.
func (o *Objects) EndWindow(i int64) error {
	if o.windowNs == 0 {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var cfg xdpFdConfig
	if err := o.config.Lookup(uint32(0), &cfg); err != nil {
		return fmt.Errorf("bpf: reading the clock offset: %w", err)
	}
	floor, err := endFloor(cfg.ClockOffsetNs, o.windowNs, i)
	if err != nil {
		return err
	}
	if floor <= o.floorNs {
		return nil // ended, and waited for, already
	}
	if err := o.floor.Set(floor); err != nil {
		return fmt.Errorf("bpf: setting the clock's floor: %w", err)
	}
	if err := o.outer.Update(uint32(0), o.Rings[0], ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: waiting for the program's runs: %w", err)
	}
	o.floorNs = floor
	return nil
}

// SyncClock sets the offset the program adds to CLOCK_BOOTTIME to get Unix
// time to its current value. Call it now and then (at window boundaries):
// the wall clock is slewed and stepped, the boot clock is not.
func (o *Objects) SyncClock() error {
	off, err := clockOffset(o.now)
	if err != nil {
		return err
	}
	return o.setClockOffset(off)
}

func (o *Objects) setClockOffset(ns int64) error {
	if err := o.config.Update(uint32(0), xdpFdConfig{ClockOffsetNs: ns}, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: setting the clock offset: %w", err)
	}
	return nil
}

// clockOffset returns Unix time minus CLOCK_BOOTTIME, in ns: the boot clock is
// read on both sides of the wall clock, and the mean taken.
func clockOffset(now func() time.Time) (int64, error) {
	var b0, wall, b1 unix.Timespec
	for _, c := range []struct {
		id int32
		ts *unix.Timespec
	}{{unix.CLOCK_BOOTTIME, &b0}, {unix.CLOCK_REALTIME, &wall}, {unix.CLOCK_BOOTTIME, &b1}} {
		if err := unix.ClockGettime(c.id, c.ts); err != nil {
			return 0, fmt.Errorf("bpf: reading clock %d: %w", c.id, err)
		}
	}
	boot := b0.Nano() + (b1.Nano()-b0.Nano())/2
	if now != nil {
		return now().UnixNano() - boot, nil
	}
	return wall.Nano() - boot, nil
}

// DecodeEvent decodes a ring buffer record: the key and its time in Unix ns.
// A record of the wrong size or holding an invalid key is an error.
func DecodeEvent(b []byte) (flow.Key, int64, error) {
	if len(b) != EventSize {
		return flow.Key{}, 0, fmt.Errorf("bpf: ring buffer record of %d bytes, want %d", len(b), EventSize)
	}
	var k flow.Key
	if err := k.UnmarshalBinary(b[8 : 8+flow.KeySize]); err != nil {
		return flow.Key{}, 0, fmt.Errorf("bpf: ring buffer record: %w", err)
	}
	// struct fd_event: the time (native byte order), then the key.
	return k, int64(binary.NativeEndian.Uint64(b[:8])), nil
}

// endFloor returns the clock floor that ends window i of windowNs (the
// start of window i+1), never past the end of the window the program's
// clock (the boot clock plus offsetNs, as the program computes it) is in
// now: ending a window that has not begun ends only the current one.
func endFloor(offsetNs int64, windowNs uint64, i int64) (uint64, error) {
	var boot unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot); err != nil {
		return 0, fmt.Errorf("bpf: reading the boot clock: %w", err)
	}
	now := uint64(boot.Nano() + offsetNs)
	next := uint64(i) + 1
	if i < 0 {
		next = 0
	}
	if cur := now / windowNs; next > cur+1 {
		next = cur + 1
	}
	if next > math.MaxUint64/windowNs {
		return math.MaxUint64, nil
	}
	return next * windowNs, nil
}

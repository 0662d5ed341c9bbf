//go:build linux && !(mips || mips64 || ppc64 || s390x)

package bpf

// xsk.c is compiled by bpf2go into xsk_bpfel.o and xsk_bpfel.go (loadXsk and
// the unexported xsk* types; use LoadXSK). Only the little-endian object is built, for
// Linux; asm/types.h is in Debian's multiarch include directory. xsk.c
// includes xdp.c for its parser and hash, so the object holds fd_xdp and
// its maps too; the loaders below load only what their program uses.
//
// Regenerate this object alone with `go generate -run xsk ./bpf/`.
//go:generate sh -c "go tool bpf2go -tags linux -target bpfel -cflags \"-O2 -g -mcpu=v3 -Wall -Werror -fno-strict-aliasing -I/usr/include/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || ${BPF2GO_CC:-clang} -print-multiarch)\" xsk xsk.c"

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/flowdedup/flowdedup/flow"
)

// XSKObjects is the loaded redirect program of the AF_XDP capture mode
// (xsk.c) with its map. Attaching the program is the caller's business
// (capture/afxdp uses a BPF link).
type XSKObjects struct {
	// Program redirects each frame to the AF_XDP socket of its receive
	// queue, and passes the frames of queues without one to the stack.
	Program *ebpf.Program
	// Sockets is the XSKMAP: AF_XDP socket fds keyed by queue id (uint32
	// keys and values). Fill it with SetSocket.
	Sockets *ebpf.Map
	// Seen, Hits and Windows are the prefilter's maps (LoadXSKPrefilter;
	// nil otherwise), all BPF_F_MMAPABLE arrays: Seen holds Rows rows of
	// XSKRowBuckets uint64 buckets per queue (queue q's from row q*Rows;
	// a bucket is XSKBucket of a fingerprint and the window it was learnt
	// in), which user space writes, and the program only for a frame
	// the socket is sure to take (XSKPrefilter.MaxLen, Margin); Hits
	// holds one XSKHitsBytes entry per queue of uint64 words (the
	// XSKQueue* words: the frames the program dropped as seen, its
	// clock's window, the frames it redirected, the room); Windows
	// holds WindowSlots XSKWindowBytes entries per queue (queue q's from
	// entry q*WindowSlots), the hits by window: the window the entry
	// counts (word 0, the program's tag) and its hits (word 1).
	Seen, Hits, Windows *ebpf.Map
	// Rows is the number of prefilter rows per queue (0 without one).
	Rows int

	config   *ebpf.Map      // fd_config: the clock's offset
	floor    *ebpf.Variable // fd_floor_ns: the clock's floor
	outer    *ebpf.Map      // fd_rings, unused by the program: updated to wait for its runs
	ring     *ebpf.Map      // the ring in outer
	windowNs uint64
	now      func() time.Time

	mu      sync.Mutex // serialises EndWindow
	floorNs uint64     // the floor last set
}

// The prefilter's layout (flowdedup.h: FD_XSK_ROW_BUCKETS, struct
// fd_xsk_meta; struct fd_xsk_queue in xsk.c).
const (
	// XSKRowBuckets is the number of buckets in a row of Seen.
	XSKRowBuckets = 8
	// XSKRowBytes is the size of a row.
	XSKRowBytes = 8 * XSKRowBuckets
	// XSKHitsBytes is the size of a queue's entry of Hits.
	XSKHitsBytes = 64
	// XSKWindowBytes is the size of an entry of Windows.
	XSKWindowBytes = 16
	// XSKMetaBytes is the size of the metadata in front of a frame the
	// prefilter passes: the little-endian uint64 time of the frame (Unix
	// ns, the program's clock), then the uint32 row (an index of Seen's
	// rows) and fingerprint (0: no key).
	XSKMetaBytes = 16
)

// XSKBucket is the bucket of Seen that holds fingerprint fp (never 0)
// learnt in window w: the program finds it for the frames of w only.
func XSKBucket(fp uint32, w uint64) uint64 { return uint64(uint32(w))<<32 | uint64(fp) }

// XSKPrefilter configures the in-kernel prefilter of LoadXSKPrefilter: how
// the program keys frames (as flow.Parse with Kind, hashed as the XDP
// program hashes them with Seed; no decapsulation, no prefix masks) and
// the rows of each queue's prefilter.
type XSKPrefilter struct {
	Kind flow.KeyKind
	Seed uint64
	Rows int // rows per queue, at least 1
	// Window is the length of the windows the program counts and
	// forgets keys by (0: one window); Now the wall clock its frame
	// times follow (nil: CLOCK_REALTIME), as bpf.Config's.
	Window time.Duration
	Now    func() time.Time
	// MaxLen and Margin let the program learn a key itself, for a frame
	// the socket is sure to take: one of at most MaxLen bytes while the
	// queue's redirected frames plus Margin stay below the room user space
	// sets (XSKQueueRedirected, XSKQueueRoom). 0: the readers learn every
	// key.
	MaxLen, Margin uint32
}

// The words of a queue's entry of Hits.
const (
	XSKQueueHits       = 0 // frames dropped as seen (program)
	XSKQueueWindow     = 1 // the window of the queue's clock (program)
	XSKQueueRedirected = 4 // frames redirected to the socket (program)
	XSKQueueRoom       = 5 // the bound of fd_xsk_learn (user space)
)

// LoadXSKPrefilter loads the prefiltering redirect program (fd_xsk_prefilter)
// with an XSKMAP of queues entries and a prefilter of p.Rows rows per queue:
// frames whose key's fingerprint is in their queue's rows, learnt in the
// window of the frame's time (the queue's clock, CLOCK_BOOTTIME plus the
// offset SyncClock sets), are dropped and counted in Hits and in the
// queue's slot of Windows; the others are redirected as by LoadXSK's
// program, with their time, and their row and fingerprint when they have a
// key, as metadata (XSKMetaBytes).
func LoadXSKPrefilter(queues int, p XSKPrefilter) (*XSKObjects, error) {
	if queues < 1 {
		return nil, fmt.Errorf("bpf: %d queues: want at least 1", queues)
	}
	if !p.Kind.IsValid() {
		return nil, fmt.Errorf("bpf: invalid key kind %d", uint8(p.Kind))
	}
	if p.Window < 0 {
		return nil, fmt.Errorf("bpf: negative window %v", p.Window)
	}
	if p.Rows < 1 || uint64(p.Rows)*uint64(queues) > math.MaxUint32/XSKRowBytes {
		return nil, fmt.Errorf("bpf: %d prefilter rows for %d queues: want at least 1 and fewer than 2^32 bytes in all", p.Rows, queues)
	}
	spec, err := loadXsk()
	if err != nil {
		return nil, fmt.Errorf("bpf: reading the embedded AF_XDP program: %w", err)
	}
	for name, v := range map[string]any{
		xskVarFdKeyKind:     uint8(p.Kind),
		xskVarFdHashSeed:    p.Seed,
		xskVarFdXskRows:     uint32(p.Rows),
		xskVarFdXskWindowNs: uint64(p.Window),
		xskVarFdXskMaxLen:   p.MaxLen,
		xskVarFdXskMargin:   p.Margin,
	} {
		vs, ok := spec.Variables[name]
		if !ok {
			return nil, fmt.Errorf("bpf: the embedded AF_XDP program has no variable %s", name)
		}
		if err := vs.Set(v); err != nil {
			return nil, fmt.Errorf("bpf: setting %s: %w", name, err)
		}
	}
	spec.Maps[xskMapFdXsks].MaxEntries = uint32(queues)
	spec.Maps[xskMapFdXskSeen].MaxEntries = uint32(p.Rows * queues)
	spec.Maps[xskMapFdXskHits].MaxEntries = uint32(queues)
	spec.Maps[xskMapFdXskWindows].MaxEntries = uint32(queues * WindowSlots)
	// fd_rings, a map of maps the program does not use, with one small
	// ring: EndWindow updates it to wait for the program's runs.
	outer := spec.Maps[xskMapFdRings]
	outer.MaxEntries = 1
	inner := outer.InnerMap.Copy()
	inner.MaxEntries = uint32(max(unix.Getpagesize(), 4096))
	ring, err := ebpf.NewMap(inner)
	if err != nil {
		return nil, fmt.Errorf("bpf: creating a ring buffer: %w", err)
	}
	outer.Contents = []ebpf.MapKV{{Key: uint32(0), Value: ring}}
	var objs struct {
		Program *ebpf.Program  `ebpf:"fd_xsk_prefilter"`
		Sockets *ebpf.Map      `ebpf:"fd_xsks"`
		Seen    *ebpf.Map      `ebpf:"fd_xsk_seen"`
		Hits    *ebpf.Map      `ebpf:"fd_xsk_hits"`
		Windows *ebpf.Map      `ebpf:"fd_xsk_windows"`
		Config  *ebpf.Map      `ebpf:"fd_config"`
		Rings   *ebpf.Map      `ebpf:"fd_rings"`
		Floor   *ebpf.Variable `ebpf:"fd_floor_ns"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		ring.Close()
		return nil, err
	}
	o := &XSKObjects{
		Program: objs.Program, Sockets: objs.Sockets, Seen: objs.Seen, Hits: objs.Hits, Windows: objs.Windows, Rows: p.Rows,
		config: objs.Config, floor: objs.Floor, outer: objs.Rings, ring: ring, windowNs: uint64(p.Window), now: p.Now,
	}
	if err := o.SyncClock(); err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// SyncClock sets the offset the prefilter's program adds to CLOCK_BOOTTIME
// to get Unix time to its current value (Objects.SyncClock's rule). Call
// it now and then: the wall clock is slewed and stepped, the boot clock is
// not. Without a prefilter it does nothing.
func (o *XSKObjects) SyncClock() error {
	if o.config == nil {
		return nil
	}
	off, err := clockOffset(o.now)
	if err != nil {
		return err
	}
	if err := o.config.Update(uint32(0), xskFdConfig{ClockOffsetNs: off}, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: setting the clock offset: %w", err)
	}
	return nil
}

// EndWindow ends window i of the prefilter's clock, as Objects.EndWindow
// does for the XDP program's: when it returns, no queue counts a frame in
// window i or an earlier one, so their hits are final. It raises the floor
// of the program's clock to the start of window i+1 (never past the end of
// the window the clock is in now), then waits for the program's runs in
// progress, which may have read the old floor (an RCU grace period:
// milliseconds). Ending a window already ended returns at once; with one
// window, or without a prefilter, it does nothing.
func (o *XSKObjects) EndWindow(i int64) error {
	if o.windowNs == 0 || o.config == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var cfg xskFdConfig
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
	if err := o.outer.Update(uint32(0), o.ring, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: waiting for the program's runs: %w", err)
	}
	o.floorNs = floor
	return nil
}

// LoadXSK loads the redirect program with an XSKMAP of queues entries:
// queue ids 0 to queues-1 may get a socket.
func LoadXSK(queues int) (*XSKObjects, error) {
	if queues < 1 {
		return nil, fmt.Errorf("bpf: %d queues: want at least 1", queues)
	}
	spec, err := loadXsk()
	if err != nil {
		return nil, fmt.Errorf("bpf: reading the embedded AF_XDP program: %w", err)
	}
	m, ok := spec.Maps["fd_xsks"]
	if !ok {
		return nil, errors.New("bpf: the embedded AF_XDP program has no fd_xsks map")
	}
	m.MaxEntries = uint32(queues)
	var objs struct {
		Program *ebpf.Program `ebpf:"fd_xsk"`
		Sockets *ebpf.Map     `ebpf:"fd_xsks"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, err
	}
	return &XSKObjects{Program: objs.Program, Sockets: objs.Sockets}, nil
}

// SetSocket makes the program redirect the frames of queue to the AF_XDP
// socket fd.
func (o *XSKObjects) SetSocket(queue int, fd int) error {
	return o.Sockets.Put(uint32(queue), uint32(fd))
}

// DeleteSocket makes the frames of queue go to the stack again.
func (o *XSKObjects) DeleteSocket(queue int) error {
	err := o.Sockets.Delete(uint32(queue))
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	return err
}

// Close releases the program and the map (a program still attached
// through a link stays loaded until the link is closed).
func (o *XSKObjects) Close() error {
	return errors.Join(o.Program.Close(), o.Sockets.Close(), o.Seen.Close(), o.Hits.Close(), o.Windows.Close(),
		o.config.Close(), o.outer.Close(), o.ring.Close())
}

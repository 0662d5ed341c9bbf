//go:build linux && !(mips || mips64 || ppc64 || s390x)

package afxdp

// The in-kernel prefilter (Config.Prefilter): the redirect program stamps
// each frame with the kernel's time, keys it, and drops those whose key's
// fingerprint is in the queue's rows of a prefilter, tagged with the
// frame's window. A reader learns a key from the
// metadata the program puts in front of each frame it lets through (its
// time, row and fingerprint), after the frame has crossed: a frame the
// socket drops after the redirect (no free UMEM frame) leaves its key out,
// so the flow's next frame crosses again, and no key is lost. (The program
// inserts a key itself only for a frame the socket is sure to take: see
// Source.setRoom.) The frames
// the program drops are counted per queue and per window of the kernel's
// clock, the clock the frames that cross carry in Packet.TimeNs, so that
// each window gets exactly its frames (capture.WindowCounter).

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// DefaultPrefilterBytes is the prefilter of each queue when
// Prefilter.Bytes is 0: 8192 rows of 8 buckets, 65,536 keys.
const DefaultPrefilterBytes = 512 << 10

// Prefilter configures the in-kernel prefilter of a capture. Its key and
// seed must be the pipeline's key kind and a seed of its own (the kernel's
// hash needs not be the pipeline's; xdp.PrefilterSeed derives one), and
// its window the pipeline's. It supports neither decapsulation nor keys by
// network.
type Prefilter struct {
	Kind flow.KeyKind // the key the kernel takes from each frame
	Seed uint64       // the seed of its hash
	// Bytes is the size of each queue's prefilter, a multiple of
	// bpf.XSKRowBytes (0: DefaultPrefilterBytes).
	Bytes int
	// Window is the pipeline's window (0: one window): a key learnt in
	// a window keeps only that window's frames from crossing, and the
	// kernel counts the frames it keeps by window (WindowCounts).
	Window time.Duration
	// Now is the wall clock the kernel's frame times follow (nil: the
	// system's, CLOCK_REALTIME), as xdp.Config.Now.
	Now func() time.Time
}

// rows returns the rows per queue, after checking p.
func (p *Prefilter) rows() (int, error) {
	if !p.Kind.IsValid() {
		return 0, fmt.Errorf("afxdp: prefilter: invalid key kind %d", uint8(p.Kind))
	}
	if p.Window < 0 {
		return 0, fmt.Errorf("afxdp: prefilter: negative window %v", p.Window)
	}
	b := p.Bytes
	if b == 0 {
		b = DefaultPrefilterBytes
	}
	if b < bpf.XSKRowBytes || b%bpf.XSKRowBytes != 0 || b > 1<<30 {
		return 0, fmt.Errorf("afxdp: prefilter of %d bytes: want a multiple of %d bytes up to 1 GiB", b, bpf.XSKRowBytes)
	}
	return b / bpf.XSKRowBytes, nil
}

// prefilterMem is the prefilter's maps as mapped into this process: the
// rows (written by the readers, read by the program), the per-queue
// counters and clocks and the per-queue hits by window (written by the
// program). It is unmapped when no source refers to it any more, so that
// no reader can write to unmapped memory.
type prefilterMem struct {
	seen     []uint64 // the buckets of every queue's rows
	hits     []uint64 // per queue, bpf.XSKHitsBytes/8 words: the count, the clock's window
	wins     []uint64 // per queue, bpf.WindowSlots entries of (window, hits)
	rows     uint32   // rows per queue
	windowNs uint64   // 0: one window
	// endWindow ends a window of the program's clock (bpf.XSKObjects.EndWindow).
	endWindow func(i int64) error
}

func mapPrefilter(objs *bpf.XSKObjects, queues int, window time.Duration) (*prefilterMem, error) {
	var maps [3][]byte
	for i, m := range []struct {
		fd    int
		bytes int
		what  string
	}{
		{objs.Seen.FD(), objs.Rows * queues * bpf.XSKRowBytes, "the prefilter"},
		{objs.Hits.FD(), queues * bpf.XSKHitsBytes, "the prefilter's counters"},
		{objs.Windows.FD(), queues * bpf.WindowSlots * bpf.XSKWindowBytes, "the prefilter's counters by window"},
	} {
		b, err := unix.Mmap(m.fd, 0, m.bytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			for _, b := range maps[:i] {
				unix.Munmap(b)
			}
			return nil, fmt.Errorf("afxdp: mapping %s: %w", m.what, err)
		}
		maps[i] = b
	}
	words := func(b []byte) []uint64 { return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8) }
	m := &prefilterMem{
		seen:     words(maps[0]),
		hits:     words(maps[1]),
		wins:     words(maps[2]),
		rows:     uint32(objs.Rows),
		windowNs: uint64(window),
	}
	runtime.AddCleanup(m, func(b [3][]byte) {
		for _, b := range b {
			unix.Munmap(b)
		}
	}, maps)
	return m, nil
}

// learn inserts the key of the frame at addr (its data) into the queue's
// prefilter, from the metadata in front of it, tagged with the window of
// the frame's time, and clears the metadata: the UMEM frame keeps it, and
// its next frame may come without. It returns the frame's time, the
// kernel's (0: no metadata).
func (s *Source) learn(addr uint64) int64 {
	if addr < bpf.XSKMetaBytes {
		return 0
	}
	meta := s.umem[addr-bpf.XSKMetaBytes : addr]
	t := binary.LittleEndian.Uint64(meta[:8])
	row := binary.LittleEndian.Uint32(meta[8:12])
	fp := binary.LittleEndian.Uint32(meta[12:])
	clear(meta)
	if fp == 0 {
		return int64(t) // no key, or no metadata (t 0)
	}
	pf := s.pf
	lo := uint32(s.queue) * pf.rows
	if row < lo || row-lo >= pf.rows {
		return int64(t) // not this queue's: cannot come from the program
	}
	var w uint64
	if pf.windowNs > 0 {
		w = t / pf.windowNs // as the program's clock reckons it
	}
	tag := bpf.XSKBucket(fp, w)
	b := pf.seen[row*bpf.XSKRowBuckets : (row+1)*bpf.XSKRowBuckets : (row+1)*bpf.XSKRowBuckets]
	free := -1
	for i := range b {
		switch v := b[i]; { // only this reader writes the queue's rows
		case v == tag:
			return int64(t)
		case free < 0 && (v == 0 || uint32(v>>32) != uint32(w)):
			free = i // empty, or learnt in another window: the program no longer finds it
		}
	}
	if free < 0 {
		// A full row: a random bucket, as the QHT does. The key it
		// held crosses again, which costs a frame, never a key.
		s.rnd ^= s.rnd << 13
		s.rnd ^= s.rnd >> 7
		s.rnd ^= s.rnd << 17
		free = int(s.rnd % bpf.XSKRowBuckets)
	}
	atomic.StoreUint64(&b[free], tag) // the program reads it on any CPU
	return int64(t)
}

// prefilteredSource is a Source whose queue is prefiltered: it also
// implements capture.WindowCounter, counting the frames the kernel
// dropped as seen, in all and by window.
type prefilteredSource struct{ *Source }

var _ capture.WindowCounter = prefilteredSource{}

// KernelCounts implements capture.KernelCounter: the frames the program
// dropped because their key was in the queue's prefilter, each a packet
// with a key that the prefilter had seen. The frames that crossed are not
// in it: their Packets carry frames, which the pipeline counts itself.
func (s prefilteredSource) KernelCounts(c *capture.KernelCounts) error {
	n := atomic.LoadUint64(&s.pf.hits[s.queue*bpf.XSKHitsBytes/8])
	setHits(c, n)
	return nil
}

// setHits sets c to n frames dropped as seen.
func setHits(c *capture.KernelCounts, n uint64) {
	c.Packets, c.Keyed, c.Prefiltered, c.RingFull = n, n, n, 0
	if c.Errors == nil {
		c.Errors = make(map[string]uint64)
	}
	clear(c.Errors)
}

// WindowSlots implements capture.WindowCounter: each queue keeps the hits
// of its last bpf.WindowSlots windows.
func (s prefilteredSource) WindowSlots() int { return bpf.WindowSlots }

// WindowCounts implements capture.WindowCounter with the frames the
// program dropped in window i of its clock: the frames whose kernel time,
// the time Packet.TimeNs carries for the frames that cross, falls in
// [i*d, (i+1)*d) for the prefilter's window d (with one window, window 0
// holds every frame). The queue's frames are counted and handed over in
// the order of their times, so once a frame of a later window has been
// read, window i's counts are final. When the queue's clock has not passed
// window i, it ends the window in the kernel first (as xdp.Capture does:
// a frame the kernel takes after that is stamped in window i+1 or later),
// so the counts it returns are final whenever it is called after window i
// is over. It returns an error wrapping capture.ErrWindowGone when the
// queue's clock has moved bpf.WindowSlots windows past i. Call it from the
// goroutine that reads the source.
func (s prefilteredSource) WindowCounts(i int64, c *capture.KernelCounts) error {
	pf := s.pf
	if pf.windowNs > 0 && int64(atomic.LoadUint64(&pf.hits[s.queue*bpf.XSKHitsBytes/8+1])) <= i {
		// The queue may still count a frame in window i.
		if err := pf.endWindow(i); err != nil {
			return fmt.Errorf("afxdp: ending window %d: %w", i, err)
		}
	}
	e := pf.wins[(s.queue*bpf.WindowSlots+int(uint64(i)%bpf.WindowSlots))*2:][:2:2]
	for range 100 {
		tag := atomic.LoadUint64(&e[0])
		n := atomic.LoadUint64(&e[1])
		if atomic.LoadUint64(&e[0]) != tag {
			continue // the program took the slot over while we read it
		}
		switch {
		case int64(tag) == i:
			setHits(c, n)
		case int64(tag) > i:
			return fmt.Errorf("afxdp: window %d of queue %d: %w", i, s.queue, capture.ErrWindowGone)
		default:
			setHits(c, 0) // no frame of window i was dropped (yet)
		}
		return nil
	}
	return fmt.Errorf("afxdp: window %d of queue %d: the slot kept changing while read", i, s.queue)
}

//go:build linux && !(mips || mips64 || ppc64 || s390x)

package afxdp

// The in-kernel prefilter (Config.Prefilter): the redirect program keys
// each frame and drops those whose key's fingerprint is in the queue's
// rows of a prefilter that only the readers write. A reader learns a key
// from the metadata the program puts in front of each frame it lets
// through (its row and fingerprint), after the frame has crossed: a frame
// the socket drops after the redirect (no free UMEM frame) leaves its key
// out, so the flow's next frame crosses again, and no key is lost.

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// DefaultPrefilterBytes is the prefilter of each queue when
// Prefilter.Bytes is 0: 8192 rows of 8 fingerprints, 65,536 keys.
const DefaultPrefilterBytes = 256 << 10

// Prefilter configures the in-kernel prefilter of a capture. Its key and
// seed must be the pipeline's key kind and a seed of its own (the kernel's
// hash needs not be the pipeline's; xdp.PrefilterSeed derives one). It
// supports neither decapsulation nor keys by network, and it is never
// emptied: use it with a pipeline of one window.
type Prefilter struct {
	Kind flow.KeyKind // the key the kernel takes from each frame
	Seed uint64       // the seed of its hash
	// Bytes is the size of each queue's prefilter, a multiple of
	// bpf.XSKRowBytes (0: DefaultPrefilterBytes).
	Bytes int
}

// rows returns the rows per queue, after checking p.
func (p *Prefilter) rows() (int, error) {
	if !p.Kind.IsValid() {
		return 0, fmt.Errorf("afxdp: prefilter: invalid key kind %d", uint8(p.Kind))
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
// rows (written by the readers, read by the program) and the per-queue hit
// counters (written by the program). It is unmapped when no source refers
// to it any more, so that no reader can write to unmapped memory.
type prefilterMem struct {
	seen []uint32 // the fingerprints of every queue's rows
	hits []uint64 // per queue, bpf.XSKHitsBytes/8 words, the first the count
	rows uint32   // rows per queue
}

func mapPrefilter(objs *bpf.XSKObjects, queues int) (*prefilterMem, error) {
	seen, err := unix.Mmap(objs.Seen.FD(), 0, objs.Rows*queues*bpf.XSKRowBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("afxdp: mapping the prefilter: %w", err)
	}
	hits, err := unix.Mmap(objs.Hits.FD(), 0, queues*bpf.XSKHitsBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Munmap(seen)
		return nil, fmt.Errorf("afxdp: mapping the prefilter's counters: %w", err)
	}
	m := &prefilterMem{
		seen: unsafe.Slice((*uint32)(unsafe.Pointer(&seen[0])), len(seen)/4),
		hits: unsafe.Slice((*uint64)(unsafe.Pointer(&hits[0])), len(hits)/8),
		rows: uint32(objs.Rows),
	}
	runtime.AddCleanup(m, func(b [2][]byte) { unix.Munmap(b[0]); unix.Munmap(b[1]) }, [2][]byte{seen, hits})
	return m, nil
}

// learn inserts the key of the frame at addr (its data) into the queue's
// prefilter, from the metadata in front of it, and clears the metadata:
// the UMEM frame keeps it, and its next frame may come without.
func (s *Source) learn(addr uint64) {
	if addr < bpf.XSKMetaBytes {
		return
	}
	meta := s.umem[addr-bpf.XSKMetaBytes : addr]
	fp := binary.LittleEndian.Uint32(meta[4:])
	if fp == 0 {
		return // no key, or no metadata
	}
	row := binary.LittleEndian.Uint32(meta[:4])
	clear(meta)
	pf := s.pf
	lo := uint32(s.queue) * pf.rows
	if row < lo || row-lo >= pf.rows {
		return // not this queue's: cannot come from the program
	}
	b := pf.seen[row*bpf.XSKRowBuckets : (row+1)*bpf.XSKRowBuckets : (row+1)*bpf.XSKRowBuckets]
	free := -1
	for i := range b {
		switch b[i] { // only this reader writes the queue's rows
		case fp:
			return
		case 0:
			if free < 0 {
				free = i
			}
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
	atomic.StoreUint32(&b[free], fp) // the program reads it on any CPU
}

// prefilteredSource is a Source whose queue is prefiltered: it also
// implements capture.KernelCounter, counting the frames the kernel
// dropped as seen.
type prefilteredSource struct{ *Source }

var _ capture.KernelCounter = prefilteredSource{}

// KernelCounts implements capture.KernelCounter: the frames the program
// dropped because their key was in the queue's prefilter, each a packet
// with a key that the prefilter had seen. The frames that crossed are not
// in it: their Packets carry frames, which the pipeline counts itself.
func (s prefilteredSource) KernelCounts(c *capture.KernelCounts) error {
	n := atomic.LoadUint64(&s.pf.hits[s.queue*bpf.XSKHitsBytes/8])
	c.Packets, c.Keyed, c.Prefiltered, c.RingFull = n, n, n, 0
	if c.Errors == nil {
		c.Errors = make(map[string]uint64)
	}
	clear(c.Errors)
	return nil
}

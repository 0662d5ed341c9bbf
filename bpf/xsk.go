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

	"github.com/cilium/ebpf"

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
	// Seen and Hits are the prefilter's maps (LoadXSKPrefilter; nil
	// otherwise), both BPF_F_MMAPABLE arrays: Seen holds Rows rows of
	// XSKRowBuckets uint32 fingerprints per queue (queue q's from row
	// q*Rows), which only user space writes; Hits holds one XSKHitsBytes
	// entry per queue whose first uint64 counts the frames the program
	// dropped as seen.
	Seen, Hits *ebpf.Map
	// Rows is the number of prefilter rows per queue (0 without one).
	Rows int
}

// The prefilter's layout (flowdedup.h: FD_XSK_ROW_BUCKETS, struct
// fd_xsk_meta; struct fd_xsk_queue in xsk.c).
const (
	// XSKRowBuckets is the number of fingerprints in a row of Seen.
	XSKRowBuckets = 8
	// XSKRowBytes is the size of a row.
	XSKRowBytes = 4 * XSKRowBuckets
	// XSKHitsBytes is the size of a queue's entry of Hits.
	XSKHitsBytes = 64
	// XSKMetaBytes is the size of the metadata in front of a frame the
	// prefilter passes: the little-endian uint32 row (an index of Seen's
	// rows) and fingerprint (0: none).
	XSKMetaBytes = 8
)

// XSKPrefilter configures the in-kernel prefilter of LoadXSKPrefilter: how
// the program keys frames (as flow.Parse with Kind, hashed as the XDP
// program hashes them with Seed; no decapsulation, no prefix masks) and
// the rows of each queue's prefilter.
type XSKPrefilter struct {
	Kind flow.KeyKind
	Seed uint64
	Rows int // rows per queue, at least 1
}

// LoadXSKPrefilter loads the prefiltering redirect program (fd_xsk_prefilter)
// with an XSKMAP of queues entries and a prefilter of p.Rows rows per queue:
// frames whose key's fingerprint is in their queue's rows are dropped and
// counted in Hits; the others are redirected as by LoadXSK's program, with
// their row and fingerprint as metadata when they have a key.
func LoadXSKPrefilter(queues int, p XSKPrefilter) (*XSKObjects, error) {
	if queues < 1 {
		return nil, fmt.Errorf("bpf: %d queues: want at least 1", queues)
	}
	if !p.Kind.IsValid() {
		return nil, fmt.Errorf("bpf: invalid key kind %d", uint8(p.Kind))
	}
	if p.Rows < 1 || uint64(p.Rows)*uint64(queues) > math.MaxUint32/XSKRowBytes {
		return nil, fmt.Errorf("bpf: %d prefilter rows for %d queues: want at least 1 and fewer than 2^32 bytes in all", p.Rows, queues)
	}
	spec, err := loadXsk()
	if err != nil {
		return nil, fmt.Errorf("bpf: reading the embedded AF_XDP program: %w", err)
	}
	for name, v := range map[string]any{
		xskVarFdKeyKind:  uint8(p.Kind),
		xskVarFdHashSeed: p.Seed,
		xskVarFdXskRows:  uint32(p.Rows),
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
	var objs struct {
		Program *ebpf.Program `ebpf:"fd_xsk_prefilter"`
		Sockets *ebpf.Map     `ebpf:"fd_xsks"`
		Seen    *ebpf.Map     `ebpf:"fd_xsk_seen"`
		Hits    *ebpf.Map     `ebpf:"fd_xsk_hits"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, err
	}
	return &XSKObjects{Program: objs.Program, Sockets: objs.Sockets, Seen: objs.Seen, Hits: objs.Hits, Rows: p.Rows}, nil
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
	return errors.Join(o.Program.Close(), o.Sockets.Close(), o.Seen.Close(), o.Hits.Close())
}

//go:build linux && !(mips || mips64 || ppc64 || s390x)

package bpf

// xsk.c is compiled by bpf2go into xsk_bpfel.o and xsk_bpfel.go (loadXsk and
// the unexported xsk* types; use LoadXSK). Only the little-endian object is built, for
// Linux; asm/types.h is in Debian's multiarch include directory.
//
// Regenerate this object alone with `go generate -run xsk ./bpf/`.
//go:generate sh -c "go tool bpf2go -tags linux -target bpfel -cflags \"-O2 -g -Wall -Werror -I/usr/include/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || ${BPF2GO_CC:-clang} -print-multiarch)\" xsk xsk.c"

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
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
	var objs xskObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, err
	}
	return &XSKObjects{Program: objs.FdXsk, Sockets: objs.FdXsks}, nil
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
	return errors.Join(o.Program.Close(), o.Sockets.Close())
}

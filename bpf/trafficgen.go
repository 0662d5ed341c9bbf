//go:build linux && !(mips || mips64 || ppc64 || s390x)

package bpf

//go:generate sh -c "go tool bpf2go -tags linux -target bpfel -cflags \"-O2 -g -Wall -Werror -I/usr/include/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || ${BPF2GO_CC:-clang} -print-multiarch)\" trafficgen trafficgen.c"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// TrafficGenSrcBase is the first source address the traffic generator
// gives its frames: frame i comes from 10.0.0.0 + i%flows.
const TrafficGenSrcBase = 10 << 24

// TrafficGen is a kernel traffic generator for benchmarks and tests
// (trafficgen.c): an XDP program run by BPF_PROG_TEST_RUN in live-frames
// mode (Linux 5.18+) that transmits copies of a template frame out of a
// device, each with its own IPv4 source address, at the rate the kernel can
// make them. Sent on one end of a veth pair, they arrive at the other end
// like frames from a wire, through its XDP hook and its network stack.
type TrafficGen struct {
	mu    sync.Mutex // one Send at a time: the frame counter is not atomic
	objs  trafficgenObjects
	flows int
}

// xdpMD is struct xdp_md, the context of an XDP program run.
type xdpMD struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// LoadTrafficGen loads the generator. Frame i of the generator's life (over
// all Sends) gets the IPv4 source address TrafficGenSrcBase + i%flows, so
// the frames belong to flows distinct source addresses, in turn.
func LoadTrafficGen(flows int) (*TrafficGen, error) {
	if flows < 1 || flows > 1<<24 {
		return nil, fmt.Errorf("bpf: traffic generator: %d flows: want 1 to %d", flows, 1<<24)
	}
	spec, err := loadTrafficgen()
	if err != nil {
		return nil, fmt.Errorf("bpf: reading the embedded traffic generator: %w", err)
	}
	for name, v := range map[string]uint32{"fd_flows": uint32(flows), "fd_src_base": TrafficGenSrcBase} {
		vs, ok := spec.Variables[name]
		if !ok {
			return nil, fmt.Errorf("bpf: the embedded traffic generator has no variable %s", name)
		}
		if err := vs.Set(v); err != nil {
			return nil, fmt.Errorf("bpf: traffic generator: setting %s: %w", name, err)
		}
	}
	g := &TrafficGen{flows: flows}
	if err := spec.LoadAndAssign(&g.objs, nil); err != nil {
		return nil, err
	}
	return g, nil
}

// Flows returns the number of flows the generator cycles through.
func (g *TrafficGen) Flows() int { return g.flows }

// Sent returns the number of frames the generator has transmitted since it
// was loaded.
func (g *TrafficGen) Sent() (uint64, error) {
	var n uint64
	err := g.objs.FdSent.Get(&n)
	return n, err
}

// Send transmits n copies of frame out of the device with index ifindex,
// varying their source addresses. frame must be an Ethernet frame holding
// an IPv4 header without options (its checksum is rewritten; what follows is
// sent as it is). The calling goroutine's OS thread must be in the device's
// network namespace (netns.Namespace.Do).
//
// On a veth end, XDP_TX hands the frames to the peer's NAPI receive path,
// which runs only while the peer has an XDP program attached or GRO turned
// on: otherwise the peer drops them (counted as XDP transmit errors in the
// pair's statistics). Send counts frames the generator transmitted, not
// frames the peer received.
func (g *TrafficGen) Send(ifindex int, frame []byte, n int) error {
	if n < 0 {
		return fmt.Errorf("bpf: traffic generator: %d frames", n)
	}
	if err := checkTemplate(frame); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	start, err := g.Sent()
	if err != nil {
		return fmt.Errorf("bpf: traffic generator: reading the frame counter: %w", err)
	}
	limit := start + uint64(n)
	if err := g.objs.FdLimit.Set(limit); err != nil {
		return fmt.Errorf("bpf: traffic generator: setting the frame limit: %w", err)
	}
	md := xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: uint32(ifindex)}
	for sent := start; sent < limit; {
		// An interrupted call is repeated whole by Run: frames past the
		// limit are dropped by the program, so none is sent twice.
		_, err := g.objs.FdTrafficgen.Run(&ebpf.RunOptions{
			Data:    frame,
			Repeat:  uint32(min(limit-sent, math.MaxUint32)),
			Flags:   unix.BPF_F_TEST_XDP_LIVE_FRAMES,
			Context: md,
		})
		if err != nil {
			return fmt.Errorf("bpf: traffic generator: running in live-frames mode (Linux 5.18+) on interface %d: %w", ifindex, err)
		}
		now, err := g.Sent()
		if err != nil {
			return fmt.Errorf("bpf: traffic generator: reading the frame counter: %w", err)
		}
		if now == sent {
			return fmt.Errorf("bpf: traffic generator: the program sent nothing (%d of %d frames sent)", sent-start, n)
		}
		sent = now
	}
	return nil
}

// checkTemplate checks that frame is what the program rewrites.
func checkTemplate(frame []byte) error {
	switch {
	case len(frame) < 14+20:
		return fmt.Errorf("bpf: traffic generator: a %d-byte frame cannot hold Ethernet and IPv4 headers", len(frame))
	case binary.BigEndian.Uint16(frame[12:]) != unix.ETH_P_IP:
		return fmt.Errorf("bpf: traffic generator: frame of EtherType %#04x, want IPv4 (0x0800)", binary.BigEndian.Uint16(frame[12:]))
	case frame[14] != 0x45:
		return fmt.Errorf("bpf: traffic generator: IPv4 header starting %#02x, want 0x45 (version 4, no options)", frame[14])
	}
	return nil
}

// Pass returns a program that passes every frame to the stack, counting
// them (Passed). Attached to the receiving end of a veth pair, it turns on
// the NAPI receive path that frames from Send need, and does nothing else.
// It belongs to g.
func (g *TrafficGen) Pass() *ebpf.Program { return g.objs.FdPass }

// Passed returns the number of frames the Pass program has seen since g was
// loaded, wherever it is attached.
func (g *TrafficGen) Passed() (uint64, error) {
	var n uint64
	err := g.objs.FdPassed.Get(&n)
	return n, err
}

// Close releases the programs and their data.
func (g *TrafficGen) Close() error {
	return errors.Join(g.objs.Close())
}

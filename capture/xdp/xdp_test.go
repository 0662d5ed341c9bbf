//go:build linux && !(mips || mips64 || ppc64 || s390x)

package xdp

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/netns"
	"github.com/flowdedup/flowdedup/internal/testutil/testframe"
)

// udp4Frame returns a 60-byte Ethernet/IPv4/UDP frame from src to dst.
func udp4Frame(src, dst netip.Addr, sport, dport uint16) []byte {
	return testframe.UDP4Frame(src, dst, sport, dport, 60)
}

// srcAddr returns the i-th test source address, 10.x.y.z.
func srcAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
}

// injector writes frames into one end of the namespace's veth pair, which
// the other end receives.
type injector struct{ fd int }

func newInjector(t *testing.T, ns *netns.Namespace, iface string) *injector {
	t.Helper()
	ifindex := ns.Link(t, iface).Attrs().Index
	in := &injector{fd: -1}
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		in.fd = fd
		return unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifindex})
	})
	if err != nil {
		t.Fatalf("injector socket on %s: %v", iface, err)
	}
	t.Cleanup(func() { unix.Close(in.fd) })
	return in
}

func (in *injector) send(t *testing.T, frames ...[]byte) {
	t.Helper()
	for _, f := range frames {
		for {
			_, err := unix.Write(in.fd, f)
			if err == nil {
				break
			}
			if !errors.Is(err, unix.ENOBUFS) && !errors.Is(err, unix.EAGAIN) {
				t.Fatalf("send: %v", err)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// openXDP opens the fast path on the namespace's first veth end.
func openXDP(t *testing.T, ns *netns.Namespace, cfg Config) *Capture {
	t.Helper()
	cfg.Iface = ns.Veth[0]
	var x *Capture
	err := ns.Do(func() error {
		var err error
		x, err = Open(cfg)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrUnsupported) {
			testutil.SkipOrFail(t, "XDP fast path unsupported here: %v", err)
		}
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// readKeys reads every source until each has been idle for one poll
// interval, and returns the keys.
func readKeys(t *testing.T, x *Capture) []capture.Packet {
	t.Helper()
	var out []capture.Packet
	for _, ps := range readByCPU(t, x) {
		out = append(out, ps...)
	}
	return out
}

// processed returns how many frames the program has finished with, over
// all CPUs: each ends as a prefilter hit, an emitted key, a ring-full drop
// or an error (emitted is counted once the event is in the ring).
func processed(t *testing.T, x *Capture) uint64 {
	t.Helper()
	cs, err := x.Counters()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range cs {
		n += c.PrefilterHits + c.Emitted + c.RingFull
		for _, e := range c.Errors {
			n += e
		}
	}
	return n
}

// waitProcessed waits until the program has finished with at least n
// frames (veth hands frames to XDP in a softirq after the send returns),
// or fails the test after a deadline. When it returns, the events of those
// frames are in the rings.
func waitProcessed(t *testing.T, x *Capture, n uint64) {
	t.Helper()
	testutil.WaitFor(t, fmt.Sprintf("the XDP program to finish with %d frames", n), time.Minute, func() bool { return processed(t, x) >= n })
}

// total sums the counters of all CPUs.
func total(t *testing.T, x *Capture) capture.KernelCounts {
	t.Helper()
	sum := capture.KernelCounts{Errors: map[string]uint64{}}
	for _, s := range x.Sources() {
		var c capture.KernelCounts
		if err := s.(capture.KernelCounter).KernelCounts(&c); err != nil {
			t.Fatal(err)
		}
		sum.Packets += c.Packets
		sum.Keyed += c.Keyed
		sum.Prefiltered += c.Prefiltered
		sum.RingFull += c.RingFull
		for k, v := range c.Errors {
			sum.Errors[k] += v
		}
	}
	return sum
}

// The fast path on a veth pair: frames sent into the peer come out as keys,
// once per key thanks to the prefilter, with the kernel's time; malformed
// frames are counted, not keyed; Close detaches the program.
func TestXDPKeysFrames(t *testing.T) {
	ns := netns.NetNS(t)
	x := openXDP(t, ns, Config{Key: flow.KeySrc, Seed: 1, PollTimeout: 50 * time.Millisecond})
	if x.Mode() != AttachNative {
		t.Errorf("mode %v on veth, want native (veth has a driver hook)", x.Mode())
	}
	if xdp := ns.Link(t, ns.Veth[0]).Attrs().Xdp; xdp == nil || !xdp.Attached {
		t.Fatalf("no XDP program attached to %s: %+v", ns.Veth[0], xdp)
	}
	in := newInjector(t, ns, ns.Veth[1])
	const flows, repeats = 200, 5
	before := time.Now().UnixNano()
	for range repeats {
		for i := range flows {
			in.send(t, udp4Frame(srcAddr(i), netip.MustParseAddr("192.0.2.1"), 1000, 53))
		}
	}
	in.send(t, udp4Frame(srcAddr(0), srcAddr(1), 1, 2)[:14+10]) // cut inside the IPv4 header
	waitProcessed(t, x, flows*repeats+1)
	after := time.Now().UnixNano()

	got := map[flow.Key]int{}
	for _, p := range readKeys(t, x) {
		got[p.Key]++
		if p.TimeNs < before || p.TimeNs > after {
			t.Errorf("key %v at %d, outside the sending interval [%d, %d]", p.Key, p.TimeNs, before, after)
		}
	}
	for i := range flows {
		k := flow.MakeKey(flow.KeySrc, srcAddr(i), netip.Addr{}, 0, 0, 0)
		// veth delivers on the CPU of the sender, which may move: a key
		// comes at most once per CPU.
		if got[k] < 1 || got[k] > len(x.Sources()) {
			t.Errorf("key %v delivered %d times", k, got[k])
		}
	}
	c := total(t, x)
	// The stack of the namespace may send a few frames of its own (IPv6
	// neighbour discovery) on the veth: count at least ours.
	if c.Packets < flows*repeats+1 || c.Errors["truncated"] != 1 || c.Prefiltered < uint64(flows*(repeats-len(x.Sources()))) {
		t.Errorf("counters %+v: want >= %d packets, 1 truncated, most repeats prefiltered", c, flows*repeats+1)
	}
	if err := x.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if xdp := ns.Link(t, ns.Veth[0]).Attrs().Xdp; xdp != nil && xdp.Attached {
		t.Errorf("XDP program still attached after Close: %+v", xdp)
	}
	var p capture.Packet
	if err := x.Sources()[0].Next(&p); !errors.Is(err, capture.ErrClosed) {
		t.Errorf("Next after Close: %v, want ErrClosed", err)
	}
}

// With Config.Prefix the kernel masks keys to their networks before its
// prefilter: frames from 200 hosts of 10.0.0.0/24 and 10.0.1.0/24 come out
// as those two network keys, once each per CPU, and the other frames are
// prefiltered in the kernel.
func TestXDPPrefix(t *testing.T) {
	ns := netns.NetNS(t)
	m, err := flow.ParseMask("24,64")
	if err != nil {
		t.Fatal(err)
	}
	x := openXDP(t, ns, Config{Key: flow.KeySrc, Prefix: m, Seed: 3, PollTimeout: 50 * time.Millisecond})
	in := newInjector(t, ns, ns.Veth[1])
	const hosts = 200 // srcAddr(0..199): 10.0.0.0-10.0.0.199
	for i := range hosts {
		in.send(t, udp4Frame(srcAddr(i), netip.MustParseAddr("192.0.2.1"), 1000, 53))
		in.send(t, udp4Frame(srcAddr(256+i), netip.MustParseAddr("192.0.2.1"), 1000, 53))
	}
	waitProcessed(t, x, 2*hosts)
	got := map[string]int{}
	for _, p := range readKeys(t, x) {
		got[p.Key.String()]++
	}
	// The namespace's stack may send frames of its own (IPv6 neighbour
	// discovery from a link-local address): networks of fe80::/64.
	delete(got, "fe80::/64")
	if len(got) != 2 || got["10.0.0.0/24"] < 1 || got["10.0.1.0/24"] < 1 || got["10.0.0.0/24"] > len(x.Sources()) || got["10.0.1.0/24"] > len(x.Sources()) {
		t.Errorf("keys %v: want 10.0.0.0/24 and 10.0.1.0/24, at most once per CPU", got)
	}
	if c := total(t, x); c.Prefiltered < uint64(2*hosts-2*len(x.Sources())) {
		t.Errorf("counters %+v: want at least %d prefiltered", c, 2*hosts-2*len(x.Sources()))
	}
}

// A burst of new keys that overflows the ring buffer loses keys, but never
// silently: every frame is a prefilter hit, an emitted key or a ring-full
// drop, and a key lost to a full ring is not remembered, so a later packet
// of the same flow gets through.
func TestXDPBurstCountsDrops(t *testing.T) {
	ns := netns.NetNS(t)
	x := openXDP(t, ns, Config{Key: flow.KeySrc, Seed: 2, RingBytes: 4096, PollTimeout: 50 * time.Millisecond})
	in := newInjector(t, ns, ns.Veth[1])
	const burst = 2000 // a 4 KiB ring holds about 70 events
	var frames [][]byte
	for i := range burst {
		frames = append(frames, udp4Frame(srcAddr(i), netip.MustParseAddr("192.0.2.1"), 1000, 53))
	}
	in.send(t, frames...) // nobody reads yet
	waitProcessed(t, x, burst)
	first := readKeys(t, x)
	c := total(t, x)
	if c.RingFull == 0 {
		t.Fatalf("counters %+v: a burst of %d keys into a 4 KiB ring lost none", c, burst)
	}
	if uint64(len(first)) != c.Keyed-c.Prefiltered-c.RingFull {
		t.Errorf("read %d keys; kernel: keyed %d - prefiltered %d - ring full %d", len(first), c.Keyed, c.Prefiltered, c.RingFull)
	}
	// Send the burst again, slowly enough for the reader: the lost keys
	// come through now.
	seen := map[flow.Key]bool{}
	for _, p := range first {
		seen[p.Key] = true
	}
	for i := 0; i < burst; i += 50 {
		in.send(t, frames[i:min(i+50, burst)]...)
		waitProcessed(t, x, uint64(burst+min(i+50, burst)))
		for _, p := range readKeys(t, x) {
			seen[p.Key] = true
		}
	}
	if len(seen) != burst {
		t.Errorf("%d of %d keys delivered after the second pass", len(seen), burst)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(Config{Iface: "no-such-if0", Key: flow.KeySrc}); !errors.Is(err, ErrNoInterface) {
		t.Errorf("missing interface: %v, want ErrNoInterface", err)
	}
	if _, err := Open(Config{Iface: "lo"}); !errors.Is(err, flow.ErrBadKind) {
		t.Errorf("no key kind: %v, want ErrBadKind", err)
	}
	if _, err := Open(Config{Iface: "lo", Key: flow.KeySrc, Attach: "fast"}); err == nil {
		t.Error("unknown attach mode accepted")
	}
	if _, err := ParseAttachMode("generic"); err != nil {
		t.Error(err)
	}
}

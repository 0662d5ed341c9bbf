//go:build linux

package afpacket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/capturetest"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/netns"
	"github.com/flowdedup/flowdedup/internal/testutil/testframe"
)

// The live tests send frames only inside a network namespace they make, on
// addresses of the benchmarking range 198.18.0.0/15 and the documentation
// prefix 2001:db8::/32: nothing leaves the namespace.

// marker starts the payload of every frame a test sends, followed by the
// frame's sequence number.
const marker = "fdtest\x00\x01"

// udpFrame builds an Ethernet frame carrying UDP from flow to a fixed
// destination, with payload padding bytes after the marker and sequence.
func udpFrame(flowID int, v6 bool, dport uint16, seq uint32, padding int) []byte {
	sport := uint16(20000 + flowID)
	udp := make([]byte, 8, 8+len(marker)+4+padding)
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], dport)
	udp = append(udp, marker...)
	udp = binary.BigEndian.AppendUint32(udp, seq)
	udp = append(udp, make([]byte, padding)...)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	if v6 {
		src := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(flowID)})
		return testframe.Ethernet(unix.ETH_P_IPV6, false, testframe.IPv6(src, netip.MustParseAddr("2001:db8::ff"), unix.IPPROTO_UDP, udp))
	}
	src := netip.AddrFrom4([4]byte{198, 18, 0, byte(flowID)})
	return testframe.Ethernet(unix.ETH_P_IP, false, testframe.IPv4(src, netip.MustParseAddr("198.19.0.1"), unix.IPPROTO_UDP, nil, 0, udp))
}

// seqOf finds the sequence number of a frame the test sent.
func seqOf(data []byte) (uint32, bool) {
	i := bytes.Index(data, []byte(marker))
	if i < 0 || i+len(marker)+4 > len(data) {
		return 0, false
	}
	return binary.BigEndian.Uint32(data[i+len(marker):]), true
}

// frameSender sends raw frames out of an interface of the namespace.
type frameSender struct {
	fd      int
	ifindex int
}

func newSender(t *testing.T, ns *netns.Namespace, iface string) *frameSender {
	t.Helper()
	s := &frameSender{ifindex: ns.Link(t, iface).Attrs().Index}
	// Protocol 0: the socket sends and receives nothing.
	err := ns.Do(func() (err error) {
		s.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		t.Fatalf("sender socket: %v", err)
	}
	t.Cleanup(func() { unix.Close(s.fd) })
	return s
}

func (s *frameSender) send(t *testing.T, frame []byte) {
	t.Helper()
	sa := &unix.SockaddrLinklayer{Ifindex: s.ifindex, Protocol: htons(unix.ETH_P_ALL)}
	for {
		err := unix.Sendto(s.fd, frame, 0, sa)
		if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) {
			time.Sleep(time.Millisecond) // the device queue is full: let it drain
			continue
		}
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		return
	}
}

// openInNS opens a capture inside ns and closes it when the test ends.
func openInNS(t *testing.T, ns *netns.Namespace, cfg Config) []*Socket {
	t.Helper()
	var srcs []capture.Source
	err := ns.Do(func() (err error) {
		srcs, err = Open(cfg)
		return err
	})
	if err != nil {
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	out := make([]*Socket, len(srcs))
	for i, s := range srcs {
		out[i] = s.(*Socket)
		t.Cleanup(func() { s.Close() })
	}
	return out
}

type rxFrame struct {
	seq     uint32
	socket  int
	timeNs  int64
	wireLen int
	capLen  int
	lt      flow.LinkType
}

// readAll reads every source in its own goroutine until want marked
// frames have arrived and each source has then seen a quiet poll interval
// (want 0: until the first quiet interval), or until the limit. Frames
// without the marker are counted apart.
func readAll(t *testing.T, srcs []*Socket, want int, limit time.Duration) (got []rxFrame, unmarked int) {
	t.Helper()
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		total   atomic.Int64
		errs    = make(chan error, len(srcs))
		timeout = time.Now().Add(limit)
	)
	for i, s := range srcs {
		wg.Go(func() {
			var p capture.Packet
			for time.Now().Before(timeout) {
				err := s.Next(&p)
				if errors.Is(err, capture.ErrTimeout) {
					if total.Load() >= int64(want) {
						return
					}
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("socket %d: %w", i, err)
					return
				}
				seq, ok := seqOf(p.Data)
				mu.Lock()
				if ok {
					got = append(got, rxFrame{seq, i, p.TimeNs, p.WireLen, len(p.Data), p.LinkType})
					total.Add(1)
				} else {
					unmarked++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return got, unmarked
}

// TestFanoutLive sends flows of UDP frames into one end of a veth
// pair and captures them on the other with two sockets in a fanout group
// and a kernel filter.
func TestFanoutLive(t *testing.T) {
	ns := netns.NetNS(t)
	srcs := openInNS(t, ns, Config{
		Iface:       ns.Veth[0],
		Sockets:     2,
		BPF:         "udp and not port 9999",
		PollTimeout: 50 * time.Millisecond,
	})
	if len(srcs) != 2 {
		t.Fatalf("%d sources, want 2", len(srcs))
	}
	g0, ok0 := srcs[0].FanoutGroup()
	g1, ok1 := srcs[1].FanoutGroup()
	if !ok0 || !ok1 || g0 != g1 {
		t.Errorf("fanout groups %d/%v and %d/%v, want one group", g0, ok0, g1, ok1)
	}
	for _, s := range srcs {
		if s.LinkType() != flow.LinkEthernet {
			t.Errorf("link type %v, want Ethernet", s.LinkType())
		}
	}

	const flows, perFlow = 64, 8
	type sent struct {
		flow    int
		wireLen int
		keep    bool // the filter lets it through
	}
	var frames [][]byte
	var sentBy = map[uint32]sent{}
	seq := uint32(0)
	for round := range perFlow {
		for f := range flows {
			padding := 16
			if f%4 == 0 {
				padding = 1000 // longer than the snap length
			}
			frame := udpFrame(f, f%2 == 1, 7777, seq, padding)
			sentBy[seq] = sent{f, len(frame), true}
			frames = append(frames, frame)
			seq++
			if round == 0 { // a frame of the same flow the filter drops
				frame := udpFrame(f, f%2 == 1, 9999, seq, 16)
				sentBy[seq] = sent{f, len(frame), false}
				frames = append(frames, frame)
				seq++
			}
		}
	}
	arp := testframe.Ethernet(unix.ETH_P_ARP, false, append(testframe.ARP(1, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")), marker+"\xff\xff\xff\xff"...))

	sender := newSender(t, ns, ns.Veth[1])
	start := time.Now()
	for _, f := range frames {
		sender.send(t, f)
	}
	sender.send(t, arp)
	want := flows * perFlow
	got, unmarked := readAll(t, srcs, want, 10*time.Second)
	end := time.Now()
	if unmarked > 0 {
		t.Logf("%d frames the test did not send passed the filter", unmarked)
	}

	seen := map[uint32]bool{}
	socketOf := map[int]int{}
	perSocket := [2]int{}
	for _, r := range got {
		s, ok := sentBy[r.seq]
		switch {
		case !ok:
			t.Errorf("received a frame with sequence %d, which was never sent (the ARP frame?)", r.seq)
			continue
		case !s.keep:
			t.Errorf("frame %d (port 9999) passed the filter", r.seq)
		case seen[r.seq]:
			t.Errorf("frame %d received twice", r.seq)
		}
		seen[r.seq] = true
		perSocket[r.socket]++
		if prev, ok := socketOf[s.flow]; ok && prev != r.socket {
			t.Errorf("flow %d reached sockets %d and %d", s.flow, prev, r.socket)
		}
		socketOf[s.flow] = r.socket
		if r.wireLen != s.wireLen {
			t.Errorf("frame %d: wire length %d, want %d", r.seq, r.wireLen, s.wireLen)
		}
		if wantCap := min(s.wireLen, DefaultSnapLen); r.capLen != wantCap {
			t.Errorf("frame %d: captured %d bytes, want %d", r.seq, r.capLen, wantCap)
		}
		if ts := time.Unix(0, r.timeNs); ts.Before(start.Add(-time.Second)) || ts.After(end.Add(time.Second)) {
			t.Errorf("frame %d: timestamp %v outside the test's run [%v, %v]", r.seq, ts, start, end)
		}
		if r.lt != flow.LinkEthernet {
			t.Errorf("frame %d: link type %v", r.seq, r.lt)
		}
	}
	if len(seen) != want {
		t.Errorf("received %d distinct frames, want %d", len(seen), want)
	}
	if perSocket[0] == 0 || perSocket[1] == 0 {
		t.Errorf("frames per socket %v: fanout did not spread %d flows", perSocket, flows)
	}
	t.Logf("%d frames over 2 sockets: %v", len(got), perSocket)
	for i, s := range srcs {
		drops, err := s.KernelDrops()
		if err != nil || drops != 0 {
			t.Errorf("socket %d: KernelDrops = %d, %v; want 0, nil", i, drops, err)
		}
	}
}

// TestNextNoAllocs proves that reading a frame allocates nothing,
// within a block and across blocks.
func TestNextNoAllocs(t *testing.T) {
	ns := netns.NetNS(t)
	srcs := openInNS(t, ns, Config{Iface: ns.Veth[0], BlockSize: 2 * os.Getpagesize(), NumBlocks: 64, PollTimeout: time.Second})
	sender := newSender(t, ns, ns.Veth[1])
	const runs = 200
	for i := range runs + 1 { // AllocsPerRun calls once more to warm up
		sender.send(t, udpFrame(i%16, i%2 == 0, 7777, uint32(i), 64))
	}
	var p capture.Packet
	var errs int
	allocs := testing.AllocsPerRun(runs, func() {
		if srcs[0].Next(&p) != nil {
			errs++
		}
	})
	if errs > 0 {
		t.Fatalf("%d reads failed", errs)
	}
	if allocs != 0 {
		t.Errorf("Next allocates %.1f times per frame, want 0", allocs)
	}
}

// TestKernelDrops overfills a tiny ring and reads the drop count.
func TestKernelDrops(t *testing.T) {
	ns := netns.NetNS(t)
	page := os.Getpagesize()
	srcs := openInNS(t, ns, Config{Iface: ns.Veth[0], BlockSize: page, NumBlocks: 2, PollTimeout: 50 * time.Millisecond})
	sender := newSender(t, ns, ns.Veth[1])
	const sent = 400 // about ten times what the ring holds
	for i := range sent {
		sender.send(t, udpFrame(i%8, false, 7777, uint32(i), 64))
	}
	got, _ := readAll(t, srcs, 0, 3*time.Second)
	drops, err := srcs[0].KernelDrops()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %d, received %d, kernel dropped %d", sent, len(got), drops)
	if drops == 0 || len(got) == sent {
		t.Errorf("received %d of %d frames with %d drops: the ring did not overflow", len(got), sent, drops)
	}
	if len(got)+int(drops) > sent {
		t.Errorf("received %d + dropped %d > sent %d", len(got), drops, sent)
	}
	srcs[0].Close()
	if after, err := srcs[0].KernelDrops(); err != nil || after != drops {
		t.Errorf("KernelDrops after Close = %d, %v; want %d, nil", after, err, drops)
	}
}

func TestTimeout(t *testing.T) {
	ns := netns.NetNS(t)
	const poll = 40 * time.Millisecond
	srcs := openInNS(t, ns, Config{Iface: ns.Veth[0], PollTimeout: poll})
	var p capture.Packet
	for range 3 {
		start := time.Now()
		err := srcs[0].Next(&p)
		took := time.Since(start)
		if !errors.Is(err, capture.ErrTimeout) {
			t.Fatalf("Next on an idle link: %v, want capture.ErrTimeout", err)
		}
		if took < poll-time.Millisecond || took > poll+time.Second {
			t.Errorf("capture.ErrTimeout after %v, want about %v", took, poll)
		}
	}
}

// TestSource checks a socket against the contract of capture.Source
// (capturetest): the frames sent into the veth pair, in order, and Close,
// which wakes a Next waiting forever in poll(2).
func TestSource(t *testing.T) {
	var sender *frameSender
	frames := make([][]byte, 10)
	for i := range frames {
		frames[i] = udpFrame(1, i%2 == 1, 7777, uint32(i), 16)
	}
	capturetest.Run(t, capturetest.Backend{
		Open: func(t *testing.T) capture.Source {
			ns := netns.NetNS(t)
			srcs := openInNS(t, ns, Config{Iface: ns.Veth[0], PollTimeout: -1})
			sender = newSender(t, ns, ns.Veth[1])
			return srcs[0]
		},
		Send: func(t *testing.T, frames [][]byte) {
			for _, f := range frames {
				sender.send(t, f)
			}
		},
		Frames: frames,
		Live:   true,
	})
}

// TestCloseWhileHoldingFrame closes a source whose reader still
// holds a frame: the frame stays readable until the reader's next Next.
func TestCloseWhileHoldingFrame(t *testing.T) {
	ns := netns.NetNS(t)
	srcs := openInNS(t, ns, Config{Iface: ns.Veth[0], PollTimeout: time.Second})
	sender := newSender(t, ns, ns.Veth[1])
	frame := udpFrame(1, false, 7777, 42, 16)
	sender.send(t, frame)
	sender.send(t, udpFrame(1, false, 7777, 43, 16))
	var p capture.Packet
	if err := srcs[0].Next(&p); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error)
	go func() { closed <- srcs[0].Close() }()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.Data, frame) {
		t.Errorf("held frame changed after Close: % x", p.Data)
	}
	if err := srcs[0].Next(&p); !errors.Is(err, capture.ErrClosed) {
		t.Errorf("Next after Close with a frame left in the block: %v, want capture.ErrClosed", err)
	}
}

// TestLoopback captures on lo, where every frame passes twice,
// leaving and arriving: the capture must keep one.
func TestLoopback(t *testing.T) {
	ns := netns.NetNS(t)
	srcs := openInNS(t, ns, Config{Iface: "lo", BPF: "udp and dst port 7777", PollTimeout: 50 * time.Millisecond})
	if lt := srcs[0].LinkType(); lt != flow.LinkEthernet {
		t.Errorf("loopback link type %v, want Ethernet", lt)
	}
	payload := append([]byte(marker), 0, 0, 0, 7)
	err := ns.Do(func() error {
		c, err := net.Dial("udp4", "127.0.0.1:7777")
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write(payload)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, srcs, 1, 3*time.Second)
	if len(got) != 1 || got[0].seq != 7 {
		t.Errorf("received %+v, want the one datagram once", got)
	}
}

// TestRawIP captures on a tun device, which has no link header.
func TestRawIP(t *testing.T) {
	ns := netns.NetNS(t)
	tun := ns.AddTun(t, "fdtun0")
	srcs := openInNS(t, ns, Config{Iface: "fdtun0", BPF: "udp", PollTimeout: 50 * time.Millisecond})
	if lt := srcs[0].LinkType(); lt != flow.LinkRaw {
		t.Fatalf("tun link type %v, want raw IP", lt)
	}
	udp := append(binary.BigEndian.AppendUint16(nil, 1), 0, 2, 0, 20, 0, 0)
	udp = binary.BigEndian.AppendUint32(append(udp, marker...), 9)
	packet := testframe.IPv4(netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), unix.IPPROTO_UDP, nil, 0, udp)
	tcp := testframe.IPv4(netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), unix.IPPROTO_TCP, nil, 0, append(testframe.Transport(unix.IPPROTO_TCP, 1, 2), marker+"\x00\x00\x00\x0a"...))
	for _, pkt := range [][]byte{tcp, packet} {
		if _, err := tun.Write(pkt); err != nil {
			t.Fatalf("writing to tun: %v", err)
		}
	}
	got, _ := readAll(t, srcs, 1, 3*time.Second)
	if len(got) != 1 || got[0].seq != 9 || got[0].lt != flow.LinkRaw || got[0].capLen != len(packet) {
		t.Errorf("received %+v, want only the UDP packet (%d bytes) as raw IP", got, len(packet))
	}
}

func TestPromisc(t *testing.T) {
	ns := netns.NetNS(t)
	before := ns.Link(t, ns.Veth[0]).Attrs().Promisc
	srcs := openInNS(t, ns, Config{Iface: ns.Veth[0], Sockets: 2, Promisc: true})
	if got := ns.Link(t, ns.Veth[0]).Attrs().Promisc; got != before+2 {
		t.Errorf("promiscuity %d with two promiscuous sockets, want %d", got, before+2)
	}
	for _, s := range srcs {
		s.Close()
	}
	if got := ns.Link(t, ns.Veth[0]).Attrs().Promisc; got != before {
		t.Errorf("promiscuity %d after Close, want %d", got, before)
	}
}

func TestFanoutGroupGiven(t *testing.T) {
	ns := netns.NetNS(t)
	srcs := openInNS(t, ns, Config{Iface: ns.Veth[0], FanoutGroup: 4242})
	if id, ok := srcs[0].FanoutGroup(); !ok || id != 4242 {
		t.Errorf("FanoutGroup() = %d, %v; want 4242, true", id, ok)
	}
	// A second capture on the same interface and group joins it.
	more := openInNS(t, ns, Config{Iface: ns.Veth[0], FanoutGroup: 4242})
	if id, _ := more[0].FanoutGroup(); id != 4242 {
		t.Errorf("second capture in group %d", id)
	}
	// One on another interface cannot use the id in the same namespace.
	err := ns.Do(func() error {
		srcs, err := Open(Config{Iface: ns.Veth[1], FanoutGroup: 4242})
		for _, s := range srcs {
			s.Close()
		}
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "fanout") {
		t.Errorf("group 4242 on another interface: %v, want a fanout error", err)
	}
}

func TestNoSuchInterface(t *testing.T) {
	testutil.RequireRoot(t)
	_, err := Open(Config{Iface: "fdnosuch0"})
	if err == nil || !strings.Contains(err.Error(), `"fdnosuch0" does not exist`) || !errors.Is(err, unix.ENODEV) {
		t.Errorf("error %v, want it to name the missing interface and wrap ENODEV", err)
	}
}

// TestPermissionDenied drops CAP_NET_RAW from one thread and opens
// a capture on it.
func TestPermissionDenied(t *testing.T) {
	testutil.RequireRoot(t)
	errc := make(chan error, 1)
	go func() {
		// Capabilities belong to threads: this one loses CAP_NET_RAW from
		// its effective set for the call, then gets it back from its
		// permitted set. Should that fail, the thread stays locked and
		// dies with the goroutine.
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var caps [2]unix.CapUserData
		if err := unix.Capget(&hdr, &caps[0]); err != nil {
			errc <- fmt.Errorf("capget: %w", err)
			return
		}
		lowered := caps
		lowered[0].Effective &^= 1 << testutil.CapNetRaw
		if err := unix.Capset(&hdr, &lowered[0]); err != nil {
			errc <- fmt.Errorf("capset: %w", err)
			return
		}
		srcs, err := Open(Config{Iface: "lo"})
		for _, s := range srcs {
			s.Close()
		}
		if unix.Capset(&hdr, &caps[0]) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	err := <-errc
	if err == nil || !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), "CAP_NET_RAW") {
		t.Errorf("without CAP_NET_RAW: %v, want a permission error naming CAP_NET_RAW", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "no interface"},
		{Config{Iface: "lo", Sockets: 300}, "300 sockets"},
		{Config{Iface: "lo", SnapLen: -1}, "snap length"},
		{Config{Iface: "lo", BlockSize: 1000}, "page size"},
		{Config{Iface: "lo", BlockSize: os.Getpagesize(), SnapLen: 65535}, "cannot hold"},
		{Config{Iface: "lo", NumBlocks: 1}, "at least 2"},
		{Config{Iface: "lo", BlockTimeout: time.Microsecond}, "block timeout"},
		{Config{Iface: "lo", BPF: "tcp udp"}, `expected "and" or "or"`},
	} {
		t.Run(c.want, func(t *testing.T) {
			if c.cfg.BPF != "" {
				testutil.RequireRoot(t) // the filter is compiled once the link type is known
			}
			srcs, err := Open(c.cfg)
			for _, s := range srcs {
				s.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%+v: %v, want an error saying %q", c.cfg, err, c.want)
			}
		})
	}
}

func TestBindFlags(t *testing.T) {
	var cfg Config
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	cfg.BindFlags(fs)
	if err := fs.Parse([]string{"-afpacket-sockets", "4", "-bpf", "tcp", "-afpacket-fanout-group", "0x10"}); err != nil {
		t.Fatal(err)
	}
	want := Config{Sockets: 4, FanoutGroup: 16, SnapLen: DefaultSnapLen, BPF: "tcp",
		BlockSize: DefaultBlockSize, NumBlocks: DefaultNumBlocks, BlockTimeout: DefaultBlockTimeout}
	if cfg != want {
		t.Errorf("flags gave %+v, want %+v", cfg, want)
	}
	// The flags every live mode shares are the caller's, bound once.
	for _, name := range []string{"iface", "promisc", "poll-timeout"} {
		if fs.Lookup(name) != nil {
			t.Errorf("-%s is bound by afpacket.Config: it belongs to every live mode, not to AF_PACKET", name)
		}
	}
}

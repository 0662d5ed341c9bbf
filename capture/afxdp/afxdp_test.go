//go:build linux && !(mips || mips64 || ppc64 || s390x)

package afxdp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/afpacket"
	"github.com/flowdedup/flowdedup/capture/capturetest"
	"github.com/flowdedup/flowdedup/capture/xdp"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/netns"
	"github.com/flowdedup/flowdedup/internal/testutil/testframe"
)

// afxFrame returns the i-th test frame: Ethernet/IPv4/UDP from 10.1.x.y
// (distinct for each i below 65536) with i in the payload, 60 to 250 bytes
// long depending on i.
func afxFrame(i int) []byte {
	f := testframe.UDP4Frame(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), netip.MustParseAddr("192.0.2.1"), 40000, 53, 60+i%191)
	binary.BigEndian.PutUint32(f[14+20+8:], uint32(i))
	return f
}

// afxSender writes frames into one end of the veth pair, to arrive on the
// other, through an AF_PACKET socket opened in the namespace.
type afxSender struct{ fd int }

func afxNewSender(t testing.TB, ns *netns.Namespace, iface string) *afxSender {
	t.Helper()
	s := &afxSender{fd: -1}
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) // protocol 0: receives nothing
		if err != nil {
			return err
		}
		s.fd = fd
		ifi, err := xdp.InterfaceIndex(iface)
		if err != nil {
			return err
		}
		// Straight to the driver: no qdisc to drop or reorder frames.
		unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1)
		return unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi})
	})
	if s.fd >= 0 {
		t.Cleanup(func() { unix.Close(s.fd) })
	}
	if err != nil {
		t.Fatalf("AF_PACKET sender on %s: %v", iface, err)
	}
	return s
}

func (s *afxSender) send(t testing.TB, frame []byte) {
	t.Helper()
	for {
		_, err := unix.Write(s.fd, frame)
		if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		if err != nil {
			t.Fatalf("sending a frame: %v", err)
		}
		return
	}
}

// afxOpen opens an AF_XDP capture inside the namespace and closes it with
// the test.
func afxOpen(t testing.TB, ns *netns.Namespace, cfg Config) *Capture {
	t.Helper()
	var a *Capture
	err := ns.Do(func() (err error) {
		a, err = Open(cfg)
		return err
	})
	if err != nil {
		if errors.Is(err, xdp.ErrUnsupported) || errors.Is(err, xdp.ErrPermission) {
			testutil.SkipOrFail(t, "AF_XDP capture unavailable here: %v", err)
		}
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// afxXDP returns the XDP state of a link of the namespace.
func afxXDP(t testing.TB, ns *netns.Namespace, iface string) *netlink.LinkXdp {
	t.Helper()
	l, err := ns.Netlink().LinkByName(iface)
	if err != nil {
		t.Fatalf("link %s: %v", iface, err)
	}
	return l.Attrs().Xdp
}

func afxAttached(t testing.TB, ns *netns.Namespace, iface string) bool {
	x := afxXDP(t, ns, iface)
	return x != nil && x.Attached
}

// afxRead reads frames from src until it has want of them or the source
// stayed idle for idle, and returns copies of them.
func afxRead(t testing.TB, src capture.Source, want int, idle time.Duration) [][]byte {
	t.Helper()
	var got [][]byte
	var p capture.Packet
	last := time.Now()
	for len(got) < want {
		err := src.Next(&p)
		if errors.Is(err, capture.ErrTimeout) {
			if time.Since(last) > idle {
				break
			}
			continue
		}
		if err != nil {
			t.Errorf("Next: %v", err)
			break
		}
		last = time.Now()
		if p.LinkType != flow.LinkEthernet || p.WireLen != len(p.Data) || p.TimeNs == 0 {
			t.Errorf("packet %d: link type %v, wire length %d for %d bytes, time %d", len(got), p.LinkType, p.WireLen, len(p.Data), p.TimeNs)
		}
		got = append(got, bytes.Clone(p.Data))
	}
	return got
}

func TestAFXDPReceivesFrames(t *testing.T) {
	for _, mode := range []xdp.AttachMode{xdp.AttachNative, xdp.AttachGeneric} {
		t.Run(string(mode), func(t *testing.T) {
			ns := netns.NetNS(t)
			a := afxOpen(t, ns, Config{Iface: ns.Veth[0], Attach: mode, NumFrames: 512})
			t.Logf("mode %s", a.Mode())
			if want := string(mode) + "/copy"; a.Mode() != want { // veth has no zero-copy AF_XDP
				t.Errorf("Mode() = %q, want %q", a.Mode(), want)
			}
			srcs := a.Sources()
			if len(srcs) != 1 { // a veth has one receive queue in use
				t.Fatalf("%d sources, want 1", len(srcs))
			}
			x := afxXDP(t, ns, ns.Veth[0])
			if x == nil || !x.Attached {
				t.Fatalf("no XDP program on %s while capturing", ns.Veth[0])
			}
			if wantMode := map[xdp.AttachMode]uint32{xdp.AttachNative: 1, xdp.AttachGeneric: 2}[mode]; x.AttachMode != wantMode {
				t.Errorf("%s: XDP attach mode %d, want %d", ns.Veth[0], x.AttachMode, wantMode)
			}

			// More frames than the UMEM has, so that frames are recycled,
			// in bursts of half the UMEM: before each burst the sender
			// waits until the reader has every frame sent so far, so the
			// UMEM never runs out however the two are scheduled (a busy
			// machine descheduled the reader for long enough to drop
			// frames when the bursts were paced by the clock).
			const n, burst = 3000, 256
			var got [][]byte
			var received atomic.Int64
			done := make(chan struct{})
			go func() {
				defer close(done)
				var p capture.Packet
				for deadline := time.Now().Add(time.Minute); len(got) < n && time.Now().Before(deadline); {
					err := srcs[0].Next(&p)
					if errors.Is(err, capture.ErrTimeout) {
						continue
					}
					if err != nil {
						t.Errorf("Next: %v", err)
						return
					}
					got = append(got, bytes.Clone(p.Data))
					received.Store(int64(len(got)))
				}
				if extra := afxRead(t, srcs[0], 1, time.Second); len(extra) != 0 {
					t.Errorf("a frame beyond the %d sent: %x", n, extra[0])
				}
			}()
			snd := afxNewSender(t, ns, ns.Veth[1])
			for i := range n {
				if i%burst == 0 {
					testutil.WaitFor(t, fmt.Sprintf("the reader to have the %d frames sent", i), time.Minute, func() bool { return received.Load() >= int64(i) })
				}
				snd.send(t, afxFrame(i))
			}
			<-done
			if len(got) != n {
				t.Errorf("received %d frames, sent %d", len(got), n)
			}
			for i := range min(len(got), n) {
				if want := afxFrame(i); !bytes.Equal(got[i], want) {
					t.Fatalf("frame %d:\n got %x\nwant %x", i, got[i], want)
				}
			}
			drops, err := srcs[0].(capture.DropCounter).KernelDrops()
			if err != nil || drops != 0 {
				t.Errorf("KernelDrops() = %d, %v; want 0", drops, err)
			}

			if err := a.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if afxAttached(t, ns, ns.Veth[0]) {
				t.Errorf("an XDP program is still attached to %s after Close", ns.Veth[0])
			}
			var p capture.Packet
			if err := srcs[0].Next(&p); !errors.Is(err, capture.ErrClosed) {
				t.Errorf("Next after Close: %v, want ErrClosed", err)
			}
			if err := a.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

// TestAFXDPCloseSourcePassesFrames checks that closing a source hands its
// queue's frames back to the stack while the program stays attached.
func TestAFXDPCloseSourcePassesFrames(t *testing.T) {
	ns := netns.NetNS(t)
	a := afxOpen(t, ns, Config{Iface: ns.Veth[0], Attach: xdp.AttachGeneric})
	src := a.Sources()[0]
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	// An AF_PACKET socket on the capture end sees what reaches the stack.
	var afp []capture.Source
	err := ns.Do(func() (err error) {
		afp, err = afpacket.Open(afpacket.Config{Iface: ns.Veth[0], PollTimeout: 50 * time.Millisecond})
		return err
	})
	if err != nil {
		t.Fatalf("AF_PACKET on %s: %v", ns.Veth[0], err)
	}
	defer afp[0].Close()
	snd := afxNewSender(t, ns, ns.Veth[1])
	for i := range 10 {
		snd.send(t, afxFrame(i))
	}
	got := afxRead(t, afp[0], 10, 500*time.Millisecond)
	if len(got) != 10 {
		t.Errorf("the stack got %d of 10 frames after the AF_XDP source closed", len(got))
	}
	if !afxAttached(t, ns, ns.Veth[0]) {
		t.Errorf("closing a source detached the program: only AFXDP.Close should")
	}
}

// TestSource checks a socket against the contract of capture.Source
// (capturetest), closed as the pipeline's caller closes it, by the Capture:
// the frames sent into the veth pair, in order, and Close, which wakes a
// Next waiting forever in poll(2) and detaches the program.
func TestSource(t *testing.T) { runConformance(t, nil) }

// runConformance runs capturetest's conformance test of capture.Source
// on a Capture of one veth end, prefiltered by pf if it is not nil.
func runConformance(t *testing.T, pf *Prefilter) {
	var (
		ns     *netns.Namespace
		a      *Capture
		sender *afxSender
	)
	frames := make([][]byte, 10)
	for i := range frames {
		frames[i] = afxFrame(i)
	}
	capturetest.Run(t, capturetest.Backend{
		Open: func(t *testing.T) capture.Source {
			ns = netns.NetNS(t)
			a = afxOpen(t, ns, Config{Iface: ns.Veth[0], PollTimeout: -1, Prefilter: pf})
			sender = afxNewSender(t, ns, ns.Veth[1])
			return a.Sources()[0]
		},
		Send: func(t *testing.T, frames [][]byte) {
			for _, f := range frames {
				sender.send(t, f)
			}
		},
		Frames: frames,
		Live:   true,
		Close: func(t *testing.T, s capture.Source) error {
			err := a.Close()
			if afxAttached(t, ns, ns.Veth[0]) {
				t.Errorf("an XDP program is still attached to %s after Close", ns.Veth[0])
			}
			return err
		},
	})
}

// TestAFXDPCloseKeepsHeldFrame checks that a frame returned by Next stays
// readable after Close until the next Next, which returns ErrClosed.
func TestAFXDPCloseKeepsHeldFrame(t *testing.T) {
	ns := netns.NetNS(t)
	a := afxOpen(t, ns, Config{Iface: ns.Veth[0], PollTimeout: time.Second})
	src := a.Sources()[0]
	afxNewSender(t, ns, ns.Veth[1]).send(t, afxFrame(7))
	var p capture.Packet
	if err := src.Next(&p); err != nil {
		t.Fatalf("Next: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !bytes.Equal(p.Data, afxFrame(7)) { // would fault if unmapped
		t.Errorf("held frame changed after Close")
	}
	if err := src.Next(&p); !errors.Is(err, capture.ErrClosed) {
		t.Errorf("Next after Close: %v, want ErrClosed", err)
	}
	if drops, err := src.(capture.DropCounter).KernelDrops(); err != nil || drops != 0 {
		t.Errorf("KernelDrops after Close = %d, %v", drops, err)
	}
}

func TestAFXDPNextAllocs(t *testing.T) {
	ns := netns.NetNS(t)
	a := afxOpen(t, ns, Config{Iface: ns.Veth[0], Attach: xdp.AttachNative, NumFrames: 1024})
	src := a.Sources()[0]
	const runs = 500
	snd := afxNewSender(t, ns, ns.Veth[1])
	for i := range runs + 1 {
		snd.send(t, afxFrame(i))
	}
	var p capture.Packet
	var errs int
	allocs := testing.AllocsPerRun(runs, func() {
		if src.Next(&p) != nil {
			errs++
		}
	})
	if errs != 0 {
		t.Errorf("%d of %d Next calls failed", errs, runs+1)
	}
	if allocs != 0 {
		t.Errorf("Next allocates %.2f times per frame, want 0", allocs)
	}
}

// TestAFXDPDetachedWhenKilled kills a process capturing with AF_XDP and
// checks that the interface is left without XDP program.
func TestAFXDPDetachedWhenKilled(t *testing.T) {
	ns := netns.NetNS(t)
	if ns.Name == "" {
		testutil.SkipOrFail(t, "the test namespace has no name for `ip netns exec`")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name, exe, "-test.run=^TestAFXDPHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), afxHelperEnv+"="+ns.Veth[0], testutil.RequirePrivilegedEnv+"=")
	if _, err := exec.LookPath("ip"); err != nil {
		testutil.SkipOrFail(t, "cannot run ip netns exec: %v", err)
	}
	helper := testutil.StartProcess(t, cmd, "", 0)
	if line := helper.WaitLine(t, "afxdp-helper: ", time.Minute); !strings.Contains(line, "afxdp-helper: ready") {
		t.Fatalf("helper: %s", line)
	}
	if !afxAttached(t, ns, ns.Veth[0]) {
		t.Fatalf("helper capturing but no XDP program on %s", ns.Veth[0])
	}
	// ip netns exec execs the test binary: the pid is the capturing one.
	if err := cmd.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	helper.Wait(t, time.Minute)
	testutil.WaitFor(t, "the XDP program to leave "+ns.Veth[0]+" after its process was killed", time.Minute, func() bool { return !afxAttached(t, ns, ns.Veth[0]) })
}

const afxHelperEnv = "FLOWDEDUP_AFXDP_HELPER_IFACE"

// TestAFXDPHelperProcess is the process TestAFXDPDetachedWhenKilled kills:
// it captures on the interface named in the environment until killed.
func TestAFXDPHelperProcess(t *testing.T) {
	iface := os.Getenv(afxHelperEnv)
	if iface == "" {
		t.Skip("helper process of TestAFXDPDetachedWhenKilled")
	}
	a, err := Open(Config{Iface: iface})
	if err != nil {
		fmt.Fprintf(os.Stderr, "afxdp-helper: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "afxdp-helper: ready, %s\n", a.Mode())
	for _, s := range a.Sources() {
		go func() {
			var p capture.Packet
			for s.Next(&p) != capture.ErrClosed {
			}
		}()
	}
	time.Sleep(time.Minute) // until killed: a helper left over ends by itself
	os.Exit(2)
}

func TestOpenErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want error
	}{
		{"no interface given", Config{}, xdp.ErrNoInterface},
		{"missing interface", Config{Iface: "fdnosuchif0"}, xdp.ErrNoInterface},
		{"zero-copy on the generic hook", Config{Iface: "lo", Attach: xdp.AttachGeneric, Bind: BindZeroCopy}, xdp.ErrUnsupported},
		{"frame size", Config{Iface: "lo", FrameSize: 3000}, nil},
		{"frame count", Config{Iface: "lo", NumFrames: 1000}, nil},
		{"attach mode", Config{Iface: "lo", Attach: "hardware"}, nil},
		{"bind mode", Config{Iface: "lo", Bind: "fast"}, nil},
	} {
		a, err := Open(c.cfg)
		if err == nil {
			a.Close()
			t.Errorf("%s: Open(%+v) succeeded", c.name, c.cfg)
			continue
		}
		if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want an error wrapping %v", c.name, err, c.want)
		}
		t.Logf("%s: %v", c.name, err)
	}

	ns := netns.NetNS(t)
	for _, c := range []struct {
		name string
		cfg  Config
		want error
	}{
		{"queue out of range", Config{Iface: ns.Veth[0], Queues: []int{1}}, ErrNoQueue},
		{"negative queue", Config{Iface: ns.Veth[0], Queues: []int{-1}}, ErrNoQueue},
		{"no queues", Config{Iface: ns.Veth[0], Queues: []int{}}, ErrNoQueue},
		{"queue twice", Config{Iface: ns.Veth[0], Queues: []int{0, 0}}, nil},
		{"zero-copy on veth", Config{Iface: ns.Veth[0], Bind: BindZeroCopy}, xdp.ErrUnsupported},
		{"missing interface in the namespace", Config{Iface: "fdnosuchif0"}, xdp.ErrNoInterface},
	} {
		err := ns.Do(func() error {
			a, err := Open(c.cfg)
			if err == nil {
				a.Close()
			}
			return err
		})
		if err == nil {
			t.Errorf("%s: Open(%+v) succeeded", c.name, c.cfg)
			continue
		}
		if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want an error wrapping %v", c.name, err, c.want)
		}
		t.Logf("%s: %v", c.name, err)
		if afxAttached(t, ns, ns.Veth[0]) {
			t.Fatalf("%s: the failed open left an XDP program on %s", c.name, ns.Veth[0])
		}
	}

	// One capture per interface: a second one fails and leaves the
	// first working.
	a := afxOpen(t, ns, Config{Iface: ns.Veth[0]})
	err := ns.Do(func() error {
		b, err := Open(Config{Iface: ns.Veth[0]})
		if err == nil {
			b.Close()
		}
		return err
	})
	if err == nil {
		t.Errorf("a second capture on %s opened", ns.Veth[0])
	} else {
		t.Logf("second capture: %v", err)
	}
	afxNewSender(t, ns, ns.Veth[1]).send(t, afxFrame(1))
	if got := afxRead(t, a.Sources()[0], 1, 500*time.Millisecond); len(got) != 1 {
		t.Errorf("the first capture got %d frames after a second one failed, want 1", len(got))
	}
}

func TestParseQueues(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"", nil, true},
		{"0", []int{0}, true},
		{"0,2, 4-6", []int{0, 2, 4, 5, 6}, true},
		{"3-3", []int{3}, true},
		{"-1", nil, false},
		{"4-2", nil, false},
		{"a", nil, false},
		{"1,,2", nil, false},
	} {
		got, err := ParseQueues(c.in)
		if (err == nil) != c.ok || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("ParseQueues(%q) = %v, %v; want %v (ok %v)", c.in, got, err, c.want, c.ok)
		}
	}
	var m BindMode
	if err := m.Set("zerocopy"); err != nil || m != BindZeroCopy {
		t.Errorf("Set(zerocopy): %v, %v", m, err)
	}
	if err := m.Set("fast"); err == nil {
		t.Errorf("Set(fast) succeeded")
	}
	if m, err := ParseBindMode(""); err != nil || m != BindAuto {
		t.Errorf(`ParseBindMode("") = %v, %v`, m, err)
	}
}

// BenchmarkAFXDPVeth measures the frames per second an AF_XDP source reads
// from a veth pair, sent by an AF_PACKET socket on the other end as fast as
// it goes (-benchtime sets the frames sent; frames lost are reported).
func BenchmarkAFXDPVeth(b *testing.B) {
	for _, mode := range []xdp.AttachMode{xdp.AttachNative, xdp.AttachGeneric} {
		b.Run(string(mode), func(b *testing.B) {
			ns := netns.NetNS(b)
			a := afxOpen(b, ns, Config{Iface: ns.Veth[0], Attach: mode})
			src := a.Sources()[0]
			snd := afxNewSender(b, ns, ns.Veth[1])
			frame := afxFrame(1)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			wg.Go(func() {
				for range b.N {
					snd.send(b, frame)
				}
			})
			var p capture.Packet
			got := 0
			for got < b.N {
				err := src.Next(&p)
				if errors.Is(err, capture.ErrTimeout) {
					break // the sender is done and the rest is lost
				}
				if err != nil {
					b.Fatal(err)
				}
				got++
			}
			elapsed := time.Since(start)
			wg.Wait()
			b.StopTimer()
			drops, _ := src.(capture.DropCounter).KernelDrops()
			b.ReportMetric(float64(got)/elapsed.Seconds(), "frames/s")
			b.ReportMetric(float64(b.N-got), "lost")
			b.ReportMetric(float64(drops), "socket-drops")
		})
	}
}

// TestAFXDPCloseWhileReading closes captures under a busy reader, which
// reads every byte of each frame: a frame unmapped under it would crash.
func TestAFXDPCloseWhileReading(t *testing.T) {
	ns := netns.NetNS(t)
	snd := afxNewSender(t, ns, ns.Veth[1])
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		f := afxFrame(3)
		for {
			select {
			case <-stop:
				return
			default:
			}
			unix.Write(snd.fd, f)
		}
	})
	defer func() { close(stop); wg.Wait() }()
	for round := range 20 {
		a := afxOpen(t, ns, Config{Iface: ns.Veth[0], NumFrames: 256})
		src := a.Sources()[0]
		done := make(chan error, 1)
		var frames atomic.Int64
		go func() {
			var p capture.Packet
			var sum byte
			for {
				err := src.Next(&p)
				if errors.Is(err, capture.ErrClosed) {
					done <- nil
					return
				}
				if errors.Is(err, capture.ErrTimeout) {
					continue
				}
				if err != nil {
					done <- err
					return
				}
				for _, b := range p.Data {
					sum += b
				}
				frames.Add(1)
			}
		}()
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		if round == 19 {
			// The last round closes under a reader that is surely
			// reading: on two busy cores it may take a while to start.
			for deadline := time.Now().Add(time.Minute); frames.Load() == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		}
		if err := a.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: Next: %v", round, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("round %d: reader not done 1 minute after Close", round)
		}
		if round == 19 && frames.Load() == 0 {
			t.Errorf("no frame read in the last round")
		}
	}
}

// TestAFXDPCountsDrops overflows a socket nobody reads: every frame sent is
// either read or counted by KernelDrops.
func TestAFXDPCountsDrops(t *testing.T) {
	ns := netns.NetNS(t)
	const frames = 256 // the least NumFrames: the UMEM, fill and RX rings hold that many
	a := afxOpen(t, ns, Config{Iface: ns.Veth[0], NumFrames: frames, PollTimeout: 50 * time.Millisecond})
	src := a.Sources()[0]
	snd := afxNewSender(t, ns, ns.Veth[1])
	const sent = 1000
	for i := range sent {
		snd.send(t, afxFrame(i))
		if i%50 == 49 {
			time.Sleep(time.Millisecond)
		}
	}
	got := afxRead(t, src, sent, 200*time.Millisecond)
	drops, err := src.(capture.DropCounter).KernelDrops()
	if err != nil {
		t.Fatal(err)
	}
	st, _ := src.(*Source).Stats()
	t.Logf("read %d, dropped %d: %+v", len(got), drops, st)
	if len(got) != frames || uint64(len(got))+drops != sent {
		t.Errorf("read %d frames and the kernel dropped %d: want %d read and %d in all", len(got), drops, frames, sent)
	}
	for i := range got {
		if !bytes.Equal(got[i], afxFrame(i)) {
			t.Fatalf("frame %d is not the %dth sent", i, i)
		}
	}
	// Now the reader keeps up again: nothing more is lost.
	for i := range 100 {
		snd.send(t, afxFrame(i))
	}
	if got := afxRead(t, src, 101, 200*time.Millisecond); len(got) != 100 {
		t.Errorf("read %d frames after the overflow, want 100", len(got))
	}
	if d, _ := src.(capture.DropCounter).KernelDrops(); d != drops {
		t.Errorf("drops went from %d to %d with a reader keeping up", drops, d)
	}
}

// TestAFXDPInterfaceGone deletes the interface under a waiting reader: Next
// reports ENETDOWN, and Close still works.
func TestAFXDPInterfaceGone(t *testing.T) {
	ns := netns.NetNS(t)
	a := afxOpen(t, ns, Config{Iface: ns.Veth[0], PollTimeout: 50 * time.Millisecond})
	src := a.Sources()[0]
	errc := make(chan error, 1)
	tid := testutil.OnThread(func() {
		var p capture.Packet
		for {
			if err := src.Next(&p); !errors.Is(err, capture.ErrTimeout) {
				errc <- err
				return
			}
		}
	})
	// The interface goes while the reader waits in the kernel.
	testutil.WaitInPoll(t, tid, 5*time.Second)
	if err := ns.Netlink().LinkDel(ns.Link(t, ns.Veth[0])); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, unix.ENETDOWN) {
			t.Errorf("Next after the interface went: %v, want ENETDOWN", err)
		}
		t.Logf("Next: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("Next did not notice the interface going for a minute")
	}
	if err := a.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

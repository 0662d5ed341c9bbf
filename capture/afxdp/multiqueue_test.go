//go:build linux && !(mips || mips64 || ppc64 || s390x)

package afxdp

// AF_XDP on a veth with several receive queues: one socket each.

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/afpacket"
	"github.com/flowdedup/flowdedup/capture/xdp"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/netns"
)

// afxSetQueues gives the veth pair n queues from end 1 to end 0 (ethtool -L
// END0 rx n; ethtool -L END1 tx n), so that a frame sent on end 1 from CPU
// c arrives on end 0's receive queue c%n. It skips the test when the pair
// cannot have that many (veth allocates as many queues as possible CPUs).
func afxSetQueues(t *testing.T, ns *netns.Namespace, n int) {
	t.Helper()
	err := ns.Do(func() error {
		for i, rx := range []bool{true, false} {
			var ch ethtoolChannels
			if err := ethtoolChannelsIoctl(ns.Veth[i], unix.ETHTOOL_GCHANNELS, &ch); err != nil {
				return err
			}
			if rx && int(ch.MaxRx) < n || !rx && int(ch.MaxTx) < n {
				return fmt.Errorf("%s has at most %d rx and %d tx queues: %w", ns.Veth[i], ch.MaxRx, ch.MaxTx, unix.ERANGE)
			}
			if rx {
				ch.RxCount = uint32(n)
			} else {
				ch.TxCount = uint32(n)
			}
			if err := ethtoolChannelsIoctl(ns.Veth[i], unix.ETHTOOL_SCHANNELS, &ch); err != nil {
				return fmt.Errorf("%s: setting channels: %w", ns.Veth[i], err)
			}
		}
		return nil
	})
	if errors.Is(err, unix.ERANGE) {
		testutil.SkipOrFail(t, "no %d-queue veth here: %v", n, err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// afxSendFromCPU sends frames from a thread pinned to cpu.
func afxSendFromCPU(t *testing.T, snd *afxSender, cpu int, frames [][]byte) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		if err := testutil.LockToCPU(cpu); err != nil { // the thread dies with the goroutine, and its affinity with it
			errc <- err
			return
		}
		for _, f := range frames {
			if _, err := unix.Write(snd.fd, f); err != nil {
				errc <- err
				return
			}
			time.Sleep(20 * time.Microsecond)
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatalf("sending from CPU %d: %v", cpu, err)
	}
}

func TestAFXDPMultiQueue(t *testing.T) {
	const queues = 2
	if runtime.NumCPU() < queues {
		t.Skipf("needs %d CPUs to send on %d queues", queues, queues)
	}
	ns := netns.NetNS(t)
	afxSetQueues(t, ns, queues)
	frames := func(cpu int) [][]byte {
		var fs [][]byte
		for i := range 200 {
			fs = append(fs, afxFrame(cpu*1000+i))
		}
		return fs
	}

	t.Run("all", func(t *testing.T) {
		a := afxOpen(t, ns, Config{Iface: ns.Veth[0], Attach: xdp.AttachNative})
		srcs := a.Sources()
		if len(srcs) != queues {
			t.Fatalf("%d sources, want one per queue: %d", len(srcs), queues)
		}
		snd := afxNewSender(t, ns, ns.Veth[1])
		for q := range queues {
			if got := srcs[q].(*Source).Queue(); got != q {
				t.Errorf("source %d captures queue %d", q, got)
			}
			afxSendFromCPU(t, snd, q, frames(q))
		}
		for q := range queues {
			want := frames(q)
			sameFrames(t, q, afxRead(t, srcs[q], len(want)+1, 300*time.Millisecond), want)
		}
	})

	t.Run("one", func(t *testing.T) {
		a := afxOpen(t, ns, Config{Iface: ns.Veth[0], Attach: xdp.AttachNative, Queues: []int{1}})
		srcs := a.Sources()
		if len(srcs) != 1 || srcs[0].(*Source).Queue() != 1 {
			t.Fatalf("sources for queues [1]: %d", len(srcs))
		}
		// Queue 0's frames go to the stack: an AF_PACKET socket sees them.
		stack := stackSocket(t, ns, 256)
		snd := afxNewSender(t, ns, ns.Veth[1])
		afxSendFromCPU(t, snd, 0, frames(0))
		afxSendFromCPU(t, snd, 1, frames(1))
		// The stack's first: its blocks are handed over every 10 ms
		// (afpacket.DefaultBlockTimeout) even part full and wait unread;
		// the XSK ring holds its frames until read. (Read second, after
		// the other source's 300 ms idle wait, with the default 32 blocks,
		// it lost up to 145 of 200 in 7 of 20 runs of make stress, counted
		// as the socket's kernel drops.)
		if got := afxRead(t, stack, 201, 300*time.Millisecond); len(got) != 200 || !bytes.Equal(got[0], frames(0)[0]) {
			d, _ := stack.(capture.DropCounter).KernelDrops()
			t.Errorf("the stack got %d frames, want queue 0's 200 (the socket's kernel drops: %d)", len(got), d)
		}
		if got := afxRead(t, srcs[0], 201, 300*time.Millisecond); len(got) != 200 || !bytes.Equal(got[0], frames(1)[0]) {
			t.Errorf("queue 1's source got %d frames, want its 200", len(got))
		}
	})
}

// sameFrames reports on t where got, queue q's frames, are not want.
func sameFrames(t *testing.T, q int, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("queue %d: %d frames, want %d", q, len(got), len(want))
		return
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("queue %d frame %d:\n got %x\nwant %x", q, i, got[i], want[i])
			return
		}
	}
}

// stackSocket opens an AF_PACKET socket on ns's first veth end, which sees
// the frames of the queues no XSK captures, closed when t ends. Its blocks
// are one page each, and more than the frames a test sends (blocks): the
// kernel hands over a block every 10 ms even part full, so while a loaded
// machine spreads the sending over seconds each frame may take a block of
// its own (32 blocks of 1 MiB, the default, dropped up to 77 of 200
// frames in 2 of 20 runs of make stress at load 9).
func stackSocket(t *testing.T, ns *netns.Namespace, blocks int) capture.Source {
	t.Helper()
	var afp []capture.Source
	err := ns.Do(func() (err error) {
		afp, err = afpacket.Open(afpacket.Config{Iface: ns.Veth[0], PollTimeout: 50 * time.Millisecond, BlockSize: 4096, NumBlocks: blocks})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { afp[0].Close() })
	return afp[0]
}

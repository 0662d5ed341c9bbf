//go:build linux && !(mips || mips64 || ppc64 || s390x)

package afxdp

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/xdp"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/netns"
)

// The prefilter on two receive queues, with windows: each queue keeps its
// own keys, counts what it keeps in its own window slots, and a queue
// without a socket gets nothing learnt, so all its frames reach the stack.
func TestAFXDPPrefilterMultiQueue(t *testing.T) {
	const queues, keys = 2, 200
	if runtime.NumCPU() < queues {
		t.Skipf("needs %d CPUs to send on %d queues", queues, queues)
	}
	ns := netns.NetNS(t)
	afxSetQueues(t, ns, queues)
	frames := func(cpu int) [][]byte {
		var fs [][]byte
		for i := range keys {
			fs = append(fs, afxFrame(cpu*1000+i))
		}
		return fs
	}
	pf := func() *Prefilter { return &Prefilter{Kind: flow.KeySrc, Seed: 7, Window: time.Hour} }

	t.Run("all", func(t *testing.T) {
		a := afxOpen(t, ns, Config{Iface: ns.Veth[0], Attach: xdp.AttachNative, PollTimeout: 20 * time.Millisecond, Prefilter: pf()})
		srcs := a.Sources()
		if len(srcs) != queues {
			t.Fatalf("%d sources, want one per queue: %d", len(srcs), queues)
		}
		snd := afxNewSender(t, ns, ns.Veth[1])
		// Each queue's keys twice, unread: the program learns them (the
		// UMEM has room for them all), and keeps the second frames.
		w := time.Now().UnixNano() / int64(time.Hour)
		for q := range queues {
			afxSendFromCPU(t, snd, q, frames(q))
			afxSendFromCPU(t, snd, q, frames(q))
		}
		oneWindow := time.Now().UnixNano()/int64(time.Hour) == w // else the window check below is skipped
		for q := range queues {
			testutil.WaitFor(t, fmt.Sprintf("queue %d: %d frames kept", q, keys), time.Minute, func() bool { return afxHits(t, srcs[q]).Prefiltered >= keys })
			want := frames(q)
			// Its keys' first frames crossed, in order.
			sameFrames(t, q, afxRead(t, srcs[q], len(want)+1, 300*time.Millisecond), want)
			var c capture.KernelCounts
			if err := srcs[q].(capture.WindowCounter).WindowCounts(w, &c); oneWindow && (err != nil || c.Prefiltered != keys) {
				t.Errorf("queue %d: window %d counts %+v, %v; want %d kept", q, w, c, err, keys)
			}
			if c := afxHits(t, srcs[q]); c.Prefiltered != keys {
				t.Errorf("queue %d: %d kept in all, want %d", q, c.Prefiltered, keys)
			}
		}
	})

	t.Run("one", func(t *testing.T) {
		a := afxOpen(t, ns, Config{Iface: ns.Veth[0], Attach: xdp.AttachNative, Queues: []int{1}, PollTimeout: 20 * time.Millisecond, Prefilter: pf()})
		srcs := a.Sources()
		if len(srcs) != 1 || srcs[0].(prefilteredSource).Queue() != 1 {
			t.Fatalf("sources for queues [1]: %d", len(srcs))
		}
		stack := stackSocket(t, ns, 512)
		snd := afxNewSender(t, ns, ns.Veth[1])
		for range 2 {
			afxSendFromCPU(t, snd, 0, frames(0))
			afxSendFromCPU(t, snd, 1, frames(1))
		}
		// Queue 0 has no socket: nothing learnt there, every frame
		// reaches the stack, twice each.
		if got := afxRead(t, stack, 2*keys+1, 300*time.Millisecond); len(got) != 2*keys {
			d, _ := stack.(capture.DropCounter).KernelDrops()
			t.Errorf("the stack got %d frames, want queue 0's %d (the socket's kernel drops: %d)", len(got), 2*keys, d)
		}
		if got := afxRead(t, srcs[0], 2*keys+1, 300*time.Millisecond); len(got) != keys || !bytes.Equal(got[0], frames(1)[0]) {
			t.Errorf("queue 1's source got %d frames, want its %d keys' first", len(got), keys)
		}
	})
}

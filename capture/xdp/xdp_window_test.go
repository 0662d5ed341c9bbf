//go:build linux && !(mips || mips64 || ppc64 || s390x)

package xdp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/capturetest"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/memsink"
	"github.com/flowdedup/flowdedup/internal/testutil/netns"
	"github.com/flowdedup/flowdedup/pipeline"
)

// The kernel's counts by window (capture.WindowCounter) on the veth pair.
// The sender is pinned to one CPU: veth runs the receiving XDP program in
// the sender's CPU's softirq, so every frame is handled by that CPU, in the
// order sent.

// Frames without a key, one per error class of the program.
func truncFrame() []byte { return udp4Frame(srcAddr(0), srcAddr(1), 1, 2)[:14+10] }

func arpFrame() []byte {
	f := make([]byte, 14+28)
	f[12], f[13] = 0x08, 0x06
	return f
}

func badHeaderFrame() []byte {
	f := udp4Frame(srcAddr(0), srcAddr(1), 1, 2)
	f[14] = 0x44 // IHL 4
	return f
}

func tooManyTagsFrame() []byte {
	f := udp4Frame(srcAddr(0), srcAddr(1), 1, 2)[:12]
	for range flow.MaxLinkHeaders + 1 {
		f = append(f, 0x81, 0x00, 0x00, 0x01) // 802.1Q, then a tag of VLAN 1
	}
	return append(f, 0x81, 0x00)
}

var dstAddr = netip.MustParseAddr("192.0.2.1")

func keyFrame(j int) []byte { return udp4Frame(srcAddr(j), dstAddr, 1000, 53) }

func srcKey(j int) flow.Key { return flow.MakeKey(flow.KeySrc, srcAddr(j), netip.Addr{}, 0, 0, 0) }

// perWindow bounds the keys a test sends in one window: 4 windows and
// more of them stay far below what a CPU's ring holds
// (bpf.DefaultRingBytes over bpf.EventSize and the ring's 8-byte record
// header, about 75,000 events) when it is
// read only at the end.
const perWindow = 5000

// spread paces a sender that spreads its frames over the windows: before
// its j-th key it waits until the program has finished with the sent
// frames before it (the sender goes at the kernel's pace, not a sleep's),
// and, every perWindow keys, for the clock to enter the next window.
func spread(t *testing.T, x *Capture, window time.Duration, j int, sent uint64) {
	t.Helper()
	waitProcessed(t, x, sent)
	if j > 0 && j%perWindow == 0 {
		w := time.Now().UnixNano() / int64(window)
		testutil.WaitFor(t, fmt.Sprintf("window %d", w+1), time.Minute, func() bool { return time.Now().UnixNano()/int64(window) > w })
	}
}

// readByCPU reads every source until it is idle for one poll interval (call
// it after waitProcessed, when every event is in the rings) and returns
// the packets by CPU.
func readByCPU(t *testing.T, x *Capture) [][]capture.Packet {
	t.Helper()
	out := make([][]capture.Packet, len(x.Sources()))
	for cpu, s := range x.Sources() {
		for {
			var p capture.Packet
			err := s.Next(&p)
			if errors.Is(err, capture.ErrTimeout) {
				break
			}
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			out[cpu] = append(out[cpu], p)
		}
	}
	return out
}

// onlyOn checks that every event came from cpu's ring.
func onlyOn(t *testing.T, evs [][]capture.Packet, cpu int) {
	t.Helper()
	for c, ps := range evs {
		if c != cpu && len(ps) > 0 {
			t.Fatalf("%d events on CPU %d, the sender is pinned to CPU %d", len(ps), c, cpu)
		}
	}
}

func windowCounts(t *testing.T, wc capture.WindowCounter, i int64) capture.KernelCounts {
	t.Helper()
	var c capture.KernelCounts
	if err := wc.WindowCounts(i, &c); err != nil {
		t.Fatalf("WindowCounts(%d): %v", i, err)
	}
	return c
}

func sameCounts(a, b capture.KernelCounts) bool {
	return a.Packets == b.Packets && a.Keyed == b.Keyed && a.Prefiltered == b.Prefiltered && a.RingFull == b.RingFull && maps.Equal(a.Errors, b.Errors)
}

// errCounts is an Errors map of the program's classes: the four it counts
// without decapsulation, and the five tunnel reasons, zero without it.
func errCounts(truncated, notIP, badHeader, tooMany uint64) map[string]uint64 {
	return map[string]uint64{"truncated": truncated, "not_ip": notIP, "bad_header": badHeader, "too_many_headers": tooMany,
		"tunnel_truncated": 0, "tunnel_unknown": 0, "tunnel_not_data": 0, "tunnel_too_deep": 0, "tunnel_bad_header": 0}
}

// TestXDPWindowCountsAcrossBoundaries: frames sent across several window
// boundaries of the kernel's clock are counted, each in the window whose
// time its CPU stamped it with. The events say which window each keyed
// frame went to (the prefilter is off: every keyed frame is an event); an
// error frame, always sent between two keyed frames, went to theirs when
// both are in the same window (the CPU handles frames in order, and its
// window never goes back), and otherwise to one of the two.
func TestXDPWindowCountsAcrossBoundaries(t *testing.T) {
	const window = 100 * time.Millisecond
	ns := netns.NetNS(t)
	x := openXDP(t, ns, Config{Key: flow.KeySrc, Seed: 3, Window: window, PrefilterBytes: -1, PollTimeout: 20 * time.Millisecond})
	in := newInjector(t, ns, ns.Veth[1])
	cpu := testutil.PinThread(t)

	const trunc, notIP = -1, -2 // error frames in seq; keyed frames are their index j >= 0
	var seq []int
	keyed := 0
	// Send until the wall clock has been in four windows (bounded), each
	// frame once the program has finished with those before (see spread).
	first, deadline := time.Now().UnixNano()/int64(window), time.Now().Add(20*time.Second)
	for time.Now().UnixNano()/int64(window) < first+4 && time.Now().Before(deadline) {
		spread(t, x, window, keyed, uint64(len(seq)))
		in.send(t, keyFrame(keyed))
		seq = append(seq, keyed)
		switch keyed % 6 {
		case 1:
			in.send(t, truncFrame())
			seq = append(seq, trunc)
		case 4:
			in.send(t, arpFrame())
			seq = append(seq, notIP)
		}
		keyed++
	}
	if seq[len(seq)-1] < 0 { // an error frame is always followed by a keyed one
		in.send(t, keyFrame(keyed))
		seq = append(seq, keyed)
		keyed++
	}
	waitProcessed(t, x, uint64(len(seq)))
	evs := readByCPU(t, x)
	onlyOn(t, evs, cpu)

	win := map[flow.Key]int64{}
	last := int64(math.MinInt64)
	for _, p := range evs[cpu] {
		w := p.TimeNs / int64(window)
		if w < last {
			t.Errorf("an event of window %d after one of window %d", w, last)
		}
		last = w
		win[p.Key] = w
	}
	if len(win) != keyed {
		t.Fatalf("%d keys delivered, %d sent", len(win), keyed)
	}
	type bounds struct {
		keyed                         uint64
		trunc, notIP, truncMax, ipMax uint64
	}
	want := map[int64]*bounds{}
	at := func(w int64) *bounds {
		if want[w] == nil {
			want[w] = &bounds{}
		}
		return want[w]
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for n, j := range seq {
		if j >= 0 {
			w := win[srcKey(j)]
			at(w).keyed++
			lo, hi = min(lo, w), max(hi, w)
			continue
		}
		before, after := win[srcKey(seq[n-1])], win[srcKey(seq[n+1])]
		for w := before; w <= after; w++ {
			b := at(w)
			if j == trunc {
				b.truncMax++
				if before == after {
					b.trunc++
				}
			} else {
				b.ipMax++
				if before == after {
					b.notIP++
				}
			}
		}
	}
	if hi-lo < 2 {
		t.Fatalf("frames in windows %d..%d only: no boundaries crossed to test", lo, hi)
	}

	src := x.Sources()[cpu].(capture.WindowCounter)
	var sum capture.KernelCounts
	sum.Errors = map[string]uint64{}
	for w := lo - 1; w <= hi+1; w++ {
		b := at(w)
		c := windowCounts(t, x, w)
		tr, ip := c.Errors["truncated"], c.Errors["not_ip"]
		if c.Keyed != b.keyed || c.Prefiltered != 0 || c.RingFull != 0 || c.Packets != c.Keyed+tr+ip ||
			tr < b.trunc || tr > b.truncMax || ip < b.notIP || ip > b.ipMax {
			t.Errorf("window %d: %+v; want %d keyed, truncated in [%d, %d], not IP in [%d, %d]", w, c, b.keyed, b.trunc, b.truncMax, b.notIP, b.ipMax)
		}
		if s := windowCounts(t, src, w); !sameCounts(s, c) {
			t.Errorf("window %d: CPU %d's source counts %+v, the fast path %+v", w, cpu, s, c)
		}
		sum.Packets += c.Packets
		sum.Keyed += c.Keyed
		sum.Errors["truncated"] += tr
		sum.Errors["not_ip"] += ip
	}
	tot := total(t, x)
	if sum.Packets != uint64(len(seq)) || tot.Packets != sum.Packets || tot.Keyed != sum.Keyed ||
		sum.Errors["truncated"] != tot.Errors["truncated"] || sum.Errors["not_ip"] != tot.Errors["not_ip"] {
		t.Errorf("windows add up to %+v; totals %+v; %d frames sent", sum, tot, len(seq))
	}
	t.Logf("%d frames over windows %d..%d", len(seq), lo, hi)
}

// TestXDPWindowCountsEnded: WindowCounts of the window the kernel's clock is
// in ends it, so the next frames, sent while the clock still reads that
// window, go to the next one: their keys come again (the prefilter
// forgets at the boundary), stamped with its start, and each window's
// counts are exactly its batch, class by class.
func TestXDPWindowCountsEnded(t *testing.T) {
	const window = time.Hour
	// The program's clock runs from half past an hour, whatever the wall
	// clock says: the test's batches are all meant to be in the clock's
	// own window, far from its end.
	start := time.Now()
	mid := time.Date(2026, 1, 1, 12, 30, 0, 0, time.UTC)
	now := func() time.Time { return mid.Add(time.Since(start)) }
	ns := netns.NetNS(t)
	x := openXDP(t, ns, Config{Key: flow.KeySrc, Seed: 4, Window: window, PollTimeout: 20 * time.Millisecond, Now: now})
	in := newInjector(t, ns, ns.Veth[1])
	cpu := testutil.PinThread(t)
	src := x.Sources()[cpu].(capture.WindowCounter)
	if x.WindowSlots() != bpf.WindowSlots || src.WindowSlots() != bpf.WindowSlots {
		t.Errorf("WindowSlots %d, %d; want %d", x.WindowSlots(), src.WindowSlots(), bpf.WindowSlots)
	}

	const keys = 20
	batch := func() {
		for j := range keys {
			in.send(t, keyFrame(j), keyFrame(j))
		}
		in.send(t, truncFrame(), arpFrame(), badHeaderFrame(), tooManyTagsFrame())
	}
	wantBatch := capture.KernelCounts{Packets: 2*keys + 4, Keyed: 2 * keys, Prefiltered: keys, Errors: errCounts(1, 1, 1, 1)}
	w0 := now().UnixNano() / int64(window)
	var sent uint64
	for n, w := range []int64{w0, w0 + 1} {
		batch()
		sent += uint64(wantBatch.Packets)
		waitProcessed(t, x, sent)
		evs := readByCPU(t, x)
		onlyOn(t, evs, cpu)
		got := map[flow.Key]bool{}
		for _, p := range evs[cpu] {
			got[p.Key] = true
			if p.TimeNs/int64(window) != w || (n > 0 && p.TimeNs != w*int64(window)) {
				t.Errorf("batch %d: key %v at %v, want in window %d (at its start after the first)", n, p.Key, time.Unix(0, p.TimeNs).UTC(), w)
			}
		}
		if len(got) != keys || len(evs[cpu]) != keys {
			t.Errorf("batch %d: %d events of %d keys, want each of the %d keys once", n, len(evs[cpu]), len(got), keys)
		}
		c := windowCounts(t, x, w)
		if !sameCounts(c, wantBatch) {
			t.Errorf("window %d (batch %d): %+v, want %+v", w, n, c, wantBatch)
		}
		if s := windowCounts(t, src, w); !sameCounts(s, c) {
			t.Errorf("window %d: CPU %d's source counts %+v, the fast path %+v", w, cpu, s, c)
		}
	}
	if c := windowCounts(t, x, w0); !sameCounts(c, wantBatch) {
		t.Errorf("window %d after the next: %+v, want %+v", w0, c, wantBatch)
	}
	tot := total(t, x)
	if tot.Packets != sent || tot.Prefiltered != 2*keys || tot.Errors["too_many_headers"] != 2 {
		t.Errorf("totals %+v, want the two batches", tot)
	}
}

// TestXDPWindowGone: the counts of a window are gone once its CPU's clock
// has moved bpf.WindowSlots windows past it; the newer window's counts are
// its own, and the totals keep every frame.
func TestXDPWindowGone(t *testing.T) {
	const window = time.Millisecond
	ns := netns.NetNS(t)
	x := openXDP(t, ns, Config{Key: flow.KeySrc, Seed: 5, Window: window, PrefilterBytes: -1, PollTimeout: 20 * time.Millisecond})
	in := newInjector(t, ns, ns.Veth[1])
	cpu := testutil.PinThread(t)

	in.send(t, keyFrame(0))
	waitProcessed(t, x, 1)
	evs := readByCPU(t, x)
	onlyOn(t, evs, cpu)
	if len(evs[cpu]) != 1 {
		t.Fatalf("%d events, want 1", len(evs[cpu]))
	}
	w0 := evs[cpu][0].TimeNs / int64(window)
	testutil.WaitFor(t, fmt.Sprintf("the clock to pass window %d", w0+bpf.WindowSlots), 5*time.Second, func() bool {
		return time.Now().UnixNano()/int64(window) > w0+bpf.WindowSlots
	})
	in.send(t, keyFrame(1))
	waitProcessed(t, x, 2)
	evs = readByCPU(t, x)
	onlyOn(t, evs, cpu)
	if len(evs[cpu]) != 1 {
		t.Fatalf("%d events, want 1", len(evs[cpu]))
	}
	w1 := evs[cpu][0].TimeNs / int64(window)

	var c capture.KernelCounts
	if err := x.WindowCounts(w0, &c); !errors.Is(err, capture.ErrWindowGone) {
		t.Errorf("window w0, %d windows later: %v, want ErrWindowGone", w1-w0, err)
	}
	if err := x.Sources()[cpu].(capture.WindowCounter).WindowCounts(w0, &c); !errors.Is(err, capture.ErrWindowGone) {
		t.Errorf("CPU %d's source, window w0: %v, want ErrWindowGone", cpu, err)
	}
	want := capture.KernelCounts{Packets: 1, Keyed: 1, Errors: errCounts(0, 0, 0, 0)}
	if c := windowCounts(t, x, w1); !sameCounts(c, want) {
		t.Errorf("window w1: %+v, want %+v", c, want)
	}
	if tot := total(t, x); tot.Packets != 2 || tot.Keyed != 2 {
		t.Errorf("totals %+v, want both frames", tot)
	}
}

// TestXDPPipelineWindows: the fast path under a live pipeline with short
// windows. Every summary adds up exactly (packets = malformed + skipped +
// keys + drops + late) and equals the kernel's counts of its window, its
// distinct keys are its records, and the summaries add up to the frames
// sent: no window gets a frame of the next, as polled counts would give it.
func TestXDPPipelineWindows(t *testing.T) {
	const window = 300 * time.Millisecond
	ns := netns.NetNS(t)
	x := openXDP(t, ns, Config{Key: flow.KeySrc, Seed: 6, Window: window, PollTimeout: 20 * time.Millisecond})
	in := newInjector(t, ns, ns.Veth[1])
	sink := new(memsink.Sink)
	pl, err := pipeline.New(pipeline.Config{
		Workers: 2, Filter: "exact", Key: flow.KeySrc, Seed: 1, Window: window, Lateness: window / 3,
		Live: true, WallClockWindows: true,
	}, sink)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pl.Run(ctx, x.Sources()...) }()
	defer cancel()
	cpu := testutil.PinThread(t)

	// Each key twice in a row (a prefilter hit, or the first sight in the
	// next window when a boundary falls between), an error frame after
	// every fourth key; over four windows and more.
	var sent uint64
	errFrames := [][]byte{truncFrame(), arpFrame(), badHeaderFrame(), tooManyTagsFrame()}
	// Send until the wall clock has been in four windows (bounded).
	first, deadline := time.Now().UnixNano()/int64(window), time.Now().Add(20*time.Second)
	for j := 0; time.Now().UnixNano()/int64(window) < first+4 && time.Now().Before(deadline); j++ {
		spread(t, x, window, j, sent)
		in.send(t, keyFrame(j), keyFrame(j))
		sent += 2
		if j%4 == 3 {
			in.send(t, errFrames[j/4%len(errFrames)])
			sent++
		}
	}
	waitProcessed(t, x, sent)
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("pipeline: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("pipeline still running 10 s after cancel")
	}

	wins := sink.Windows()
	perWindow := map[int64]uint64{}
	for _, r := range sink.Records() {
		perWindow[r.WindowNs]++
	}
	var packets uint64
	withFrames := 0
	for _, s := range wins {
		packets += s.Packets
		if s.Packets > 0 {
			withFrames++
		}
		drops := s.DroppedBy["ring_full"] + s.DroppedBy["xdp_ring_full"]
		if s.Packets != s.Malformed+s.Skipped+s.Keys+drops+s.Late || s.Late != 0 || drops != 0 {
			t.Errorf("window %v: packets %d != malformed %d + skipped %d + keys %d + drops %d + late %d",
				time.Unix(0, s.StartNs).UTC(), s.Packets, s.Malformed, s.Skipped, s.Keys, drops, s.Late)
		}
		if s.Distinct != perWindow[s.StartNs] || s.Keys != s.Distinct+s.Prefiltered {
			t.Errorf("window %v: distinct %d, keys %d, prefiltered %d; %d records", time.Unix(0, s.StartNs).UTC(), s.Distinct, s.Keys, s.Prefiltered, perWindow[s.StartNs])
		}
		k := windowCounts(t, x, s.StartNs/int64(window))
		var kerr uint64
		for _, n := range k.Errors {
			kerr += n
		}
		if s.Packets != k.Packets || s.Prefiltered != k.Prefiltered || s.Malformed+s.Skipped != kerr || s.Skipped != k.Errors["not_ip"] {
			t.Errorf("window %v: summary %+v; kernel %+v", time.Unix(0, s.StartNs).UTC(), s, k)
		}
	}
	if tot := total(t, x); packets != sent || tot.Packets != sent {
		t.Errorf("summaries count %d packets, the kernel %d; %d sent", packets, tot.Packets, sent)
	}
	if withFrames < 3 {
		t.Errorf("frames in %d windows, want 3 or more: too few boundaries crossed to test", withFrames)
	}
	t.Logf("%d frames in %d summaries (%d with frames), pinned to CPU %d", sent, len(wins), withFrames, cpu)
}

// TestSource checks a CPU's source against the contract of
// capture.Source (capturetest): the keys of the frames sent, in order, and
// Close, which wakes a Next waiting in the kernel for its ring. The sender
// is pinned, so that its frames are keyed on its CPU, whose source is read.
func TestSource(t *testing.T) {
	var in *injector
	frames := make([][]byte, 10)
	for j := range frames {
		frames[j] = keyFrame(j)
	}
	capturetest.Run(t, capturetest.Backend{
		Open: func(t *testing.T) capture.Source {
			ns := netns.NetNS(t)
			// An hour's poll timeout: an idle Next blocks until a key
			// comes or Close.
			x := openXDP(t, ns, Config{Key: flow.KeySrc, Seed: 7, PrefilterBytes: -1, PollTimeout: time.Hour})
			in = newInjector(t, ns, ns.Veth[1])
			return x.Sources()[testutil.PinThread(t)]
		},
		Send: func(t *testing.T, frames [][]byte) { in.send(t, frames...) },
		Match: func(p *capture.Packet, frame []byte) bool {
			// The key of the frame's IPv4 source address (bytes 26-29).
			return p.Key == flow.MakeKey(flow.KeySrc, netip.AddrFrom4([4]byte(frame[26:30])), netip.Addr{}, 0, 0, 0) && len(p.Data) == 0
		},
		Frames: frames,
		Live:   true,
	})
}

//go:build linux && !(mips || mips64 || ppc64 || s390x)

package bpf_test

import (
	"os"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// The program's counts by window, checked with BPF_PROG_TEST_RUN on one
// CPU whose clock the test moves: what the totals moved by while the clock
// was in a window is, exactly, that window's counts.

// winClock moves the program's clock of a harness.
type winClock struct {
	h       *harness
	trueOff int64
	w       int64 // window length, ns
}

func newWinClock(t *testing.T, h *harness, window time.Duration) *winClock {
	t.Helper()
	off, err := bpf.ClockOffset()
	if err != nil {
		t.Fatal(err)
	}
	return &winClock{h: h, trueOff: off, w: int64(window)}
}

// at moves the program's clock so that it reads ts now (to within the
// time the call takes).
func (c *winClock) at(t *testing.T, ts int64) {
	t.Helper()
	if err := c.h.o.SetClockOffset(c.trueOff + ts - time.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
}

// mid moves the clock to the middle of window i: a second either side of
// it is in the window too, so the time the calls take does not matter.
func (c *winClock) mid(t *testing.T, i int64) { c.at(t, i*c.w+c.w/2) }

// future returns a window well after the current one.
func (c *winClock) future() int64 { return time.Now().UnixNano()/c.w + 1000 }

// windowCounts returns the counts of window i on cpu, and checks every
// other CPU counted nothing in it.
func (h *harness) windowCounts(i int64, cpu int) bpf.WindowCounters {
	h.tb.Helper()
	ws, err := h.o.WindowCounters(i, nil)
	if err != nil {
		h.tb.Fatal(err)
	}
	if len(ws) != len(h.o.Rings) {
		h.tb.Fatalf("WindowCounters(%d): %d CPUs, want %d", i, len(ws), len(h.o.Rings))
	}
	for c, w := range ws {
		if c != cpu && w != (bpf.WindowCounters{}) {
			h.tb.Errorf("window %d: CPU %d, which ran nothing, has %+v", i, c, w)
		}
	}
	return ws[cpu]
}

// Frames of each error class, and the counters one run of each moves.
var (
	truncated = cat(eth(etIPv4), ip4(pTCP, a4, b4, 20)[:10])
	notIP     = cat(eth(etARP), make([]byte, 28))
	badHeader = cat(eth(etIPv4), ip4(pTCP, a4, b4, 20, func(h []byte) { h[0] = 0x44 }), tcp(1, 2)) // IHL 4
	tooMany   = func() []byte {
		f := eth(etVLAN)
		for range 17 {
			f = cat(f, vlan(1, etVLAN))
		}
		return f
	}()
	errFrames = [][]byte{truncated, notIP, badHeader, tooMany}
)

func addCounters(a, b bpf.Counters) bpf.Counters {
	a.Packets += b.Packets
	a.Keyed += b.Keyed
	a.PrefilterHits += b.PrefilterHits
	a.Emitted += b.Emitted
	a.RingFull += b.RingFull
	for i := range a.Errors {
		a.Errors[i] += b.Errors[i]
	}
	return a
}

// TestWindowCounts: each window's counts are exactly what the CPU did
// while its clock was in the window, class by class (keys emitted, prefilter
// hits, ring-full drops, each error), a window without frames has none,
// and the windows add up to the totals.
func TestWindowCounts(t *testing.T) {
	const window = time.Minute
	page := os.Getpagesize()
	h := newHarness(t, bpf.Config{Kind: flow.Key5Tuple, Window: window, RingBytes: page})
	cpu := testutil.PinThread(t)
	clk := newWinClock(t, h, window)
	w0 := clk.future()
	perRing := (page - 1) / (8 + bpf.EventSize) // events a ring holds (see TestRingFull)

	// Window w0+k gets k+1 rounds of: 10 new keys, each twice (a hit),
	// one frame of each error class; window w0+2 nothing; window w0+3
	// more new keys than the ring holds, unread.
	windows := []int64{w0, w0 + 1, w0 + 3}
	want := map[int64]bpf.Counters{}
	port := uint16(0)
	for n, wi := range windows[:2] {
		clk.mid(t, wi)
		for range n + 1 {
			for range 10 {
				port++
				h.mustRun(tcp4(a4, b4, port, 80))
				h.mustRun(tcp4(a4, b4, port, 80))
			}
			for _, f := range errFrames {
				h.mustRun(f)
			}
		}
		evs := h.drain(nil)
		want[wi] = h.delta()
		if len(evs) != 10*(n+1) {
			t.Errorf("window %d: %d events, want %d", wi, len(evs), 10*(n+1))
		}
		for _, e := range evs {
			if e.timeNs/clk.w != wi {
				t.Errorf("window %d: event at %v", wi, time.Unix(0, e.timeNs).UTC())
			}
		}
	}
	clk.mid(t, w0+3)
	for range perRing + 5 {
		port++
		h.mustRun(tcp4(a4, b4, port, 80))
	}
	want[w0+3] = h.delta()
	if d := want[w0+3]; d.RingFull != 5 || d.Emitted != uint64(perRing) {
		t.Fatalf("window %d: counters moved by %+v, want %d emitted and 5 lost to a full ring", w0+3, d, perRing)
	}
	h.drain(nil)
	// What each round moves, so that the deltas are not their own reference.
	round := bpf.Counters{Packets: 24, Keyed: 20, PrefilterHits: 10, Emitted: 10, Errors: [bpf.NumErrs]uint64{1, 1, 1, 1}}
	if want[w0] != round || want[w0+1] != addCounters(round, round) {
		t.Fatalf("windows %d, %d: counters moved by %+v, %+v; want %+v per round", w0, w0+1, want[w0], want[w0+1], round)
	}

	var sum bpf.Counters
	for wi := w0 - 1; wi <= w0+4; wi++ {
		got := h.windowCounts(wi, cpu)
		if got.Gone || got.Counters != want[wi] {
			t.Errorf("window %d: %+v, want %+v", wi, got, want[wi])
		}
		sum = addCounters(sum, got.Counters)
	}
	cs, err := h.o.Counters(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cs[cpu] != sum {
		t.Errorf("totals %+v, windows add up to %+v", cs[cpu], sum)
	}
	ws, err := h.o.CPUWindows(nil)
	if err != nil {
		t.Fatal(err)
	}
	if ws[cpu] != w0+3 {
		t.Errorf("CPU %d's window %d, want %d", cpu, ws[cpu], w0+3)
	}
	checkInvariants(t, h.o)
}

// TestWindowClockBack: a clock set back does not take the CPU back to an
// older window: its frames are counted, keyed and stamped in the CPU's
// window, whose start their events carry, and the older window's counts do
// not move.
func TestWindowClockBack(t *testing.T) {
	const window = time.Minute
	h := newHarness(t, bpf.Config{Kind: flow.Key5Tuple, Window: window, RingBytes: 1 << 16})
	cpu := testutil.PinThread(t)
	clk := newWinClock(t, h, window)
	w0 := clk.future()

	clk.mid(t, w0)
	h.expect("window w0", tcp4(a4, b4, 1, 80), cpu, emitted, key5(t, tcp4(a4, b4, 1, 80)))
	clk.mid(t, w0+1)
	h.expect("window w0+1", tcp4(a4, b4, 2, 80), cpu, emitted, key5(t, tcp4(a4, b4, 2, 80)))
	clk.mid(t, w0) // back
	evs := h.expect("back in w0: a key of w0", tcp4(a4, b4, 1, 80), cpu, emitted, key5(t, tcp4(a4, b4, 1, 80)))
	if len(evs) == 1 && evs[0].timeNs != (w0+1)*clk.w {
		t.Errorf("event at %v, want the start of window w0+1, %v", time.Unix(0, evs[0].timeNs).UTC(), time.Unix(0, (w0+1)*clk.w).UTC())
	}
	h.expect("back in w0: a key of w0+1", tcp4(a4, b4, 2, 80), cpu, hit)
	h.expect("back in w0: an error", truncated, cpu, bpf.Counters{Packets: 1, Errors: [bpf.NumErrs]uint64{1}})

	if got := h.windowCounts(w0, cpu); got.Counters != emitted {
		t.Errorf("window w0: %+v, want %+v", got, emitted)
	}
	want := bpf.Counters{Packets: 4, Keyed: 3, Emitted: 2, PrefilterHits: 1, Errors: [bpf.NumErrs]uint64{1}}
	if got := h.windowCounts(w0+1, cpu); got.Counters != want {
		t.Errorf("window w0+1: %+v, want %+v", got, want)
	}
	checkInvariants(t, h.o)
}

// TestWindowSlotReuse: the counts of window i stay until the CPU's clock
// reaches window i+WindowSlots, whose frames take the slot over from zero;
// from then on window i is gone, and its frames are still in the totals.
func TestWindowSlotReuse(t *testing.T) {
	const window = time.Minute
	h := newHarness(t, bpf.Config{Kind: flow.KeySrc, Window: window, RingBytes: 1 << 16})
	cpu := testutil.PinThread(t)
	clk := newWinClock(t, h, window)
	w0 := clk.future()
	one := bpf.Counters{Packets: 1, Errors: [bpf.NumErrs]uint64{1: 1}} // an ARP frame

	run := func(wi int64, n int) {
		t.Helper()
		clk.mid(t, wi)
		for range n {
			h.mustRun(notIP)
		}
	}
	times := func(c bpf.Counters, n uint64) bpf.Counters {
		c.Packets *= n
		for i := range c.Errors {
			c.Errors[i] *= n
		}
		return c
	}
	run(w0, 3)
	run(w0+bpf.WindowSlots-1, 1)
	if got := h.windowCounts(w0, cpu); got.Gone || got.Counters != times(one, 3) {
		t.Errorf("window w0, WindowSlots-1 windows later: %+v, want %+v", got, times(one, 3))
	}
	run(w0+bpf.WindowSlots, 2) // the slot of w0
	if got := h.windowCounts(w0, cpu); !got.Gone || got.Counters != (bpf.Counters{}) {
		t.Errorf("window w0, WindowSlots windows later: %+v, want gone", got)
	}
	if got := h.windowCounts(w0+bpf.WindowSlots, cpu); got.Gone || got.Counters != times(one, 2) {
		t.Errorf("window w0+WindowSlots: %+v, want %+v (the slot taken over from zero)", got, times(one, 2))
	}
	// A frame of w0 now goes to the CPU's window, not to the slot.
	run(w0, 1)
	if got := h.windowCounts(w0+bpf.WindowSlots, cpu); got.Counters != times(one, 3) {
		t.Errorf("window w0+WindowSlots after a frame of w0: %+v, want %+v", got, times(one, 3))
	}
	if got := h.windowCounts(w0+1, cpu); got.Gone || got.Counters != (bpf.Counters{}) {
		t.Errorf("window w0+1, never used: %+v, want zero and not gone", got)
	}
	cs, err := h.o.Counters(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cs[cpu] != times(one, 7) {
		t.Errorf("totals %+v, want %+v: every frame, gone windows' too", cs[cpu], times(one, 7))
	}
}

// TestEndWindow: once EndWindow(i) returns, the CPU's clock is past window
// i even when the clock still reads a time in it: frames go to window i+1,
// stamped with its start, and window i's counts stay as they were. Ending
// a window that has not begun moves the clock no further than the end of
// the current one.
func TestEndWindow(t *testing.T) {
	const window = time.Minute
	h := newHarness(t, bpf.Config{Kind: flow.KeySrc, Window: window, RingBytes: 1 << 16})
	cpu := testutil.PinThread(t)
	clk := newWinClock(t, h, window)
	w0 := clk.future()
	f := udp4(a4, b4, 1, 2)
	k, err := flow.Parse(f, flow.LinkEthernet, flow.KeySrc)
	if err != nil {
		t.Fatal(err)
	}

	clk.mid(t, w0)
	h.expect("window w0", f, cpu, emitted, k)
	h.expect("window w0 again", f, cpu, hit)
	if err := h.o.EndWindow(w0); err != nil {
		t.Fatal(err)
	}
	evs := h.expect("after EndWindow(w0)", f, cpu, emitted, k)
	if len(evs) == 1 && evs[0].timeNs != (w0+1)*clk.w {
		t.Errorf("event at %v, want the start of window w0+1, %v", time.Unix(0, evs[0].timeNs).UTC(), time.Unix(0, (w0+1)*clk.w).UTC())
	}
	if got := h.windowCounts(w0, cpu); got.Counters != addCounters(emitted, hit) {
		t.Errorf("window w0: %+v, want %+v", got, addCounters(emitted, hit))
	}
	for _, i := range []int64{w0, w0 - 5, w0 + 100} {
		if err := h.o.EndWindow(i); err != nil {
			t.Fatalf("EndWindow(%d): %v", i, err)
		}
	}
	h.expect("after EndWindow(w0+100)", f, cpu, hit)
	if got := h.windowCounts(w0+1, cpu); got.Counters != addCounters(emitted, hit) {
		t.Errorf("window w0+1: %+v, want %+v", got, addCounters(emitted, hit))
	}
	ws, err := h.o.CPUWindows(nil)
	if err != nil {
		t.Fatal(err)
	}
	if ws[cpu] != w0+1 {
		t.Errorf("CPU window %d after ending a window that has not begun, want %d", ws[cpu], w0+1)
	}
	checkInvariants(t, h.o)
}

// TestWindowCountsOneWindow: without windows every frame is in window 0,
// whose counts are the totals, and EndWindow does nothing.
func TestWindowCountsOneWindow(t *testing.T) {
	h := newHarness(t, bpf.Config{Kind: flow.KeyPair, RingBytes: 1 << 16})
	cpu := testutil.PinThread(t)
	h.mustRun(udp6(a6, b6, 1, 2))
	h.mustRun(udp6(a6, b6, 1, 2))
	h.mustRun(notIP)
	if err := h.o.EndWindow(0); err != nil {
		t.Fatal(err)
	}
	h.mustRun(truncated)
	want := bpf.Counters{Packets: 4, Keyed: 2, Emitted: 1, PrefilterHits: 1, Errors: [bpf.NumErrs]uint64{1, 1}}
	if got := h.windowCounts(0, cpu); got.Gone || got.Counters != want {
		t.Errorf("window 0: %+v, want %+v", got, want)
	}
	if got := h.windowCounts(1, cpu); got != (bpf.WindowCounters{}) {
		t.Errorf("window 1: %+v, want nothing", got)
	}
	cs, err := h.o.Counters(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cs[cpu] != want {
		t.Errorf("totals %+v, want %+v", cs[cpu], want)
	}
}

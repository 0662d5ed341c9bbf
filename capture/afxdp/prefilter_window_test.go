//go:build linux && !(mips || mips64 || ppc64 || s390x)

package afxdp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/memsink"
	"github.com/flowdedup/flowdedup/internal/testutil/netns"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/record"
)

// afxSeq is the sequence number the window test puts in a frame's payload
// (withSeq).
func afxSeq(f []byte) int {
	if binary.BigEndian.Uint16(f[12:]) == 0x88b5 {
		return int(binary.BigEndian.Uint32(f[14:]))
	}
	return int(binary.BigEndian.Uint32(f[14+20+8:]))
}

// withSeq puts sequence number i in frame f (afxFrame's or afxNotIP's).
func withSeq(f []byte, i int) []byte {
	if binary.BigEndian.Uint16(f[12:]) == 0x88b5 {
		binary.BigEndian.PutUint32(f[14:], uint32(i))
	} else {
		binary.BigEndian.PutUint32(f[14+20+8:], uint32(i))
	}
	return f
}

// crossed is a frame the reader handed on: a copy and its time.
type crossed struct {
	data []byte
	t    int64
}

// recorder is a prefiltered source that keeps a copy of every frame it
// hands on, for the test to know which frames crossed and when the kernel
// stamped them. It passes the source's kernel counts through.
type recorder struct {
	capture.WindowCounter
	src capture.Source
	mu  sync.Mutex
	got []crossed
}

func (r *recorder) Next(p *capture.Packet) error {
	err := r.src.Next(p)
	if err == nil {
		r.mu.Lock()
		r.got = append(r.got, crossed{slices.Clone(p.Data), p.TimeNs})
		r.mu.Unlock()
	}
	return err
}

func (r *recorder) Close() error { return r.src.Close() }

func (r *recorder) KernelDrops() (uint64, error) { return r.src.(capture.DropCounter).KernelDrops() }

func (r *recorder) seen(seq int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.got) - 1; i >= 0 && i >= len(r.got)-200; i-- {
		if afxSeq(r.got[i].data) == seq {
			return true
		}
	}
	return false
}

// sliceSource replays frames with their times, then ends.
type sliceSource struct {
	pkts []capture.Packet
	i    int
}

func (s *sliceSource) Next(p *capture.Packet) error {
	if s.i == len(s.pkts) {
		return io.EOF
	}
	*p = s.pkts[s.i]
	s.i++
	return nil
}

func (s *sliceSource) Close() error { return nil }

// byWindow returns s's summaries with frames by window start, and the
// records' keys by window start.
func byWindow(s *memsink.Sink) (map[int64]record.WindowSummary, map[int64]map[flow.Key]bool) {
	sums := map[int64]record.WindowSummary{}
	for _, w := range s.Windows() {
		if w.Packets > 0 {
			sums[w.StartNs] = w
		}
	}
	keys := map[int64]map[flow.Key]bool{}
	for _, r := range s.Records() {
		if keys[r.WindowNs] == nil {
			keys[r.WindowNs] = map[flow.Key]bool{}
		}
		keys[r.WindowNs][r.Key] = true
	}
	return sums, keys
}

// The per-window prefilter under a live pipeline with short windows gives
// the records and per-window counts of a replay of the same frames at the
// kernel's times. The frames are few keys over and over, so that most are
// kept in the kernel and every key recurs in every window: the first frame
// of a key in each window must cross (a key learnt in window W does not
// keep its first frame of W+1 from crossing), and the frames kept in the
// kernel must be counted in their window.
//
// Which frames crossed, and the kernel's time of each, the recorder sees.
// A frame kept in the kernel has no time of its own, but the queue takes
// frames in the order they were sent and its clock never goes back across
// a window boundary, and the program keeps a frame only when its key was
// learnt in the frame's window, from a frame that crossed before it: so
// its window is that of the last frame that crossed before it, which must
// also be that of its key's last crossing (checked). The replay gets it at
// that frame's time.
func TestAFXDPPrefilterWindows(t *testing.T) {
	const (
		window = 250 * time.Millisecond
		flows  = 8 // keys that recur
	)
	ns := netns.NetNS(t)
	a := afxOpen(t, ns, Config{Iface: ns.Veth[0], PollTimeout: 20 * time.Millisecond, NumFrames: 16384,
		Prefilter: &Prefilter{Kind: flow.KeySrc, Seed: 7, Window: window}})
	src := a.Sources()[0]
	wc, ok := src.(capture.WindowCounter)
	if !ok {
		t.Fatalf("a prefiltered source (%T) is not a capture.WindowCounter", src)
	}
	rec := &recorder{WindowCounter: wc, src: src}
	snd := afxNewSender(t, ns, ns.Veth[1])
	sink := new(memsink.Sink)
	// A lateness of many windows: a frame that crossed waits in the RX
	// ring while the reader is descheduled, and must not be late when it
	// is read.
	cfg := pipeline.Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Seed: 1, Window: window, Lateness: 8 * window}
	live := cfg
	live.Live, live.WallClockWindows = true, true
	pl, err := pipeline.New(live, sink)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- pl.Run(ctx, rec) }()

	// Rounds of: a frame of a key never sent before (it crosses: the test
	// waits for it, which paces the rounds), then three frames of each of
	// the recurring keys, and a frame without a key every fourth round.
	// Until the wall clock has been in five windows (bounded).
	var sent [][]byte
	send := func(f []byte) {
		sent = append(sent, withSeq(f, len(sent)))
		snd.send(t, f)
	}
	first, deadline := time.Now().UnixNano()/int64(window), time.Now().Add(30*time.Second)
	for round := 0; time.Now().UnixNano()/int64(window) < first+5 && time.Now().Before(deadline) && round < 60000; round++ {
		marker := len(sent)
		send(afxFrame(flows + round)) // 10.1.x.y, a key of its own
		for range 3 {
			for k := range flows {
				send(afxFrame(k))
			}
		}
		if round%4 == 3 {
			send(afxNotIP(0))
		}
		testutil.WaitFor(t, fmt.Sprintf("frame %d read", marker), time.Minute, func() bool { return rec.seen(marker) })
	}
	// Every frame accounted for: crossed or kept in the kernel.
	var kc capture.KernelCounts
	testutil.WaitFor(t, fmt.Sprintf("%d frames crossed or kept", len(sent)), time.Minute, func() bool {
		rec.mu.Lock()
		n := len(rec.got)
		rec.mu.Unlock()
		if err := wc.KernelCounts(&kc); err != nil {
			t.Fatal(err)
		}
		return n+int(kc.Packets) >= len(sent)
	})
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("pipeline: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("pipeline still running a minute after cancel")
	}
	if drops, err := rec.KernelDrops(); err != nil || drops != 0 {
		t.Fatalf("KernelDrops() = %d, %v; want 0: the oracle needs every frame", drops, err)
	}

	// The frames at the kernel's times, kept ones at the time of the last
	// frame that crossed before them.
	rec.mu.Lock()
	got := rec.got
	rec.mu.Unlock()
	if len(got)+int(kc.Packets) != len(sent) {
		t.Fatalf("%d frames crossed and %d kept in the kernel; %d sent", len(got), kc.Packets, len(sent))
	}
	at := make([]int64, len(sent))
	for i, c := range got {
		s := afxSeq(c.data)
		if s >= len(sent) || at[s] != 0 || (i > 0 && s <= afxSeq(got[i-1].data)) {
			t.Fatalf("crossed frame %d has sequence number %d: out of order or twice", i, s)
		}
		at[s] = c.t
	}
	win := func(t int64) int64 { return t / int64(window) }
	var pkts []capture.Packet
	var last int64
	lastCross := map[flow.Key]int64{} // the time of each key's last crossing
	kept, windows := 0, map[int64]bool{}
	for i, f := range sent {
		var k flow.Key
		keyErr := k.Decode(f, flow.LinkEthernet, flow.KeySrc)
		if at[i] != 0 {
			last = at[i]
			if keyErr == nil {
				lastCross[k] = at[i]
			}
		} else {
			kept++
			if keyErr != nil || last == 0 {
				t.Fatalf("frame %d (key %v, err %v) kept in the kernel before any frame crossed, or without a key", i, k, keyErr)
			}
			if win(lastCross[k]) != win(last) {
				t.Errorf("frame %d of %v kept in the kernel in window %d or later; its key crossed last in window %d", i, k, win(last), win(lastCross[k]))
			}
		}
		windows[win(last)] = true
		pkts = append(pkts, capture.Packet{Data: f, WireLen: len(f), TimeNs: last, LinkType: flow.LinkEthernet})
	}
	if len(windows) < 3 || kept == 0 {
		t.Fatalf("frames in %d windows, %d kept in the kernel: want 3 windows or more, and some kept", len(windows), kept)
	}

	// The replay of the same frames.
	want := new(memsink.Sink)
	rp, err := pipeline.New(cfg, want)
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.Run(context.Background(), &sliceSource{pkts: pkts}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	gotSums, gotKeys := byWindow(sink)
	wantSums, wantKeys := byWindow(want)
	if len(gotSums) != len(wantSums) {
		t.Errorf("%d windows with frames live, %d in the replay", len(gotSums), len(wantSums))
	}
	for start, w := range wantSums {
		g := gotSums[start]
		if g.Packets != w.Packets || g.Keys != w.Keys || g.Distinct != w.Distinct || g.Skipped != w.Skipped ||
			g.Malformed != w.Malformed || g.Dropped != 0 || g.Late != 0 || g.Prefiltered+g.Distinct > g.Keys {
			t.Errorf("window %v:\n live   %+v\n replay %+v", time.Unix(0, start).UTC(), g, w)
		}
		if only, miss := keysDiff(gotKeys[start], wantKeys[start]); len(only)+len(miss) > 0 {
			t.Errorf("window %v: live records %d, replay %d; only live: %v; only in the replay: %v",
				time.Unix(0, start).UTC(), len(gotKeys[start]), len(wantKeys[start]), only, miss)
		}
	}
	var prefiltered uint64
	for _, g := range gotSums {
		prefiltered += g.Prefiltered
	}
	if prefiltered != uint64(kept) {
		t.Errorf("summaries count %d frames prefiltered, %d were kept in the kernel", prefiltered, kept)
	}
	t.Logf("%d frames in %d windows, %d kept in the kernel", len(sent), len(windows), kept)
}

// keysDiff returns the keys only in a and those only in b, sorted.
func keysDiff(a, b map[flow.Key]bool) (onlyA, onlyB []string) {
	for k := range a {
		if !b[k] {
			onlyA = append(onlyA, k.String())
		}
	}
	for k := range b {
		if !a[k] {
			onlyB = append(onlyB, k.String())
		}
	}
	slices.Sort(onlyA)
	slices.Sort(onlyB)
	return onlyA, onlyB
}

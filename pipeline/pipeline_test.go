package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

const sec = int64(time.Second)

// t0 is an arbitrary start time for test captures, on a window boundary.
const t0 = 1_700_000_000 * sec

// randomStream returns n frames whose source keys are drawn from
// [0, universe), all at time t, and the set of their keys.
func randomStream(rng *rand.Rand, n, universe int, t func(i int) int64) ([]pkt, []int) {
	pkts := make([]pkt, n)
	ids := make([]int, n)
	for i := range pkts {
		ids[i] = rng.IntN(universe)
		pkts[i] = pkt{srcFrame(ids[i]), t(i)}
	}
	return pkts, ids
}

func TestExactOneWindow(t *testing.T) {
	for _, workers := range []int{1, 2, 5} {
		t.Run(fmt.Sprint("workers=", workers), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(workers)))
			pkts, ids := randomStream(rng, 20000, 5000, func(i int) int64 { return t0 + int64(i)*1000 })
			want := map[flow.Key]bool{}
			for _, id := range ids {
				want[srcKey(id)] = true
			}
			cfg := Config{Workers: workers, Filter: "exact", Key: flow.KeySrc, Seed: 42, RingBatches: 4, BatchSize: 16}
			sink, p := run(t, cfg, newSource(pkts))
			recs, wins := sink.snapshot()
			sameSet(t, "records", keySet(t, recs), want)
			for _, r := range recs {
				if r.WindowNs != 0 || r.WindowEndNs != 0 || r.Windowed {
					t.Fatalf("windows off, record has window [%d, %d) (windowed %v)", r.WindowNs, r.WindowEndNs, r.Windowed)
				}
				if s := flow.ShardOf(r.Key.Hash(42), workers); s != r.Worker {
					t.Fatalf("record of %v from worker %d, its shard is %d", r.Key, r.Worker, s)
				}
			}
			if len(wins) != 1 {
				t.Fatalf("%d summaries, want 1", len(wins))
			}
			w := wins[0]
			if !w.Final || w.Packets != 20000 || w.Keys != 20000 || w.Distinct != uint64(len(want)) || w.Dropped != 0 || w.Malformed != 0 {
				t.Errorf("summary %+v", w)
			}
			if w.Windowed {
				t.Errorf("windows off, the summary says it is of a window")
			}
			if w.StartNs != t0 || w.EndNs != t0+19999*1000 {
				t.Errorf("summary spans [%d, %d], want the packets' [%d, %d]", w.StartNs, w.EndNs, t0, t0+19999*1000)
			}
			st := p.Stats()
			if st.Packets != 20000 || st.Keys != 20000 || st.Distinct != uint64(len(want)) || st.Windows != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestWindowsManyProducers runs three sources with interleaved windows and
// a gap through three workers, and checks each window's records against
// the distinct keys of its packets across all sources.
func TestWindowsManyProducers(t *testing.T) {
	const (
		producers = 3
		perSource = 6000
		universe  = 800
	)
	// Windows of 1 s. Each source covers windows 0-3 and 7-9 (a gap of
	// 4, 5, 6), at its own pace.
	rng := rand.New(rand.NewPCG(7, 7))
	wantByWin := map[int64]map[flow.Key]bool{}
	packetsByWin := map[int64]uint64{}
	var sources []capture.Source
	for p := range producers {
		pkts := make([]pkt, perSource)
		for i := range pkts {
			win := int64(i * 7 / perSource) // 0..6
			if win >= 4 {
				win += 3
			}
			// Spread inside the window, increasing.
			within := int64(i*7%perSource) * sec / perSource
			tm := t0 + win*sec + within
			id := rng.IntN(universe)
			pkts[i] = pkt{srcFrame(id), tm}
			ws := t0 + win*sec
			if wantByWin[ws] == nil {
				wantByWin[ws] = map[flow.Key]bool{}
			}
			wantByWin[ws][srcKey(id)] = true
			packetsByWin[ws]++
		}
		_ = p
		sources = append(sources, newSource(pkts))
	}
	cfg := Config{Workers: 3, Filter: "exact", Key: flow.KeySrc, Seed: 9, Window: time.Second, RingBatches: 4, BatchSize: 8}
	sink, _ := run(t, cfg, sources...)
	recs, wins := sink.snapshot()

	got := byWindow(recs)
	for ws, want := range wantByWin {
		sameSet(t, fmt.Sprintf("window %d", (ws-t0)/sec), keySet(t, got[ws]), want)
	}
	for ws, rs := range got {
		if wantByWin[ws] == nil {
			t.Errorf("%d records in window %d, which had no packet", len(rs), (ws-t0)/sec)
		}
		for _, r := range rs {
			if r.WindowEndNs != ws+sec || r.TimeNs < ws || r.TimeNs >= ws+sec {
				t.Fatalf("record at %d in window [%d, %d)", r.TimeNs, r.WindowNs, r.WindowEndNs)
			}
		}
	}
	// Ten summaries, 0 to 9, in order, the gap's empty, the last final.
	if len(wins) != 10 {
		t.Fatalf("%d summaries, want 10: %+v", len(wins), wins)
	}
	for i, w := range wins {
		ws := t0 + int64(i)*sec
		if w.StartNs != ws || w.EndNs != ws+sec {
			t.Errorf("summary %d spans [%d, %d), want [%d, %d)", i, w.StartNs, w.EndNs, ws, ws+sec)
		}
		if w.Packets != packetsByWin[ws] || w.Keys != packetsByWin[ws] || w.Distinct != uint64(len(wantByWin[ws])) {
			t.Errorf("summary %d: packets %d keys %d distinct %d, want %d, %d, %d", i, w.Packets, w.Keys, w.Distinct,
				packetsByWin[ws], packetsByWin[ws], len(wantByWin[ws]))
		}
		if w.Final != (i == 9) {
			t.Errorf("summary %d: Final %v", i, w.Final)
		}
	}
}

// TestMarkerHoldsBackFastProducer checks the window protocol's central
// rule: a worker that has a producer's marker for window 0 does not read
// that producer's keys of window 1 while another producer is still in
// window 0. Producer A runs through windows 0 and 1 to its end while
// producer B is held in the middle of window 0; B's later window-0 keys
// include keys that A sends in window 1. Were A's window-1 keys consumed
// early, they would be reported in window 0, and B's copies would then be
// suppressed as duplicates.
func TestMarkerHoldsBackFastProducer(t *testing.T) {
	var a, b []pkt
	for i := range 50 {
		a = append(a, pkt{srcFrame(i), t0 + int64(i)})
	}
	for i := range 50 {
		a = append(a, pkt{srcFrame(100 + i), t0 + sec + int64(i)}) // window 1: keys 100-149
	}
	for i := range 20 {
		b = append(b, pkt{srcFrame(200 + i), t0 + int64(i)}) // before the gate
	}
	for i := range 50 {
		b = append(b, pkt{srcFrame(100 + i), t0 + 500 + int64(i)}) // window 0 too: keys 100-149
	}
	srcA, srcB := newSource(a), newSource(b)
	srcB.gateAt, srcB.gate = 20, make(chan struct{})

	sink := &collectSink{}
	p, err := New(Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: time.Second, RingBatches: 64, BatchSize: 1}, sink)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(t.Context(), srcA, srcB) }()

	// A reads to its end; B is held. The workers must process window 0 as
	// far as they can (A's keys and B's first 20) and stop there, with
	// A's window-1 batches waiting in the rings.
	<-srcA.eof
	testutil.WaitFor(t, "the workers to catch up with window 0", 10*time.Second, func() bool {
		return sink.recorded.Load() == 70
	})
	// A worker parks only when no ring it may read has a batch: once all
	// have parked, a faulty worker would already have taken A's window-1
	// batches, so the checks below are final, not a matter of timing.
	testutil.WaitFor(t, "every worker to park", 10*time.Second, func() bool { return workersParked(p) })
	st := p.Stats()
	waiting := 0
	for _, w := range st.Workers {
		waiting += w.RingLen
	}
	if waiting == 0 {
		t.Error("no batch waiting in the rings: window-1 keys were consumed early")
	}
	if st.Keys != 70 {
		t.Errorf("workers observed %d keys while B is held, want 70 (window 0 only)", st.Keys)
	}
	recs, wins := sink.snapshot()
	if len(wins) != 0 {
		t.Errorf("a window was closed while B is in it: %+v", wins)
	}
	for _, r := range recs {
		if r.TimeNs >= t0+sec {
			t.Fatalf("window-1 key %v reported while B is in window 0", r.Key)
		}
	}

	close(srcB.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	recs, wins = sink.snapshot()
	got := byWindow(recs)
	want0, want1 := map[flow.Key]bool{}, map[flow.Key]bool{}
	for i := range 50 {
		want0[srcKey(i)] = true
		want0[srcKey(100+i)] = true
		want1[srcKey(100+i)] = true
	}
	for i := range 20 {
		want0[srcKey(200+i)] = true
	}
	sameSet(t, "window 0", keySet(t, got[t0]), want0)
	sameSet(t, "window 1", keySet(t, got[t0+sec]), want1)
	if len(wins) != 2 || wins[0].Packets != 120 || wins[1].Packets != 50 || !wins[1].Final {
		t.Errorf("summaries %+v", wins)
	}
}

// TestReplayNeverDrops pushes a large input through tiny rings: producers
// must wait, never drop.
func TestReplayNeverDrops(t *testing.T) {
	n := 100_000
	if raceEnabled || testing.Short() {
		n = 20_000
	}
	rng := rand.New(rand.NewPCG(3, 3))
	want := map[flow.Key]bool{}
	var sources []capture.Source
	for range 2 {
		pkts, ids := randomStream(rng, n, 4*n, func(i int) int64 { return t0 })
		for _, id := range ids {
			want[srcKey(id)] = true
		}
		sources = append(sources, newSource(pkts))
	}
	cfg := Config{Workers: 3, Filter: "exact", Key: flow.KeySrc, RingBatches: 2, BatchSize: 4}
	sink, p := run(t, cfg, sources...)
	recs, wins := sink.snapshot()
	sameSet(t, "records", keySet(t, recs), want)
	w := wins[len(wins)-1]
	if w.Dropped != 0 || w.Packets != uint64(2*n) || w.Keys != uint64(2*n) {
		t.Errorf("summary %+v", w)
	}
	if st := p.Stats(); st.Dropped != 0 {
		t.Errorf("stats: %d dropped", st.Dropped)
	}
}

// TestLiveDropsWhenWorkerBlocked blocks the Sink, so the worker blocks on
// its output and its ring fills: a live producer must drop, count the
// drops, and the records missing must be exactly the keys dropped.
//
// The worker blocks only once every one of its output batches is with the
// collator, which is stuck in the Sink: until then it takes keys from its
// ring. A live producer does not wait for it, so a producer that ran
// through the whole input before the worker was first scheduled dropped
// all but the ring's 4 batches, the worker took those without filling its
// output, and the ring was empty at the end (9 runs in 500). The source
// therefore waits for room in the ring, as a replay producer would, until
// the worker waits for the collator; from then on it goes at full speed
// and the ring must fill and stay full.
func TestLiveDropsWhenWorkerBlocked(t *testing.T) {
	const n = 20000
	pkts := make([]pkt, n)
	for i := range pkts {
		pkts[i] = pkt{srcFrame(i), t0 + int64(i)} // all distinct
	}
	src := newSource(pkts)
	sink := &collectSink{block: make(chan struct{})}
	p, err := New(Config{Workers: 1, Filter: "exact", Key: flow.KeySrc, Live: true, RingBatches: 4, BatchSize: 16}, sink)
	if err != nil {
		t.Fatal(err)
	}
	var blocked bool
	src.pace = func() {
		for !blocked {
			if p.wstats[0].waiting.Load() {
				blocked = true
				return
			}
			if rs := p.run.Load(); rs != nil && rs.rings[0][0].len() < rs.rings[0][0].cap() {
				return
			}
			runtime.Gosched()
		}
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(t.Context(), src) }()
	<-src.eof
	if !blocked {
		t.Fatalf("the worker took all %d keys without waiting for the blocked Sink", n)
	}
	if st := p.Stats(); st.Workers[0].RingLen != st.Workers[0].RingCap {
		t.Errorf("ring holds %d of %d batches with the worker blocked", st.Workers[0].RingLen, st.Workers[0].RingCap)
	}
	close(sink.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	recs, wins := sink.snapshot()
	w := wins[0]
	missing := uint64(n - len(recs))
	if missing == 0 {
		t.Fatal("nothing dropped with the worker blocked")
	}
	if w.Dropped != missing || w.DroppedBy["ring_full"] != missing {
		t.Errorf("summary: dropped %d (%v), want %d missing records", w.Dropped, w.DroppedBy, missing)
	}
	if w.Packets != n || w.Keys+w.Dropped != n || w.Distinct != uint64(len(recs)) {
		t.Errorf("summary %+v", w)
	}
	if st := p.Stats(); st.DroppedBy["ring_full"] != missing {
		t.Errorf("stats: dropped %v", st.DroppedBy)
	}
	t.Logf("%d of %d keys dropped", missing, n)
}

// TestEmptyFileIsNoPacket: a source's error for an empty file
// (capture.ErrEmpty with capture.ErrCorrupt) is no frame: nothing is
// counted for it, while other damage costs the record it was found in
// (TestMalformedAndSkipped).
func TestEmptyFileIsNoPacket(t *testing.T) {
	src := newSource([]pkt{{srcFrame(1), t0}})
	src.endErr = fmt.Errorf("pcap: empty.pcap: %w", errors.Join(capture.ErrCorrupt, capture.ErrEmpty))
	sink, p := run(t, Config{Workers: 2, Filter: "exact", Key: flow.KeySrc}, src)
	recs, wins := sink.snapshot()
	if len(recs) != 1 || len(wins) != 1 {
		t.Fatalf("%d records, %d summaries, want 1 and 1", len(recs), len(wins))
	}
	if w := wins[0]; w.Packets != 1 || w.Malformed != 0 || len(w.MalformedBy) != 0 || w.Keys != 1 {
		t.Errorf("summary %+v, want the one packet only", w)
	}
	if st := p.Stats(); st.Packets != 1 || st.Malformed != 0 {
		t.Errorf("stats: %d packets, %d malformed, want 1 and 0", st.Packets, st.Malformed)
	}
}

func TestMalformedAndSkipped(t *testing.T) {
	good := srcFrame(1)
	notIP := append([]byte(nil), good...)
	notIP[12], notIP[13] = 0x08, 0x06 // ARP
	badVersion := append([]byte(nil), good...)
	badVersion[14] = 0x65
	pkts := []pkt{
		{good, t0}, {good[:20], t0}, {good[:20], t0}, {notIP, t0}, {badVersion, t0}, {srcFrame(2), t0},
	}
	src := newSource(pkts)
	src.endErr = fmt.Errorf("pcap: record 7: %w", capture.ErrCorrupt)
	sink, p := run(t, Config{Workers: 2, Filter: "exact", Key: flow.KeySrc}, src)
	recs, wins := sink.snapshot()
	if len(recs) != 2 {
		t.Errorf("%d records, want 2", len(recs))
	}
	w := wins[0]
	wantMal := map[string]uint64{"truncated": 2, "bad_header": 1, "corrupt_file": 1}
	if w.Malformed != 4 || fmt.Sprint(w.MalformedBy) != fmt.Sprint(wantMal) {
		t.Errorf("malformed %d %v, want 4 %v", w.Malformed, w.MalformedBy, wantMal)
	}
	if w.Skipped != 1 || w.SkippedBy["not_ip"] != 1 {
		t.Errorf("skipped %d %v, want 1 not_ip", w.Skipped, w.SkippedBy)
	}
	if w.Packets != 7 || w.Keys != 2 {
		t.Errorf("packets %d keys %d, want 7, 2", w.Packets, w.Keys)
	}
	st := p.Stats()
	if st.Malformed != 4 || st.Skipped != 1 || st.MalformedBy["truncated"] != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestSourceErrorIsReturned(t *testing.T) {
	bad := newSource([]pkt{{srcFrame(1), t0}})
	bad.endErr = errors.New("disk on fire")
	good := newSource([]pkt{{srcFrame(2), t0}, {srcFrame(3), t0}})
	sink := &collectSink{}
	p, _ := New(Config{Workers: 1, Filter: "exact", Key: flow.KeySrc}, sink)
	err := p.Run(t.Context(), bad, good)
	if err == nil || !errors.Is(err, bad.endErr) {
		t.Fatalf("Run: %v, want the source's error", err)
	}
	recs, wins := sink.snapshot()
	if len(recs) != 3 || len(wins) != 1 || !wins[0].Final {
		t.Errorf("%d records, summaries %+v: the other source and the final window must go on", len(recs), wins)
	}
}

// TestCancel cancels a run over an endless source: Run must return soon,
// with the final window closed and a record for every distinct key among
// the frames read.
func TestCancel(t *testing.T) {
	pkts := make([]pkt, 3000)
	for i := range pkts {
		pkts[i] = pkt{srcFrame(i % 1000), t0 + int64(i)*int64(time.Millisecond)}
	}
	src := newSource(pkts)
	src.cycle, src.step = true, 3*sec
	sink := &collectSink{}
	p, err := New(Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: time.Second}, sink)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, src) }()
	testutil.WaitFor(t, "some windows", 10*time.Second, func() bool { return p.Stats().Windows >= 3 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	read := int(src.read.Load())
	recs, wins := sink.snapshot()
	last := wins[len(wins)-1]
	if !last.Final {
		t.Error("the last summary is not Final")
	}
	var packets uint64
	for _, w := range wins {
		packets += w.Packets
	}
	if packets != uint64(read) {
		t.Errorf("summaries count %d packets, the source returned %d", packets, read)
	}
	// Every window of 1000 frames has the 1000 keys; the last one those
	// read of it.
	inLast := read % 1000
	if inLast == 0 {
		inLast = 1000
	}
	if got := len(byWindow(recs)[last.StartNs]); got != inLast {
		t.Errorf("final window: %d records, want %d", got, inLast)
	}
	if len(recs) != (len(wins)-1)*1000+inLast {
		t.Errorf("%d records over %d windows, %d frames read", len(recs), len(wins), read)
	}
}

// TestSinkError makes the Sink fail mid-run over an endless source: Run
// must stop and return the error, and still close the Sink once.
func TestSinkError(t *testing.T) {
	pkts := make([]pkt, 5000)
	for i := range pkts {
		pkts[i] = pkt{srcFrame(i), t0}
	}
	src := newSource(pkts)
	src.cycle, src.step = true, sec
	boom := errors.New("disk full")
	sink := &collectSink{failAt: 100, failErr: boom}
	p, err := New(Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: time.Second}, sink)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(t.Context(), src) }()
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Fatalf("Run: %v, want %v", err, boom)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop after a Sink error")
	}
	recs, wins := sink.snapshot()
	if len(recs) != 99 || sink.closes != 1 {
		t.Errorf("%d records kept, %d closes; want 99, 1", len(recs), sink.closes)
	}
	// The summaries of the windows closed after the error still came, so
	// a Sink's totals are the run's: every packet read, every window.
	st := p.Stats()
	var packets uint64
	for _, w := range wins {
		packets += w.Packets
	}
	if len(wins) == 0 || !wins[len(wins)-1].Final || uint64(len(wins)) != st.Windows || packets != st.Packets {
		t.Errorf("after the error: %d summaries (final %v) of %d packets; the pipeline closed %d windows of %d packets",
			len(wins), len(wins) > 0 && wins[len(wins)-1].Final, packets, st.Windows, st.Packets)
	}
}

func TestKernelDrops(t *testing.T) {
	fs := newSource([]pkt{{srcFrame(1), t0}, {srcFrame(2), t0 + sec}, {srcFrame(3), t0 + 2*sec}})
	fs.drops.Store(5)
	sink, p := run(t, Config{Workers: 1, Filter: "exact", Key: flow.KeySrc, Window: time.Second}, dropSource{fs})
	_, wins := sink.snapshot()
	var kernel uint64
	for _, w := range wins {
		kernel += w.DroppedBy["kernel"]
	}
	if kernel != 5 || p.Stats().DroppedBy["kernel"] != 5 {
		t.Errorf("kernel drops: windows %d, stats %v; want 5", kernel, p.Stats().DroppedBy)
	}
}

func TestEmptyInput(t *testing.T) {
	for _, window := range []time.Duration{0, time.Second} {
		sink, _ := run(t, Config{Workers: 3, Filter: "exact", Key: flow.KeySrc, Window: window}, newSource(nil), newSource(nil))
		recs, wins := sink.snapshot()
		if len(recs) != 0 || len(wins) != 1 || !wins[0].Final || wins[0].Packets != 0 {
			t.Errorf("window %v: %d records, summaries %+v; want one empty final summary", window, len(recs), wins)
		}
	}
}

// TestWallClockWindowsOnIdleLink: a live source that only times out must
// still see its windows closed by the wall clock.
func TestWallClockWindowsOnIdleLink(t *testing.T) {
	src := &idleSource{stop: make(chan struct{})}
	sink := &collectSink{}
	p, err := New(Config{Workers: 2, Filter: "qht:mem=8KiB", Key: flow.KeySrc, Live: true, WallClockWindows: true, Window: 10 * time.Millisecond}, sink)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(t.Context(), src) }()
	testutil.WaitFor(t, "windows to close on an idle link", 10*time.Second, func() bool { return p.Stats().Windows >= 3 })
	close(src.stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_, wins := sink.snapshot()
	for i := 1; i < len(wins); i++ {
		if wins[i].StartNs != wins[i-1].EndNs {
			t.Fatalf("summaries %d and %d are not contiguous: %+v", i-1, i, wins)
		}
	}
}

// idleSource times out every millisecond until stopped.
type idleSource struct{ stop chan struct{} }

func (s *idleSource) Next(*capture.Packet) error {
	select {
	case <-s.stop:
		return capture.ErrClosed
	case <-time.After(time.Millisecond):
		return capture.ErrTimeout
	}
}

func (s *idleSource) Close() error { return nil }

func TestStats(t *testing.T) {
	pkts := make([]pkt, 5000)
	for i := range pkts {
		pkts[i] = pkt{srcFrame(i), t0}
	}
	sink, p := run(t, Config{Workers: 2, Filter: "qht:mem=64KiB", Key: flow.KeySrc, RingBatches: 8, BatchSize: 32}, newSource(pkts))
	recs, _ := sink.snapshot()
	st := p.Stats()
	if st.Packets != 5000 || st.Keys != 5000 || st.Distinct != uint64(len(recs)) {
		t.Errorf("stats %+v, %d records", st, len(recs))
	}
	var keys uint64
	for _, w := range st.Workers {
		keys += w.Keys
		if w.RingCap != 8 || w.RingLen != 0 {
			t.Errorf("worker ring %d/%d after the run", w.RingLen, w.RingCap)
		}
		if w.FillRatio <= 0 || w.FillRatio > 1 {
			t.Errorf("fill ratio %v after 2500 keys", w.FillRatio)
		}
	}
	if keys != 5000 {
		t.Errorf("workers' keys sum to %d", keys)
	}

	x, _ := New(Config{Workers: 1, Filter: "exact", Key: flow.KeySrc}, &collectSink{})
	if f := x.Stats().Workers[0].FillRatio; f != -1 {
		t.Errorf("exact filter fill ratio %v, want -1", f)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Filter: "exact"}, // no key kind
		{Filter: "", Key: flow.KeySrc},
		{Filter: "nosuch", Key: flow.KeySrc},
		{Filter: "exact", Key: flow.KeySrc, Workers: -1},
		{Filter: "exact", Key: flow.KeySrc, Window: -time.Second},
		{Filter: "exact", Key: flow.KeySrc, RingBatches: 1},
		{Filter: "exact", Key: flow.KeySrc, BatchSize: -1},
	} {
		if _, err := New(cfg, &collectSink{}); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	if _, err := New(Config{Filter: "exact", Key: flow.KeySrc}, nil); err == nil {
		t.Error("New accepted a nil Sink")
	}
	p, err := New(Config{Filter: "exact", Key: flow.KeySrc}, &collectSink{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Config().Workers < 1 || p.Config().BatchSize != DefaultBatchSize {
		t.Errorf("defaults not filled in: %+v", p.Config())
	}
	if err := p.Run(t.Context()); err == nil {
		t.Error("Run with no source accepted")
	}
	if err := p.Run(t.Context(), newSource(nil)); err != nil {
		t.Fatal(err)
	}
	if err := p.Run(t.Context(), newSource(nil)); !errors.Is(err, ErrAlreadyRun) {
		t.Errorf("second Run: %v", err)
	}
}

func TestPin(t *testing.T) {
	pkts := make([]pkt, 1000)
	for i := range pkts {
		pkts[i] = pkt{srcFrame(i), t0}
	}
	sink, _ := run(t, Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Pin: true}, newSource(pkts))
	if recs, _ := sink.snapshot(); len(recs) != 1000 {
		t.Errorf("%d records", len(recs))
	}
}

// TestLiveFlushesPartialBatches: on a slow live link a batch must not wait
// to fill. A key is handed over when the source idles (capture.ErrTimeout)
// or when a later packet finds it older than liveFlushDelay.
func TestLiveFlushesPartialBatches(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		src := &scriptSource{pkts: []pkt{{srcFrame(1), t0}}, release: make(chan struct{})}
		sink := &collectSink{}
		p, _ := New(Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Live: true}, sink)
		done := make(chan error, 1)
		go func() { done <- p.Run(t.Context(), src) }()
		testutil.WaitFor(t, "the record of a lone packet", 10*time.Second, func() bool { return sink.recorded.Load() == 1 })
		close(src.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("stale", func(t *testing.T) {
		// Two packets 100 ms apart, then the source blocks without
		// timing out: the first key must have been flushed by the second.
		src := newSource([]pkt{{srcFrame(1), t0}, {srcFrame(2), t0 + 100*int64(time.Millisecond)}})
		src.gateAt, src.gate = 2, make(chan struct{})
		sink := &collectSink{}
		p, _ := New(Config{Workers: 1, Filter: "exact", Key: flow.KeySrc, Live: true}, sink)
		done := make(chan error, 1)
		go func() { done <- p.Run(t.Context(), src) }()
		testutil.WaitFor(t, "the record of the stale key", 10*time.Second, func() bool { return sink.recorded.Load() == 1 })
		close(src.gate)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if sink.recorded.Load() != 2 {
			t.Errorf("%d records", sink.recorded.Load())
		}
	})
}

// scriptSource returns its packets, then times out until released.
type scriptSource struct {
	pkts    []pkt
	i       int
	release chan struct{}
}

func (s *scriptSource) Next(p *capture.Packet) error {
	if s.i < len(s.pkts) {
		p.Data, p.TimeNs, p.LinkType = s.pkts[s.i].data, s.pkts[s.i].t, flow.LinkEthernet
		s.i++
		return nil
	}
	select {
	case <-s.release:
		return io.EOF
	case <-time.After(time.Millisecond):
		return capture.ErrTimeout
	}
}

func (s *scriptSource) Close() error { return nil }

// Windows at any time a packet can have are windows: the one ending at
// the epoch ([-60s, 0), end 0), the one starting at it (start 0), one
// long before 1970 and the last one Unix ns reach (end saturated). Each
// record and summary says Windowed, which no bound being 0 may undo
// (issue 25: a v5 record 1 ms before 1970 was read as "no windows").
func TestWindowsAtAnyTime(t *testing.T) {
	const minute = int64(time.Minute)
	last := math.MaxInt64 / minute * minute
	for _, tc := range []struct {
		name  string
		times []int64    // of packets of keys 0, 1, ...
		wins  [][2]int64 // the summaries' bounds, in order
	}{
		{"epoch", []int64{-1_000_000, -1, 0, 1_000_000}, [][2]int64{{-minute, 0}, {0, minute}}},
		{"1900", []int64{-2208988800 * sec, -2208988800*sec + 1}, [][2]int64{{-2208988800 * sec, -2208988800*sec + minute}}},
		{"last", []int64{math.MaxInt64 - 1, math.MaxInt64}, [][2]int64{{last, math.MaxInt64}}},
		// The first window Unix ns reach: its start saturates at
		// math.MinInt64 (1677-09-21T00:12:43Z), its end is a minute's.
		{"first", []int64{math.MinInt64, math.MinInt64 + 1}, [][2]int64{{math.MinInt64, -153722867 * minute}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkts := make([]pkt, len(tc.times))
			for i, tm := range tc.times {
				pkts[i] = pkt{srcFrame(i), tm}
			}
			cfg := Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Seed: 3, Window: time.Minute, RingBatches: 4, BatchSize: 4}
			sink, _ := run(t, cfg, newSource(pkts))
			recs, wins := sink.snapshot()
			if len(recs) != len(tc.times) {
				t.Fatalf("%d records, want %d", len(recs), len(tc.times))
			}
			for _, r := range recs {
				i := slices.IndexFunc(tc.times, func(tm int64) bool { return tm == r.TimeNs })
				if i < 0 || r.Key != srcKey(i) {
					t.Fatalf("record %v at %d: no such packet", r.Key, r.TimeNs)
				}
				j := slices.IndexFunc(tc.wins, func(w [2]int64) bool { return w[0] <= r.TimeNs && (r.TimeNs < w[1] || w[1] == math.MaxInt64) })
				if !r.Windowed || j < 0 || r.WindowNs != tc.wins[j][0] || r.WindowEndNs != tc.wins[j][1] {
					t.Errorf("record at %d: window [%d, %d) windowed %v, want one of %v", r.TimeNs, r.WindowNs, r.WindowEndNs, r.Windowed, tc.wins)
				}
			}
			if len(wins) != len(tc.wins) {
				t.Fatalf("%d summaries, want %d: %+v", len(wins), len(tc.wins), wins)
			}
			for i, w := range wins {
				if !w.Windowed || w.StartNs != tc.wins[i][0] || w.EndNs != tc.wins[i][1] || w.Final != (i == len(wins)-1) {
					t.Errorf("summary %d: [%d, %d) windowed %v final %v, want [%d, %d) windowed", i, w.StartNs, w.EndNs, w.Windowed, w.Final, tc.wins[i][0], tc.wins[i][1])
				}
			}
		})
	}
}

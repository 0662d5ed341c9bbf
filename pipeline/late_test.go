package pipeline

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// lateModel is the reference for one producer's stream, written from the
// definition in Config.Lateness rather than from the pipeline's code: the
// newest time seen so far is W; a packet whose window ends, plus the
// lateness, at or before W is late and counted in the window of W; every
// other packet is keyed in the window of its own time.
type lateModel struct {
	d, l int64
	keys map[int64]map[flow.Key]bool // by window start
	pkts map[int64]uint64            // packets counted, by window start
	late map[int64]uint64            // late packets, by the window they are counted in
}

func newLateModel(window, lateness time.Duration) *lateModel {
	return &lateModel{d: int64(window), l: int64(lateness),
		keys: map[int64]map[flow.Key]bool{}, pkts: map[int64]uint64{}, late: map[int64]uint64{}}
}

func (m *lateModel) floor(t int64) int64 {
	q := t / m.d
	if t < 0 && q*m.d != t {
		q--
	}
	return q * m.d
}

// run feeds the model one producer's packets, in order.
func (m *lateModel) run(pkts []pkt, ids []int) {
	newest := int64(-1 << 63)
	for i, p := range pkts {
		newest = max(newest, p.t)
		start := m.floor(p.t)
		if start+m.d+m.l <= newest {
			m.late[m.floor(newest)]++
			m.pkts[m.floor(newest)]++
			continue
		}
		if m.keys[start] == nil {
			m.keys[start] = map[flow.Key]bool{}
		}
		m.keys[start][srcKey(ids[i])] = true
		m.pkts[start]++
	}
}

// check compares a run's records and summaries with the model.
func (m *lateModel) check(t *testing.T, recs []record.Record, wins []record.WindowSummary) {
	t.Helper()
	got := byWindow(recs)
	for start, want := range m.keys {
		sameSet(t, fmt.Sprintf("window %d", (start-t0)/m.d), keySet(t, got[start]), want)
	}
	for start := range got {
		if m.keys[start] == nil {
			t.Errorf("records in window %d, which the model has none in", (start-t0)/m.d)
		}
	}
	var late, packets uint64
	for _, w := range wins {
		if w.EndNs-w.StartNs != m.d {
			t.Errorf("summary spans [%d, %d): not one window", w.StartNs, w.EndNs)
		}
		if w.Late != m.late[w.StartNs] || w.LateBy["window_closed"] != w.Late {
			t.Errorf("window %d: late %d (%v), want %d", (w.StartNs-t0)/m.d, w.Late, w.LateBy, m.late[w.StartNs])
		}
		if w.Packets != m.pkts[w.StartNs] {
			t.Errorf("window %d: %d packets, want %d", (w.StartNs-t0)/m.d, w.Packets, m.pkts[w.StartNs])
		}
		if w.Distinct != uint64(len(m.keys[w.StartNs])) {
			t.Errorf("window %d: distinct %d, want %d", (w.StartNs-t0)/m.d, w.Distinct, len(m.keys[w.StartNs]))
		}
		if w.Packets != w.Malformed+w.Skipped+w.Keys+w.Dropped+w.Late {
			t.Errorf("window %d: packets %d != malformed+skipped+keys+dropped+late: %+v", (w.StartNs-t0)/m.d, w.Packets, w)
		}
		late += w.Late
		packets += w.Packets
	}
	var wantLate, wantPackets uint64
	for _, n := range m.late {
		wantLate += n
	}
	for _, n := range m.pkts {
		wantPackets += n
	}
	if late != wantLate || packets != wantPackets {
		t.Errorf("summaries count %d packets, %d late; want %d, %d", packets, late, wantPackets, wantLate)
	}
	for i := 1; i < len(wins); i++ {
		if wins[i].StartNs != wins[i-1].EndNs {
			t.Errorf("summaries %d and %d not contiguous", i-1, i)
		}
	}
}

// TestBackwardsWithinLateness: timestamps that go back by less than the
// lateness are keyed in their own window, even across a boundary; those
// that go back further are late, counted in the newest window and never
// reported.
func TestBackwardsWithinLateness(t *testing.T) {
	const window, lateness = time.Second, 300 * time.Millisecond
	ms := int64(time.Millisecond)
	// Window 0: keys 0-9. Then window 1 begins (t0+1s) while key 20 of
	// window 0 comes 100 ms late (within the lateness): it belongs in
	// window 0. Key 21 comes 400 ms late (beyond it): late. Key 0 at
	// window 1 is new in window 1.
	var pkts []pkt
	var ids []int
	add := func(id int, t int64) { pkts = append(pkts, pkt{srcFrame(id), t}); ids = append(ids, id) }
	for i := range 10 {
		add(i, t0+int64(i)*50*ms)
	}
	add(30, t0+sec+50*ms)   // window 1
	add(20, t0+950*ms)      // 100 ms back: window 0, still open
	add(0, t0+sec+100*ms)   // window 1
	add(1, t0+sec+350*ms)   // newest is 1.35 s: window 0 closes (1 s + 300 ms)
	add(21, t0+990*ms)      // window 0 has closed: late
	add(22, t0+2*sec+10*ms) // window 2
	add(23, t0+sec+999*ms)  // window 1, 11 ms back: open
	for _, workers := range []int{1, 3} {
		t.Run(fmt.Sprint("workers=", workers), func(t *testing.T) {
			cfg := Config{Workers: workers, Filter: "exact", Key: flow.KeySrc, Window: window, Lateness: lateness, RingBatches: 4, BatchSize: 4}
			sink, p := run(t, cfg, newSource(pkts))
			recs, wins := sink.snapshot()
			m := newLateModel(window, lateness)
			m.run(pkts, ids)
			m.check(t, recs, wins)
			// Written out by hand, so the model itself is checked too.
			w0 := keySet(t, byWindow(recs)[t0])
			if !w0[srcKey(20)] || w0[srcKey(21)] || len(wins) != 3 || wins[1].Late != 1 {
				t.Errorf("window 0 %v, summaries %+v: want key 20 in window 0, key 21 late in window 1", w0, wins)
			}
			if st := p.Stats(); st.Late != 1 || st.LateBy["window_closed"] != 1 || st.Packets != uint64(len(pkts)) {
				t.Errorf("stats: late %d (%v), packets %d", st.Late, st.LateBy, st.Packets)
			}
		})
	}
}

// TestLatenessZero: without lateness a window closes at its end, and any
// packet older than the newest window is late; before this, such packets
// were silently put in the newest window.
func TestLatenessZero(t *testing.T) {
	pkts := []pkt{{srcFrame(1), t0}, {srcFrame(2), t0 + sec}, {srcFrame(3), t0 + sec - 1}, {srcFrame(4), t0 + sec + 1}}
	sink, _ := run(t, Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: time.Second}, newSource(pkts))
	recs, wins := sink.snapshot()
	got := byWindow(recs)
	if len(got[t0]) != 1 || len(got[t0+sec]) != 2 || len(wins) != 2 || wins[1].Late != 1 || wins[0].Late != 0 {
		t.Errorf("records %v, summaries %+v; want key 3 late in window 1", got, wins)
	}
	for _, r := range recs {
		if r.Key == srcKey(3) {
			t.Errorf("late key 3 reported in window %d", r.WindowNs)
		}
	}
}

// jitterStream is a stream of n packets over universe keys whose times
// advance by step on average but go back by up to maxBack now and then, as
// several interfaces interleaved in one pcapng file or several capture
// rings do, with an occasional packet from far behind.
func jitterStream(rng *rand.Rand, n, universe int, step, maxBack int64) ([]pkt, []int) {
	pkts := make([]pkt, n)
	ids := make([]int, n)
	now := t0
	for i := range pkts {
		now += rng.Int64N(2 * step)
		t := now
		switch r := rng.IntN(100); {
		case r < 20:
			t -= rng.Int64N(maxBack) // within a few windows
		case r == 20:
			t -= 50 * maxBack // far behind: late whatever the lateness
		}
		ids[i] = rng.IntN(universe)
		pkts[i] = pkt{srcFrame(ids[i]), t}
	}
	return pkts, ids
}

// TestLatenessModel runs jittered streams through the pipeline for several
// window/lateness ratios (a lateness of several windows included), worker
// counts and ring sizes, and compares every window with the model.
func TestLatenessModel(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		window, lateness time.Duration
	}{
		{time.Second, 0},
		{time.Second, 200 * time.Millisecond},
		{time.Second, time.Second},
		{100 * time.Millisecond, 350 * time.Millisecond}, // 5 windows open at once
	} {
		for _, workers := range []int{1, 2, 4} {
			name := fmt.Sprintf("window=%v,lateness=%v,workers=%d", tc.window, tc.lateness, workers)
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(tc.lateness), uint64(workers)))
				pkts, ids := jitterStream(rng, 30000, 3000, ms/2, 400*ms)
				cfg := Config{Workers: workers, Filter: "exact", Key: flow.KeySrc, Window: tc.window, Lateness: tc.lateness, RingBatches: 8, BatchSize: 16}
				sink, _ := run(t, cfg, newSource(pkts))
				recs, wins := sink.snapshot()
				m := newLateModel(tc.window, tc.lateness)
				m.run(pkts, ids)
				m.check(t, recs, wins)
			})
		}
	}
}

// TestLatenessManyProducers: each producer judges lateness by its own
// newest time, and a window closes when every producer has closed it. Two
// sources, one lagging the other by most of the lateness, both jittered:
// the union of the models' sets per window is what is reported.
func TestLatenessManyProducers(t *testing.T) {
	ms := int64(time.Millisecond)
	const window, lateness = 200 * time.Millisecond, 300 * time.Millisecond
	rng := rand.New(rand.NewPCG(7, 7))
	a, aids := jitterStream(rng, 20000, 2000, ms/2, 100*ms)
	b, bids := jitterStream(rng, 20000, 2000, ms/2, 100*ms)
	for i := range b {
		b[i].t -= 250 * ms // b lags a
	}
	ma, mb := newLateModel(window, lateness), newLateModel(window, lateness)
	ma.run(a, aids)
	mb.run(b, bids)
	sink, _ := run(t, Config{Workers: 3, Filter: "exact", Key: flow.KeySrc, Window: window, Lateness: lateness, RingBatches: 4, BatchSize: 8},
		newSource(a), newSource(b))
	recs, wins := sink.snapshot()
	got := byWindow(recs)
	starts := map[int64]bool{}
	for s := range ma.keys {
		starts[s] = true
	}
	for s := range mb.keys {
		starts[s] = true
	}
	for s := range starts {
		want := map[flow.Key]bool{}
		for k := range ma.keys[s] {
			want[k] = true
		}
		for k := range mb.keys[s] {
			want[k] = true
		}
		sameSet(t, fmt.Sprint("window ", (s-t0)/int64(window)), keySet(t, got[s]), want)
	}
	var late, wantLate uint64
	for _, w := range wins {
		late += w.Late
	}
	for _, n := range ma.late {
		wantLate += n
	}
	for _, n := range mb.late {
		wantLate += n
	}
	if late != wantLate {
		t.Errorf("%d late, want %d", late, wantLate)
	}
}

// TestLatenessGap: a jump of many windows forward closes every open window
// once, writes empty summaries for the gap, and a packet from before the
// jump is then late.
func TestLatenessGap(t *testing.T) {
	pkts := []pkt{{srcFrame(1), t0}, {srcFrame(2), t0 + 500*sec}, {srcFrame(3), t0 + 400*sec}, {srcFrame(4), t0 + 499*sec}}
	sink, _ := run(t, Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: time.Second, Lateness: 2 * time.Second}, newSource(pkts))
	recs, wins := sink.snapshot()
	got := byWindow(recs)
	if len(got[t0]) != 1 || len(got[t0+500*sec]) != 1 || len(got[t0+499*sec]) != 1 || len(recs) != 3 {
		t.Errorf("records by window %v", got)
	}
	if len(wins) != 501 || wins[500].Late != 1 || !wins[500].Final {
		t.Fatalf("%d summaries (last %+v), want 501 with the late packet in the last", len(wins), wins[len(wins)-1])
	}
}

// TestLateKernelKeys: keys parsed in the kernel that come late are counted
// late without being counted as packets again (the kernel counts those).
func TestLateKernelKeys(t *testing.T) {
	src := &keySource{keys: []capture.Packet{
		{Key: srcKey(1), TimeNs: t0},
		{Key: srcKey(2), TimeNs: t0 + 2*sec},
		{Key: srcKey(3), TimeNs: t0},
	}}
	sink, _ := run(t, Config{Workers: 1, Filter: "exact", Key: flow.KeySrc, Window: time.Second}, src)
	recs, wins := sink.snapshot()
	if len(recs) != 2 || len(wins) != 3 || wins[2].Late != 1 || wins[2].Packets != 0 {
		t.Errorf("records %v, summaries %+v", recs, wins)
	}
}

// keySource returns packets with kernel-made keys. It is a
// capture.KernelCounter, as such a source must be for its keys not to be
// counted as packets: the kernel counts them (none, here).
type keySource struct {
	keys []capture.Packet
	i    int
}

func (s *keySource) Next(p *capture.Packet) error {
	if s.i == len(s.keys) {
		return io.EOF
	}
	*p = s.keys[s.i]
	s.i++
	return nil
}

func (s *keySource) Close() error { return nil }

func (s *keySource) KernelCounts(c *capture.KernelCounts) error {
	*c = capture.KernelCounts{Errors: c.Errors}
	return nil
}

func TestLatenessConfig(t *testing.T) {
	for _, tc := range []struct {
		window, lateness time.Duration
		ok               bool
	}{
		{time.Second, -1, false},
		{time.Second, 63 * time.Second, true},
		{time.Second, 63*time.Second + 1, false}, // 65 windows open
		{0, time.Hour, true},                     // ignored without windows
	} {
		_, err := New(Config{Filter: "exact", Key: flow.KeySrc, Window: tc.window, Lateness: tc.lateness}, &collectSink{})
		if (err == nil) != tc.ok {
			t.Errorf("window %v lateness %v: %v", tc.window, tc.lateness, err)
		}
	}
	// The filters: one per window that can be open at once.
	for _, tc := range []struct {
		window, lateness time.Duration
		want             int
	}{{time.Second, 0, 1}, {time.Second, 1, 2}, {time.Second, time.Second, 2}, {time.Second, time.Second + 1, 3}, {0, time.Hour, 1}} {
		p, err := New(Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: tc.window, Lateness: tc.lateness}, &collectSink{})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(p.filters[1]); got != tc.want {
			t.Errorf("window %v lateness %v: %d filters per worker, want %d", tc.window, tc.lateness, got, tc.want)
		}
	}
}

// jumpStream is keys 0..n-1, one a second from t0, with key 1000 at time
// at inserted after the first half (at < 0: none).
func jumpStream(n int, at int64) ([]pkt, int64) {
	var pkts []pkt
	for i := range n {
		if i == n/2 && at >= 0 {
			pkts = append(pkts, pkt{srcFrame(1000), at})
		}
		pkts = append(pkts, pkt{srcFrame(i), t0 + int64(i)*sec})
	}
	return pkts, t0 + int64(n-1)*sec
}

// TestTimeJumpOutlier: one packet ten years ahead of its neighbours (a
// wrong clock, a corrupt record) is counted late for reason time_jump in
// the window it came in; it neither opens a window in the future nor
// makes the packets after it late, as it did before the guard: every
// other key is reported in its own window.
func TestTimeJumpOutlier(t *testing.T) {
	const window, lateness = time.Minute, 5 * time.Second
	future := t0 + 10*365*24*3600*sec
	pkts, last := jumpStream(240, future)
	for _, workers := range []int{1, 3} {
		sink, p := run(t, Config{Workers: workers, Filter: "exact", Key: flow.KeySrc, Window: window, Lateness: lateness}, newSource(pkts))
		recs, wins := sink.snapshot()
		got := byWindow(recs)
		d := int64(window)
		for i := range 240 {
			start := (t0 + int64(i)*sec) / d * d
			if !keySet(t, got[start])[srcKey(i)] {
				t.Errorf("workers=%d: key %d missing from the window at %d", workers, i, start)
			}
		}
		if len(recs) != 240 || len(wins) == 0 || wins[0].StartNs != t0/d*d || wins[len(wins)-1].EndNs != last/d*d+d {
			t.Fatalf("workers=%d: %d records, summaries %+v; want 240 records, windows from t0's to the last key's", workers, len(recs), wins)
		}
		// Key 1000 came after key 119: counted in that key's window.
		for _, w := range wins {
			wantLate := uint64(0)
			if w.StartNs == (t0+119*sec)/d*d {
				wantLate = 1
			}
			if w.Late != wantLate || w.LateBy["time_jump"] != wantLate || w.Packets != w.Keys+wantLate {
				t.Errorf("workers=%d: window %+v; want %d late for time_jump", workers, w, wantLate)
			}
		}
		if st := p.Stats(); st.Packets != 241 || st.Late != 1 || st.LateBy["time_jump"] != 1 || st.LateBy["window_closed"] != 0 {
			t.Errorf("workers=%d: stats %d packets, late %d %v", workers, st.Packets, st.Late, st.LateBy)
		}
	}
}

// TestTimeJumpFirstPacket: the first packet of all can be the wrong one;
// it is counted (in the first window) and the stream after it is keyed.
func TestTimeJumpFirstPacket(t *testing.T) {
	pkts, _ := jumpStream(120, -1)
	pkts = append([]pkt{{srcFrame(1000), t0 + 3650*24*3600*sec}}, pkts...)
	sink, _ := run(t, Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: time.Minute, Lateness: time.Second}, newSource(pkts))
	recs, wins := sink.snapshot()
	d := int64(time.Minute)
	if len(recs) != 120 || len(wins) != 3 || wins[0].StartNs != t0/d*d || wins[0].LateBy["time_jump"] != 1 || wins[0].Packets != wins[0].Keys+1 || wins[1].Late+wins[2].Late != 0 {
		t.Errorf("%d records, summaries %+v; want 120 records in the 3 windows of t0 to t0+119s, the first packet late for time_jump in the first", len(recs), wins)
	}
}

// TestTimeJumpReal: a gap in the capture (an hour and more without
// packets, or the next file of a set) is confirmed by the packet after it
// and changes nothing: the results are the model's, which has no guard;
// a jump at the very end is kept too.
func TestTimeJumpReal(t *testing.T) {
	const window, lateness = time.Minute, 5 * time.Second
	var pkts []pkt
	var ids []int
	add := func(id int, t int64) { pkts = append(pkts, pkt{srcFrame(id), t}); ids = append(ids, id) }
	for i := range 100 {
		add(i, t0+int64(i)*sec)
	}
	gap := t0 + 5*3600*sec // 5 hours on
	add(100, gap)
	add(101, gap-3*sec) // within the lateness of the packet that jumped
	add(102, gap+sec)
	add(103, gap+30*24*3600*sec) // the last packet jumps a month: kept
	sink, p := run(t, Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: window, Lateness: lateness}, newSource(pkts))
	recs, wins := sink.snapshot()
	m := newLateModel(window, lateness)
	m.run(pkts, ids)
	m.check(t, recs, wins)
	if st := p.Stats(); st.Late != 0 || len(recs) != 104 {
		t.Errorf("%d records, late %d %v; want all 104 keyed", len(recs), st.Late, st.LateBy)
	}
}

// TestTimeJumpTwice: two wrong packets in a row confirm each other, and
// the guard takes the jump (a known limit, documented on screen): the
// packets after them are late, as they were before the guard.
func TestTimeJumpTwice(t *testing.T) {
	pkts, _ := jumpStream(10, -1)
	future := t0 + 3650*24*3600*sec
	pkts = append(pkts[:5:5], append([]pkt{{srcFrame(1000), future}, {srcFrame(1001), future + sec}}, pkts[5:]...)...)
	sink, p := run(t, Config{Workers: 1, Filter: "exact", Key: flow.KeySrc, Window: time.Minute}, newSource(pkts))
	recs, _ := sink.snapshot()
	if st := p.Stats(); len(recs) != 7 || st.LateBy["window_closed"] != 5 || st.LateBy["time_jump"] != 0 {
		t.Errorf("%d records, late %v; want 7 records and the last 5 packets late", len(recs), st.LateBy)
	}
}

package pipeline

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// keyedPacket is a key a source hands over (collect's flow records), with
// its observer and time.
type keyedPacket struct {
	key flow.Key
	obs uint32
	t   int64
}

// observerSource yields keyed packets; it is not a capture.KernelCounter, so
// each counts as a packet.
type observerSource struct {
	pkts []keyedPacket
	i    int
}

func (s *observerSource) Next(p *capture.Packet) error {
	if s.i == len(s.pkts) {
		return io.EOF
	}
	k := s.pkts[s.i]
	s.i++
	*p = capture.Packet{Key: k.key, ObserverID: k.obs, TimeNs: k.t}
	return nil
}

func (s *observerSource) Close() error { return nil }

// TestObservers: each observer's keys are deduplicated apart, a key two
// observers saw is reported for each with its observer, and keyed packets
// of a source that counts nothing itself are packets.
func TestObservers(t *testing.T) {
	w := int64(time.Minute)
	var pkts []keyedPacket
	for round := range 3 {
		for i := range 100 {
			for obs := range uint32(3) { // 0: no observer
				// Round 2 is in the next window: everything again.
				pkts = append(pkts, keyedPacket{srcKey(i), obs, int64(round/2)*w + int64(round*1000+i)})
			}
		}
	}
	for _, workers := range []int{1, 3} {
		sink, p := run(t, Config{Workers: workers, Filter: "exact", Key: flow.KeySrc, Window: time.Minute}, &observerSource{pkts: pkts})
		recs, wins := sink.snapshot()
		seen := map[[2]int64]int{}
		for _, r := range recs {
			seen[[2]int64{int64(r.ObserverID), r.WindowNs}]++
		}
		for obs := range int64(3) {
			for win := range int64(2) {
				if n := seen[[2]int64{obs, win * w}]; n != 100 {
					t.Errorf("workers %d: observer %d, window %d: %d records, want 100", workers, obs, win, n)
				}
			}
		}
		if len(recs) != 600 {
			t.Errorf("workers %d: %d records, want 600", workers, len(recs))
		}
		var packets, distinct uint64
		for _, s := range wins {
			packets += s.Packets
			distinct += s.Distinct
		}
		if packets != uint64(len(pkts)) || distinct != 600 {
			t.Errorf("workers %d: summaries count %d packets and %d distinct, want %d and 600", workers, packets, distinct, len(pkts))
		}
		if st := p.Stats(); st.Packets != uint64(len(pkts)) {
			t.Errorf("workers %d: Stats: %d packets, want %d", workers, st.Packets, len(pkts))
		}
	}
}

// tickSource ticks idle (capture.ErrTimeout) before and after its
// packets, until closed.
type tickSource struct {
	before int // idle ticks before the packets
	pkts   []capture.Packet
	closed chan struct{}
	ticks  atomic.Int64 // idle ticks after the packets
}

func (s *tickSource) Next(p *capture.Packet) error {
	if s.before > 0 {
		s.before--
		return capture.ErrTimeout
	}
	if len(s.pkts) > 0 {
		*p = s.pkts[0]
		s.pkts = s.pkts[1:]
		return nil
	}
	select {
	case <-s.closed:
		return capture.ErrClosed
	case <-time.After(time.Millisecond):
		s.ticks.Add(1)
		return capture.ErrTimeout
	}
}

func (s *tickSource) Close() error { return nil }

// TestIdleWallClock: idle ticks before the first packet do not start the
// windows; after packets of the wall clock's time, an idle tick closes
// their window by the wall clock; after packets far behind it (a capture
// exported long after), idle ticks do not close it, so that what follows a
// pause is not late.
func TestIdleWallClock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		at     int64
		closes bool
	}{
		{"wall clock", time.Now().Add(-500 * time.Millisecond).UnixNano(), true},
		{"old capture", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), false},
	} {
		t.Run(tc.name, func(t *testing.T) { testIdleWallClock(t, tc.at, tc.closes) })
	}
}

func testIdleWallClock(t *testing.T, old int64, closes bool) {
	src := &tickSource{before: 5, closed: make(chan struct{})}
	for i := range 3 {
		src.pkts = append(src.pkts, capture.Packet{Key: srcKey(i), TimeNs: old + int64(i)})
	}
	sink := &collectSink{}
	p, err := New(Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: time.Second, Live: true, IdleWallClock: true}, sink)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { done <- p.Run(ctx, src) }()
	start := old / int64(time.Second) * int64(time.Second)
	if closes {
		testutil.WaitFor(t, "the packets' window closed by an idle tick", 10*time.Second, func() bool {
			_, wins := sink.snapshot()
			return len(wins) > 0 && wins[0].StartNs == start && wins[0].Distinct == 3 && !wins[0].Final
		})
	} else {
		// The source ticks idle every millisecond: wait for a hundred.
		testutil.WaitFor(t, "idle ticks", 10*time.Second, func() bool { return src.ticks.Load() >= 100 })
		if _, wins := sink.snapshot(); len(wins) != 0 {
			t.Fatalf("idle ticks closed windows of packets far behind the clock: %+v", wins)
		}
	}
	cancel()
	close(src.closed)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	recs, wins := sink.snapshot()
	if len(recs) != 3 || wins[0].Late != 0 || wins[0].StartNs != start {
		t.Errorf("%d records, first summary %+v", len(recs), wins[0])
	}
}

// TestLiveWait: a live pipeline told to Wait loses no key to a full ring,
// however small its rings.
func TestLiveWait(t *testing.T) {
	var pkts []keyedPacket
	for i := range 20000 {
		pkts = append(pkts, keyedPacket{srcKey(i), 0, int64(i)})
	}
	sink, p := run(t, Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Live: true, Wait: true, RingBatches: 2, BatchSize: 1}, &observerSource{pkts: pkts})
	recs, _ := sink.snapshot()
	if st := p.Stats(); st.Dropped != 0 || len(recs) != len(pkts) {
		t.Errorf("%d records of %d keys, %d dropped %v", len(recs), len(pkts), st.Dropped, st.DroppedBy)
	}
}

package pipeline

import (
	"io"
	"maps"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// kernelSource plays an XDP program: it walks a stream of frames, keys them,
// drops the keys its prefilter (an exact per-window set) has seen, loses
// every lose-th new key to a "full ring", and returns the rest as packets
// carrying their Key. Its counts, like the kernel's, run ahead of what Next
// has returned: they include the frame behind the key being returned.
type kernelSource struct {
	pkts   []pkt
	i      int
	window int64
	seen   map[flow.Key]bool
	cur    int64 // window of seen
	lose   int   // every lose-th unseen key is lost (0: none)
	unseen int
	counts capture.KernelCounts
	// byWindow, when not nil, gets the same counts by the window of each
	// frame's time, as the XDP program's window counters do.
	byWindow map[int64]*capture.KernelCounts
}

func (s *kernelSource) Next(p *capture.Packet) error {
	for s.i < len(s.pkts) {
		f := s.pkts[s.i]
		s.i++
		cs := []*capture.KernelCounts{&s.counts}
		if s.byWindow != nil {
			w := f.t / s.window
			if s.byWindow[w] == nil {
				s.byWindow[w] = &capture.KernelCounts{}
			}
			cs = append(cs, s.byWindow[w])
		}
		count := func(do func(c *capture.KernelCounts)) {
			for _, c := range cs {
				if c.Errors == nil {
					c.Errors = map[string]uint64{}
				}
				do(c)
			}
		}
		count(func(c *capture.KernelCounts) { c.Packets++ })
		k, err := flow.Parse(f.data, flow.LinkEthernet, flow.KeySrc)
		if err != nil {
			count(func(c *capture.KernelCounts) { c.Errors[flow.Reason(err)]++ })
			continue
		}
		count(func(c *capture.KernelCounts) { c.Keyed++ })
		if w := f.t / s.window; w != s.cur || s.seen == nil {
			s.seen, s.cur = map[flow.Key]bool{}, w
		}
		if s.seen[k] {
			count(func(c *capture.KernelCounts) { c.Prefiltered++ })
			continue
		}
		if s.unseen++; s.lose > 0 && s.unseen%s.lose == 0 {
			count(func(c *capture.KernelCounts) { c.RingFull++ }) // not remembered: the next packet retries
			continue
		}
		s.seen[k] = true
		*p = capture.Packet{Key: k, TimeNs: f.t}
		return nil
	}
	return io.EOF
}

func (s *kernelSource) KernelCounts(c *capture.KernelCounts) error {
	if c.Errors == nil {
		c.Errors = map[string]uint64{}
	}
	errs := c.Errors
	*c = s.counts
	clear(errs)
	for k, v := range s.counts.Errors {
		errs[k] = v
	}
	c.Errors = errs
	return nil
}

func (s *kernelSource) Close() error { return nil }

// A source keying frames in the kernel: its keys go through the filters,
// its kernel counts (packets, prefilter hits, errors, ring-full losses) reach
// the summaries and Stats, and every distinct key the kernel delivered is
// reported once per window.
func TestKernelCounterSource(t *testing.T) {
	const n = 3000
	var pkts []pkt
	want := map[int64]map[flow.Key]bool{}
	for i := range n {
		tm := t0 + int64(i)*int64(time.Millisecond) // 3 one-second windows
		data := srcFrame(i % 100)
		switch i % 97 {
		case 0:
			data = data[:20] // truncated
		case 1:
			data = append([]byte(nil), data...)
			data[12], data[13] = 0x08, 0x06 // ARP: skipped
		}
		pkts = append(pkts, pkt{data, tm})
	}
	src := &kernelSource{pkts: pkts, window: int64(time.Second), lose: 7}
	// What the kernel delivers, computed by a second run of the same
	// script: the pipeline must report exactly those keys, per window.
	ref := &kernelSource{pkts: pkts, window: int64(time.Second), lose: 7}
	var p capture.Packet
	for ref.Next(&p) == nil {
		w := p.TimeNs / int64(time.Second)
		if want[w] == nil {
			want[w] = map[flow.Key]bool{}
		}
		if want[w][p.Key] {
			t.Fatalf("the fake kernel delivered %v twice in window %d", p.Key, w)
		}
		want[w][p.Key] = true
	}

	sink, pl := run(t, Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: time.Second, Live: true}, src)
	recs, wins := sink.snapshot()
	got := byWindow(recs)
	if len(got) != len(want) {
		t.Fatalf("records in %d windows, want %d", len(got), len(want))
	}
	for w, keys := range want {
		sameSet(t, "window records", keySet(t, got[w*int64(time.Second)]), keys)
	}

	kc := src.counts
	var sum record.WindowSummary
	for _, w := range wins {
		sum.Packets += w.Packets
		sum.Keys += w.Keys
		sum.Prefiltered += w.Prefiltered
		sum.Malformed += w.Malformed
		sum.Skipped += w.Skipped
		sum.Dropped += w.Dropped
		sum.Distinct += w.Distinct
		if w.Packets != w.Malformed+w.Skipped+w.Keys+w.Dropped {
			// Kernel counts are polled, so a window may get a frame
			// or two of the next; the totals must still add up.
			t.Logf("window %d: packets %d, malformed %d + skipped %d + keys %d + dropped %d", w.StartNs, w.Packets, w.Malformed, w.Skipped, w.Keys, w.Dropped)
		}
	}
	if sum.Packets != n || sum.Packets != kc.Packets {
		t.Errorf("summaries count %d packets, the kernel %d, sent %d", sum.Packets, kc.Packets, n)
	}
	if sum.Prefiltered != kc.Prefiltered || sum.Prefiltered == 0 {
		t.Errorf("prefiltered %d, kernel %d", sum.Prefiltered, kc.Prefiltered)
	}
	if sum.Malformed != kc.Errors["truncated"] || sum.Skipped != kc.Errors["not_ip"] || sum.Malformed == 0 || sum.Skipped == 0 {
		t.Errorf("malformed %d, skipped %d; kernel errors %v", sum.Malformed, sum.Skipped, kc.Errors)
	}
	if sum.Dropped != kc.RingFull || sum.Dropped == 0 {
		t.Errorf("dropped %d, kernel ring full %d", sum.Dropped, kc.RingFull)
	}
	if sum.Packets != sum.Malformed+sum.Skipped+sum.Keys+sum.Dropped {
		t.Errorf("packets %d != malformed %d + skipped %d + keys %d + dropped %d", sum.Packets, sum.Malformed, sum.Skipped, sum.Keys, sum.Dropped)
	}
	if sum.Distinct != uint64(len(recs)) || sum.Keys != kc.Prefiltered+uint64(len(recs)) {
		t.Errorf("distinct %d, keys %d; records %d, prefiltered %d", sum.Distinct, sum.Keys, len(recs), kc.Prefiltered)
	}
	st := pl.Stats()
	if st.Packets != kc.Packets || st.Prefiltered != kc.Prefiltered || st.Keys != sum.Keys || st.DroppedBy["xdp_ring_full"] != kc.RingFull {
		t.Errorf("Stats %+v; kernel %+v", st, kc)
	}
}

// windowKernelSource is a kernelSource that also counts by window, as the
// XDP program's per-window counters do (capture.WindowCounter).
type windowKernelSource struct {
	kernelSource
}

func (s *windowKernelSource) WindowCounts(i int64, c *capture.KernelCounts) error {
	w, ok := s.byWindow[i]
	if !ok {
		*c = capture.KernelCounts{Errors: c.Errors}
		clear(c.Errors)
		return nil
	}
	errs := c.Errors
	if errs == nil {
		errs = map[string]uint64{}
	}
	*c = *w
	c.Errors = errs
	clear(errs)
	maps.Copy(errs, w.Errors)
	return nil
}

func (s *windowKernelSource) WindowSlots() int { return 8 }

// TestWindowCounterSource: with a source that counts by window in the
// kernel, every window's summary adds up exactly (packets = malformed +
// skipped + keys + dropped) and equals the kernel's counts of that window,
// where polled counts could give a window a frame of the next.
func TestWindowCounterSource(t *testing.T) {
	const n = 3000
	var pkts []pkt
	for i := range n {
		tm := t0 + int64(i)*int64(time.Millisecond)/2 // 1.5 s: windows of 200 ms
		data := srcFrame(i % 100)
		if i%31 == 0 {
			data = data[:20] // truncated
		}
		pkts = append(pkts, pkt{data, tm})
	}
	const window = 200 * time.Millisecond
	src := &windowKernelSource{kernelSource{pkts: pkts, window: int64(window), lose: 5, byWindow: map[int64]*capture.KernelCounts{}}}
	sink, _ := run(t, Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Window: window, Lateness: 50 * time.Millisecond, Live: true}, src)
	_, wins := sink.snapshot()
	var packets uint64
	for _, w := range wins {
		k := src.byWindow[w.StartNs/int64(window)]
		if k == nil {
			t.Fatalf("a summary of window %d, where the kernel saw nothing", w.StartNs)
		}
		if w.Packets != w.Malformed+w.Skipped+w.Keys+w.Dropped {
			t.Errorf("window %d: packets %d != malformed %d + skipped %d + keys %d + dropped %d", w.StartNs, w.Packets, w.Malformed, w.Skipped, w.Keys, w.Dropped)
		}
		if w.Packets != k.Packets || w.Prefiltered != k.Prefiltered || w.Malformed != k.Errors["truncated"] || w.DroppedBy["xdp_ring_full"] != k.RingFull {
			t.Errorf("window %d: summary %+v, kernel %+v", w.StartNs, w, k)
		}
		packets += w.Packets
	}
	if packets != n || len(wins) != len(src.byWindow) {
		t.Errorf("%d packets in %d summaries, want %d in %d", packets, len(wins), n, len(src.byWindow))
	}
}

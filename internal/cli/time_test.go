package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/flowdedup/flowdedup/gen"
)

// Time correctness of replay: windows follow packet time, a window closes
// when the newest time seen passes its end plus the lateness, and a packet
// older than every open window is late. Each test below computes what
// replay must report, window by window, from the packets alone: their own
// timestamps, read with gopacket's pcapgo, their 5-tuples decoded by
// gopacket, and the lateness policy as replay --help and pipeline's
// documentation state it (expectWindows). Replay's records and summaries
// must match exactly: the keys of every window, its packets and its late
// packets.

// timedKey is a packet as the tests see it: its time and its 5-tuple, in
// the form keyOf gives records.
type timedKey struct {
	t   int64 // Unix ns
	key string
}

// readKeys reads the packets of capture files in order with pcapgo (pcap or
// pcapng, by their magic) and decodes each 5-tuple with gopacket.
func readKeys(t *testing.T, paths ...string) []timedKey {
	t.Helper()
	var out []timedKey
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var r interface {
			ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
		}
		if bytes.HasPrefix(b, []byte{0x0a, 0x0d, 0x0d, 0x0a}) {
			r, err = pcapgo.NewNgReader(bytes.NewReader(b), pcapgo.DefaultNgReaderOptions)
		} else {
			r, err = pcapgo.NewReader(bytes.NewReader(b))
		}
		if err != nil {
			t.Fatal(err)
		}
		for {
			data, ci, err := r.ReadPacketData()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, timedKey{ci.Timestamp.UnixNano(), decodeKey(t, data)})
		}
	}
	return out
}

// decodeKey returns the 5-tuple of an Ethernet frame as gopacket decodes
// it: "src|dst|proto|sport|dport", ports 0 for ICMP.
func decodeKey(t *testing.T, frame []byte) string {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	var src, dst string
	var proto uint8
	switch ip := p.NetworkLayer().(type) {
	case *layers.IPv4:
		src, dst, proto = ip.SrcIP.String(), ip.DstIP.String(), uint8(ip.Protocol)
	case *layers.IPv6:
		src, dst, proto = ip.SrcIP.String(), ip.DstIP.String(), uint8(ip.NextHeader)
	default:
		t.Fatalf("frame without IP: %v", p)
	}
	var sport, dport uint16
	switch l4 := p.TransportLayer().(type) {
	case *layers.TCP:
		sport, dport = uint16(l4.SrcPort), uint16(l4.DstPort)
	case *layers.UDP:
		sport, dport = uint16(l4.SrcPort), uint16(l4.DstPort)
	}
	return fmt.Sprintf("%s|%s|%d|%d|%d", src, dst, proto, sport, dport)
}

// window is what one window must hold, or holds.
type window struct {
	packets, late int
	keys          map[string]bool
}

// expectWindows applies the documented policy to packets read in order,
// with windows of w and lateness l. M is the newest time seen so far, the
// packet's own included. A packet of time t belongs to window floor(t/w);
// that window is still open if floor((M-l)/w) <= floor(t/w) (a window
// closes when M reaches its end plus l): the packet is counted and keyed
// there. Otherwise it is late: counted, with late, in the newest window,
// floor(M/w), and keyed nowhere.
func expectWindows(pkts []timedKey, w, l time.Duration) map[int64]*window {
	idx := func(t int64) int64 { return floorDiv(t, int64(w)) }
	out := map[int64]*window{}
	at := func(i int64) *window {
		if out[i] == nil {
			out[i] = &window{keys: map[string]bool{}}
		}
		return out[i]
	}
	newest := int64(math.MinInt64)
	for _, p := range pkts {
		newest = max(newest, p.t)
		own, oldestOpen := idx(p.t), idx(newest-int64(l))
		if own >= oldestOpen {
			c := at(own)
			c.packets++
			c.keys[p.key] = true
			continue
		}
		c := at(idx(newest))
		c.packets++
		c.late++
	}
	return out
}

// floorDiv is a/b rounded down (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// replayWindows replays files with --window w and extra flags (--filter
// exact, 5-tuple keys) and returns what each window got: its records' keys
// and its summary's packets and late counts. Each record's time must lie in
// its window, and each summary's keys and distinct must agree with the
// records and the late count.
func replayWindows(t *testing.T, w time.Duration, extra []string, files ...string) map[int64]*window {
	t.Helper()
	dir := t.TempDir()
	out, sum := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "summary.jsonl")
	args := append([]string{"replay", "--out", out, "--summary", sum, "--filter", "exact", "--key", "5tuple",
		"--workers", "2", "--seed", "1", "--window", w.String()}, extra...)
	code, _, stderr := run(append(args, files...)...)
	if code != ExitOK {
		t.Fatalf("replay %q: exit %d: %s", extra, code, stderr)
	}
	index := func(s string) int64 {
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("time %q: %v", s, err)
		}
		if ts.UnixNano()%int64(w) != 0 {
			t.Fatalf("window start %s is not a multiple of %v", s, w)
		}
		return floorDiv(ts.UnixNano(), int64(w))
	}
	got := map[int64]*window{}
	at := func(i int64) *window {
		if got[i] == nil {
			got[i] = &window{keys: map[string]bool{}}
		}
		return got[i]
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		var r struct {
			TS, Src, Dst, Window string
			Proto                uint8
			Sport, Dport         uint16
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		i := index(r.Window)
		ts, err := time.Parse(time.RFC3339Nano, r.TS)
		if err != nil {
			t.Fatal(err)
		}
		if floorDiv(ts.UnixNano(), int64(w)) != i {
			t.Errorf("record %s: its time is not in its window", strings.TrimSpace(line))
		}
		key := fmt.Sprintf("%s|%s|%d|%d|%d", r.Src, r.Dst, r.Proto, r.Sport, r.Dport)
		c := at(i)
		if c.keys[key] {
			t.Errorf("key %s reported twice in window %d", key, i)
		}
		c.keys[key] = true
	}
	s, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(s)) {
		var m struct {
			WindowStart         string `json:"window_start"`
			Packets, Keys, Late int
			Distinct            int
			LateBy              map[string]int `json:"late_by"`
			Malformed, Skipped  int
			Dropped             int
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("summary %q: %v", line, err)
		}
		i := index(m.WindowStart)
		c := at(i)
		c.packets += m.Packets
		c.late += m.Late
		if m.Keys != m.Packets-m.Late || m.LateBy["window_closed"] != m.Late || m.Malformed+m.Skipped+m.Dropped != 0 {
			t.Errorf("summary %s: keys, late_by or the other counts disagree", strings.TrimSpace(line))
		}
		if m.Distinct != len(c.keys) {
			t.Errorf("summary of window %d: distinct %d, %d records", i, m.Distinct, len(c.keys))
		}
	}
	return got
}

// compareWindows checks replay's windows against the expected ones: the
// same keys in every window, the same packets and late counts; windows
// absent from one side must be empty on the other.
func compareWindows(t *testing.T, got, want map[int64]*window) {
	t.Helper()
	all := map[int64]bool{}
	for i := range got {
		all[i] = true
	}
	for i := range want {
		all[i] = true
	}
	empty := &window{keys: map[string]bool{}}
	for _, i := range slices.Sorted(maps.Keys(all)) {
		g, w := got[i], want[i]
		if g == nil {
			g = empty
		}
		if w == nil {
			w = empty
		}
		if g.packets != w.packets || g.late != w.late {
			t.Errorf("window %d: %d packets, %d late; want %d, %d", i, g.packets, g.late, w.packets, w.late)
		}
		var extra, missing []string
		for k := range g.keys {
			if !w.keys[k] {
				extra = append(extra, k)
			}
		}
		for k := range w.keys {
			if !g.keys[k] {
				missing = append(missing, k)
			}
		}
		if len(extra)+len(missing) > 0 {
			slices.Sort(extra)
			slices.Sort(missing)
			t.Errorf("window %d: %d keys, want %d; reported but not due: %.5q; due but not reported: %.5q",
				i, len(g.keys), len(w.keys), extra, missing)
		}
	}
}

// totals sums the packets and late packets of the expected windows.
func totals(want map[int64]*window) (packets, late int) {
	for _, w := range want {
		packets += w.packets
		late += w.late
	}
	return packets, late
}

// writeGen writes a capture with gen.Write.
func writeGen(t *testing.T, path string, cfg gen.Config) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gen.Write(f, cfg); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// reordered counts the packets that came after a packet of a later window
// and were still keyed in their own: the ones the lateness saves.
func reordered(pkts []timedKey, w, l time.Duration) int {
	n := 0
	newest := int64(math.MinInt64)
	for _, p := range pkts {
		newest = max(newest, p.t)
		if own := floorDiv(p.t, int64(w)); own < floorDiv(newest, int64(w)) && own >= floorDiv(newest-int64(l), int64(w)) {
			n++
		}
	}
	return n
}

// Timestamps that go back by up to 3 s (gen --jitter 3s), in 10 s windows:
// with the default lateness (5 s) every packet is keyed in its own window,
// those that come after the next window began too; with 1 s and with 0 the
// ones that go back further are late. Exact windows in each case.
func TestReplayBackwardTimestamps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jitter.pcap")
	writeGen(t, path, gen.Config{Packets: 6000, Flows: 600, Zipf: 0.8, IPv6: 0.2, Duration: 2 * time.Minute, Seed: 21, Jitter: 3 * time.Second})
	pkts := readKeys(t, path)
	const w = 10 * time.Second
	for _, c := range []struct {
		flags    []string
		lateness time.Duration
		late     bool // some packets must be late
	}{
		{nil, 5 * time.Second, false},
		{[]string{"--lateness", "1s"}, time.Second, true},
		{[]string{"--lateness", "0"}, 0, true},
	} {
		t.Run(fmt.Sprint(c.lateness), func(t *testing.T) {
			want := expectWindows(pkts, w, c.lateness)
			packets, late := totals(want)
			saved := reordered(pkts, w, c.lateness)
			t.Logf("lateness %v: %d packets, %d late, %d keyed in a window older than the newest", c.lateness, packets, late, saved)
			if packets != len(pkts) || (late > 0) != c.late || (saved == 0) != (c.lateness == 0) {
				t.Fatalf("the capture does not exercise the case: %d late, %d saved by the lateness", late, saved)
			}
			compareWindows(t, replayWindows(t, w, c.flags, path), want)
		})
	}
}

// The boundary, by hand: with 10 s windows and 2 s lateness, window 0
// stays open until a packet at 12 s or later has been seen, exactly.
func TestReplayLatenessBoundary(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "boundary.pcap")
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	// A microsecond pcap: 1 µs before a boundary is the closest time.
	writeTimedPcap(t, path, []timedFrame{
		{"10.0.0.1", at(1 * time.Second)},
		{"10.0.0.2", at(12*time.Second - time.Microsecond)}, // newest: 11.999999 s
		{"10.0.0.3", at(9 * time.Second)},                   // window 0, still open
		{"10.0.0.4", at(12 * time.Second)},                  // window 0 closes
		{"10.0.0.5", at(10*time.Second - time.Microsecond)}, // late: counted in window 1
		{"10.0.0.6", at(10 * time.Second)},                  // window 1, open
	})
	pkts := readKeys(t, path)
	want := expectWindows(pkts, 10*time.Second, 2*time.Second)
	w0 := t0.UnixNano() / int64(10*time.Second)
	keys := func(i int64) []string {
		var s []string
		for k := range want[w0+i].keys {
			s = append(s, strings.Split(k, "|")[0])
		}
		slices.Sort(s)
		return s
	}
	// The policy as documented, spelled out: the model must say it too.
	if fmt.Sprint(keys(0)) != "[10.0.0.1 10.0.0.3]" || fmt.Sprint(keys(1)) != "[10.0.0.2 10.0.0.4 10.0.0.6]" ||
		want[w0].late != 0 || want[w0+1].late != 1 || want[w0+1].packets != 4 || len(want) != 2 {
		t.Fatalf("expectWindows: window 0 %v, window 1 %v (%d late)", keys(0), keys(1), want[w0+1].late)
	}
	compareWindows(t, replayWindows(t, 10*time.Second, []string{"--lateness", "2s"}, path), want)
}

// Two interfaces interleaved in one pcapng file, the second's clock 2 s
// behind (gen --interfaces 2 --interface-skew 2s): the default lateness
// keeps every packet in its own window; with 500 ms the packets of the
// slow interface that come after a window boundary are late.
func TestReplayTwoInterfaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "twoifaces.pcapng")
	writeGen(t, path, gen.Config{Packets: 6000, Flows: 600, IPv6: 0.3, Duration: 2 * time.Minute, Seed: 22,
		Format: gen.FormatPcapNG, Interfaces: 2, InterfaceSkew: 2 * time.Second})
	pkts := readKeys(t, path)
	const w = 10 * time.Second
	for _, c := range []struct {
		flags    []string
		lateness time.Duration
		late     bool
	}{
		{nil, 5 * time.Second, false},
		{[]string{"--lateness", "500ms"}, 500 * time.Millisecond, true},
	} {
		t.Run(fmt.Sprint(c.lateness), func(t *testing.T) {
			want := expectWindows(pkts, w, c.lateness)
			_, late := totals(want)
			if (late > 0) != c.late || reordered(pkts, w, c.lateness) == 0 {
				t.Fatalf("the capture does not exercise the case: %d late", late)
			}
			compareWindows(t, replayWindows(t, w, c.flags, path), want)
		})
	}
}

// Files given out of time order: an hour's later capture first, then the
// earlier one. The policy: the newest time seen is the later file's end, so
// every window of the earlier file closed long ago: all its packets are
// late, counted (packets and late) in the summary of the later file's
// last window, and none of its keys is reported in any window. Given in
// order, nothing is late. With the default lateness, exact windows both
// ways.
func TestReplayFilesOutOfOrder(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	early, later := filepath.Join(dir, "early.pcap"), filepath.Join(dir, "later.pcap")
	writeGen(t, early, gen.Config{Packets: 2000, Flows: 200, Duration: 2 * time.Minute, Seed: 23, Start: t0})
	writeGen(t, later, gen.Config{Packets: 3000, Flows: 300, Duration: 2 * time.Minute, Seed: 24, Start: t0.Add(time.Hour)})
	const w = time.Minute
	earlyPkts, laterPkts := readKeys(t, early), readKeys(t, later)

	wrong := expectWindows(append(slices.Clone(laterPkts), earlyPkts...), w, DefaultLateness)
	last := int64(0)
	for _, p := range laterPkts {
		last = max(last, p.t/int64(w))
	}
	if wrong[last].late != len(earlyPkts) {
		t.Fatalf("expectWindows: %d late in the later file's last window, want all %d of the earlier file", wrong[last].late, len(earlyPkts))
	}
	got := replayWindows(t, w, nil, later, early)
	compareWindows(t, got, wrong)
	for i, win := range got {
		if i < t0.Add(time.Hour).UnixNano()/int64(w) && (win.packets > 0 || len(win.keys) > 0) {
			t.Errorf("window %d, of the earlier file, has %d packets and %d keys: want none", i, win.packets, len(win.keys))
		}
	}

	right := expectWindows(append(slices.Clone(earlyPkts), laterPkts...), w, DefaultLateness)
	if _, late := totals(right); late != 0 {
		t.Fatalf("in order: %d late", late)
	}
	compareWindows(t, replayWindows(t, w, nil, early, later), right)
}

// A packet from 1999 in a 2022 capture (seen in a real capture) is late,
// counted in the 2022 window open when it came, its key reported in no
// window; first in the file, it opens a 1999 window of its own, which is
// where it belongs, and the 2022 windows follow.
func TestReplayPacketFrom1999(t *testing.T) {
	t22 := time.Date(2022, 3, 14, 15, 9, 0, 0, time.UTC)
	t99 := time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC)
	var frames []timedFrame
	for i := range 60 {
		frames = append(frames, timedFrame{fmt.Sprintf("10.0.1.%d", i%20+1), t22.Add(time.Duration(i) * 3 * time.Second)})
	}
	old := timedFrame{"192.0.2.99", t99}
	for _, c := range []struct {
		name   string
		frames []timedFrame
		late   int
	}{
		{"middle", slices.Insert(slices.Clone(frames), 30, old), 1},
		{"first", slices.Insert(slices.Clone(frames), 0, old), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "y2k.pcap")
			writeTimedPcap(t, path, c.frames)
			pkts := readKeys(t, path)
			want := expectWindows(pkts, time.Hour, DefaultLateness)
			w99 := t99.UnixNano() / int64(time.Hour)
			_, late := totals(want)
			if late != c.late || (want[w99] != nil) == (c.late == 1) {
				t.Fatalf("expectWindows: %d late, 1999 window %v", late, want[w99])
			}
			got := replayWindows(t, time.Hour, nil, path)
			compareWindows(t, got, want)
			for i, win := range got {
				if win.keys["192.0.2.99|192.0.2.1|17|1000|53"] && i != w99 {
					t.Errorf("the 1999 packet's key reported in window %d, not 1999's %d", i, w99)
				}
			}
		})
	}
}

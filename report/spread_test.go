package report

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

func pairRec(src, dst string, win int64) record.Record {
	k := flow.MakeKey(flow.KeyPair, netip.MustParseAddr(src), netip.MustParseAddr(dst), 6, 1, 2)
	return record.Record{Key: k, TimeNs: win, WindowNs: win, WindowEndNs: win + 3600e9, Windowed: true}
}

// spreadOf decodes the spread member of each summary line of out.
func spreadLines(t *testing.T, out string) []*record.Spread {
	t.Helper()
	var all []*record.Spread
	for line := range strings.Lines(out) {
		var s record.Summary
		if err := record.ParseSummary([]byte(strings.TrimSpace(line)), &s); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		all = append(all, s.Spread)
	}
	return all
}

// TestReporterSpread: two windows whose records interleave (a lateness
// keeps window 1 open while window 2 begins), each window counted apart.
// Expected lists by hand: window 1 has 10.0.0.1 -> 5 destinations,
// 10.0.0.2 -> 2, 10.0.0.3 -> 2 (tie: .2 before .3); destination
// 192.0.2.9 from 3 sources. Window 2 has 10.0.0.7 -> 1, and
// 10.0.0.1 -> 1 (window 1's counts do not carry over).
func TestReporterSpread(t *testing.T) {
	w1, w2 := at("2026-01-01T00:00:00Z"), at("2026-01-01T01:00:00Z")
	var sum, recs bytes.Buffer
	r, err := New(Config{Kind: flow.KeyPair, Summary: &sum, Out: &recs, Format: "text", Spread: SpreadConfig{Src: 2, Dst: 1, Counters: 100, Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	in := []record.Record{
		pairRec("10.0.0.1", "192.0.2.1", w1), pairRec("10.0.0.1", "192.0.2.2", w1),
		pairRec("10.0.0.3", "192.0.2.9", w1), pairRec("10.0.0.1", "192.0.2.3", w1),
		pairRec("10.0.0.7", "192.0.2.1", w2), // window 2 begins
		pairRec("10.0.0.1", "192.0.2.4", w1), pairRec("10.0.0.2", "192.0.2.9", w1),
		pairRec("10.0.0.1", "192.0.2.9", w1), pairRec("10.0.0.2", "192.0.2.8", w1),
		pairRec("10.0.0.3", "192.0.2.7", w1),
		pairRec("10.0.0.1", "192.0.2.5", w2),
	}
	for i := range in {
		if err := r.Record(&in[i]); err != nil {
			t.Fatal(err)
		}
	}
	s1 := record.WindowSummary{StartNs: w1, EndNs: w2, Windowed: true}
	s2 := record.WindowSummary{StartNs: w2, EndNs: w2 + 3600e9, Windowed: true, Final: true}
	s3 := record.WindowSummary{StartNs: w2 + 3600e9, EndNs: w2 + 7200e9, Windowed: true, Final: true}
	for _, s := range []*record.WindowSummary{&s1, &s2, &s3} {
		if err := r.Window(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	got := spreadLines(t, sum.String())
	want := []record.Spread{
		{Src: []record.SpreadEntry{{Addr: "10.0.0.1", Distinct: 5}, {Addr: "10.0.0.2", Distinct: 2}}, Dst: []record.SpreadEntry{{Addr: "192.0.2.9", Distinct: 3}}},
		{Src: []record.SpreadEntry{{Addr: "10.0.0.1", Distinct: 1}, {Addr: "10.0.0.7", Distinct: 1}}, Dst: []record.SpreadEntry{{Addr: "192.0.2.1", Distinct: 1}}},
		{Src: []record.SpreadEntry{}, Dst: []record.SpreadEntry{}}, // a window without records
	}
	if len(got) != len(want) {
		t.Fatalf("%d summaries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] == nil || !spreadEqual(*got[i], want[i]) {
			t.Errorf("window %d: spread %+v, want %+v", i+1, got[i], want[i])
		}
	}
	if !strings.Contains(sum.String(), `"spread":{"src":[],"dst":[]}}`) {
		t.Errorf("the empty window's spread is not [] for both sides:\n%s", sum.String())
	}
	// The text records: each window's spread lines after its records.
	wantText := "2026-01-01T00:00:00Z  spread src 1: 10.0.0.1 5 distinct destinations (error 0)\n" +
		"2026-01-01T00:00:00Z  spread src 2: 10.0.0.2 2 distinct destinations (error 0)\n" +
		"2026-01-01T00:00:00Z  spread dst 1: 192.0.2.9 3 distinct sources (error 0)\n"
	if !strings.Contains(recs.String(), wantText) {
		t.Errorf("text records lack the spread lines %q:\n%s", wantText, recs.String())
	}
}

func spreadEqual(a, b record.Spread) bool {
	eq := func(x, y []record.SpreadEntry) bool {
		if (x == nil) != (y == nil) || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	return eq(a.Src, b.Src) && eq(a.Dst, b.Dst)
}

// TestReporterSpreadPrefix: with --prefix the keys are networks, and so
// are the spread's addresses, in CIDR form; 5tuple keys count flows.
func TestReporterSpreadPrefix(t *testing.T) {
	m, _ := flow.MakeMask(24, 64)
	var sum bytes.Buffer
	r, err := New(Config{Kind: flow.Key5Tuple, Prefix: m, Summary: &sum, Spread: SpreadConfig{Dst: 3, Counters: 10}})
	if err != nil {
		t.Fatal(err)
	}
	// Three flows to 198.51.100.0/24 (two hosts in it), one to 2001:db8::/64.
	for i, f := range []struct{ src, dst string }{{"10.0.0.1", "198.51.100.1"}, {"10.0.0.1", "198.51.100.2"}, {"10.0.9.9", "198.51.100.1"}, {"10.0.0.1", "2001:db8::5"}} {
		src, dst := netip.MustParseAddr(f.src), netip.MustParseAddr(f.dst)
		if dst.Is6() {
			src = netip.MustParseAddr("2001:db8:1::1")
		}
		k := flow.MakeKey(flow.Key5Tuple, src, dst, 17, uint16(1000+i), 53)
		m.Apply(&k)
		rec := record.Record{Key: k}
		r.Record(&rec)
	}
	r.Window(&record.WindowSummary{Final: true})
	r.Close()
	got := spreadLines(t, sum.String())
	want := record.Spread{Dst: []record.SpreadEntry{{Addr: "198.51.100.0/24", Distinct: 3}, {Addr: "2001:db8::/64", Distinct: 1}}}
	if len(got) != 1 || got[0] == nil || !spreadEqual(*got[0], want) {
		t.Fatalf("spread %+v, want %+v", got, want)
	}
}

// TestReporterSpreadKinds: a side the key has no address for is an error,
// and so are counters fewer than a list.
func TestReporterSpreadKinds(t *testing.T) {
	for _, tc := range []struct {
		kind flow.KeyKind
		sp   SpreadConfig
		ok   bool
	}{
		{flow.KeySrc, SpreadConfig{Dst: 1, Counters: 10}, false},
		{flow.KeyDst, SpreadConfig{Src: 1, Counters: 10}, false},
		{flow.KeySrc, SpreadConfig{Src: 1, Counters: 10}, true},
		{flow.KeyPair, SpreadConfig{Src: 20, Counters: 10}, false},
		{flow.KeyPair, SpreadConfig{Src: 10, Dst: 10, Counters: 10}, true},
		{flow.KeyPair, SpreadConfig{}, true},
	} {
		_, err := New(Config{Kind: tc.kind, Spread: tc.sp})
		if (err == nil) != tc.ok {
			t.Errorf("%v %+v: %v", tc.kind, tc.sp, err)
		}
	}
}

// TestReporterSpreadOffUnchanged: without Spread, the summary line has no
// spread member (the line of before, written by hand in summary1).
func TestReporterSpreadOffUnchanged(t *testing.T) {
	var sum bytes.Buffer
	r, _ := New(Config{Kind: flow.KeyPair, Summary: &sum})
	rec := pairRec("10.0.0.1", "10.0.0.2", window1.StartNs)
	r.Record(&rec)
	r.Window(&window1)
	r.Close()
	if strings.Contains(sum.String(), "spread") {
		t.Fatalf("spread in %s", sum.String())
	}
}

// TestReporterSpreadMemory: 3 million distinct sources in one window
// (-short: 300,000), each to one destination, through the Reporter
// with --spread src:10 --spread dst:10 and 1000 counters a side: no
// allocation per record, the heap does not grow with the hosts, and the
// destination's count is exact (one destination: memory for it) while
// the sources' errors stay within n/M. (spread's TestMemoryBounded
// gives a Counter alone 10 million; through the Reporter the size is
// kept to what -count=50 on a loaded machine takes.)
func TestReporterSpreadMemory(t *testing.T) {
	n := uint32(3_000_000)
	if testing.Short() {
		n = 300_000
	}
	var sum bytes.Buffer
	r, err := New(Config{Kind: flow.KeyPair, Summary: &sum, Spread: SpreadConfig{Src: 10, Dst: 10, Counters: 1000, Seed: 3}})
	if err != nil {
		t.Fatal(err)
	}
	dst := netip.MustParseAddr("192.0.2.1")
	rec := record.Record{Windowed: true}
	rec.Key = flow.MakeKey(flow.KeyPair, netip.AddrFrom4([4]byte{10}), dst, 0, 0, 0)
	r.Record(&rec) // the window's counters are made here
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := uint32(1); i < n; i++ {
		rec.Key = flow.MakeKey(flow.KeyPair, netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), dst, 0, 0, 0)
		if i >= 1<<24 {
			rec.Key = flow.MakeKey(flow.KeyPair, netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)}), dst, 0, 0, 0)
		}
		r.Record(&rec)
	}
	runtime.ReadMemStats(&after)
	if d := after.Mallocs - before.Mallocs; d > 100 {
		t.Errorf("%d allocations for %d records", d, n)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 64<<10 {
		t.Errorf("%d bytes allocated for %d records", d, n)
	}
	t.Logf("%d records: %d allocations, %d bytes allocated", n, after.Mallocs-before.Mallocs, after.TotalAlloc-before.TotalAlloc)
	if err := r.Window(&record.WindowSummary{Windowed: true, Final: true}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	got := spreadLines(t, sum.String())
	if len(got) != 1 || len(got[0].Dst) != 1 || got[0].Dst[0] != (record.SpreadEntry{Addr: "192.0.2.1", Distinct: uint64(n)}) {
		t.Fatalf("dst spread %+v, want 192.0.2.1 with %d", got[0].Dst, n)
	}
	if len(got[0].Src) != 10 {
		t.Fatalf("%d sources, want 10", len(got[0].Src))
	}
	for _, e := range got[0].Src {
		if e.Distinct < 1 || e.Distinct-e.Error > 1 || e.Error > uint64(n)/1000 {
			t.Errorf("source %+v: each source has 1 destination, and the error is at most n/M = %d", e, n/1000)
		}
	}
}

// BenchmarkReporterRecordSpread: what --spread src --spread dst costs per
// record with pair keys, against the same Reporter without it
// (sub-benchmarks, run interleaved with -count). 100,000 sources to
// 1,000 destinations, 1000 counters a side (the default of --spread
// src:10 dst:10... at M = 1000).
func BenchmarkReporterRecordSpread(b *testing.B) {
	const n = 1 << 17
	recs := make([]record.Record, n)
	for i := range recs {
		src := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		dst := netip.AddrFrom4([4]byte{192, 0, byte(i % 1000 >> 8), byte(i % 1000)})
		recs[i] = record.Record{Key: flow.MakeKey(flow.KeyPair, src, dst, 0, 0, 0), Windowed: true}
	}
	for _, on := range []bool{false, true} {
		name := "off"
		cfg := Config{Kind: flow.KeyPair}
		if on {
			name = "on"
			cfg.Spread = SpreadConfig{Src: 10, Dst: 10, Counters: 1000, Seed: 1}
		}
		b.Run(name, func(b *testing.B) {
			r, _ := New(cfg)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				r.Record(&recs[i&(n-1)])
			}
		})
	}
}

// TestRecordFilesSpreadText: per-window record files in the text format
// end each window with its spread lines, in that window's file.
func TestRecordFilesSpreadText(t *testing.T) {
	dir := t.TempDir()
	rf, err := NewRecordFiles(newTestFiles(t, dir, "pair-%H.txt", 0), "text", flow.KeyPair)
	if err != nil {
		t.Fatal(err)
	}
	w1 := at("2026-01-01T00:00:00Z")
	r, err := New(Config{Kind: flow.KeyPair, Destinations: []record.Destination{rf}, Spread: SpreadConfig{Dst: 1, Counters: 10}})
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"10.0.0.1", "10.0.0.2"} {
		rec := pairRec(src, "192.0.2.9", w1)
		r.Record(&rec)
	}
	if err := r.Window(&record.WindowSummary{StartNs: w1, EndNs: w1 + 3600e9, Windowed: true, Final: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "pair-00.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := "2026-01-01T00:00:00Z  10.0.0.1 > 192.0.2.9\n2026-01-01T00:00:00Z  10.0.0.2 > 192.0.2.9\n" +
		"2026-01-01T00:00:00Z  spread dst 1: 192.0.2.9 2 distinct sources (error 0)\n"
	if string(data) != want {
		t.Errorf("file:\n%s\nwant:\n%s", data, want)
	}
}

// keeper is a Destination that keeps each summary's Spread pointer, as
// an export queue's shallow copy does.
type keeper struct{ kept []*record.Spread }

func (k *keeper) Records(*record.Batch) error { return nil }
func (k *keeper) Window(s *record.Summary) error {
	k.kept = append(k.kept, s.Spread)
	return nil
}
func (k *keeper) Flush() error { return nil }
func (k *keeper) Close() error { return nil }

// TestReporterSpreadKept: a window's Spread is not written again by the
// next window's, so a destination that kept it sends it as it was.
func TestReporterSpreadKept(t *testing.T) {
	k := &keeper{}
	r, _ := New(Config{Kind: flow.KeyPair, Destinations: []record.Destination{k}, Spread: SpreadConfig{Src: 1, Dst: 1, Counters: 10}})
	w1, w2 := at("2026-01-01T00:00:00Z"), at("2026-01-01T01:00:00Z")
	a, b := pairRec("10.0.0.1", "192.0.2.1", w1), pairRec("10.0.0.2", "192.0.2.2", w2)
	r.Record(&a)
	r.Window(&record.WindowSummary{StartNs: w1, EndNs: w2, Windowed: true})
	r.Record(&b)
	r.Window(&record.WindowSummary{StartNs: w2, EndNs: w2 + 3600e9, Windowed: true, Final: true})
	r.Close()
	if len(k.kept) != 2 || k.kept[0].Src[0].Addr != "10.0.0.1" || k.kept[0].Dst[0].Addr != "192.0.2.1" || k.kept[1].Src[0].Addr != "10.0.0.2" {
		t.Fatalf("kept spreads %+v %+v", k.kept[0], k.kept[1])
	}
}

// TestLargestSpreadLineReads: two lists of 1000 (the CLI's most) of the
// longest entries, beside the largest sketch, make a line a
// SummaryReader takes.
func TestLargestSpreadLineReads(t *testing.T) {
	list := make([]record.SpreadEntry, 1000)
	for i := range list {
		list[i] = record.SpreadEntry{Addr: "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff" + strconv.FormatInt(int64(10+i%90), 10), Distinct: ^uint64(0), Error: ^uint64(0)}
	}
	s := record.Summary{Spread: &record.Spread{Src: list, Dst: list}}
	s.Sketch = make([]byte, 1<<18+64)
	line := record.AppendSummary(nil, &s)
	if len(line) >= MaxSummaryLine {
		t.Fatalf("line of %d bytes, the reader takes %d", len(line), MaxSummaryLine)
	}
	got, err := ReadSummaries(bytes.NewReader(line))
	if err != nil || len(got) != 1 || len(got[0].Spread.Src) != 1000 || len(got[0].Spread.Dst) != 1000 {
		t.Fatalf("%v", err)
	}
}

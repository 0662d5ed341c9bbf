package tune

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/filters"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil/testframe"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/record"
)

const pcaps = "../testdata/pcaps/"

// The ground truth of a capture, per window, is the number of distinct keys
// of each window: testdata/pcaps/README.md lists them as counted by tshark,
// independently of flowdedup's code.
func TestCaptureTruthMatchesTshark(t *testing.T) {
	for _, tc := range []struct {
		file     string
		kind     flow.KeyKind
		window   time.Duration
		elements int
		distinct int // sum over the windows of the README's per-window counts
		windows  int
		unkeyed  int
	}{
		{"zipf.pcap.gz", flow.Key5Tuple, time.Minute, 20000, 963 + 1009 + 1021 + 958 + 998, 5, 0},
		{"zipf.pcap.gz", flow.KeySrc, time.Minute, 20000, 304 + 299 + 304 + 300 + 302, 5, 0},
		{"zipf.pcap.gz", flow.KeyPair, 0, 20000, 1035, 1, 0},
		{"windows.pcap", flow.KeyPair, time.Minute, 3000, 188 + 181 + 160, 3, 0},
		{"windows.pcap", flow.KeyDst, time.Minute, 3000, 28 + 27 + 27, 3, 0},
		{"malformed.pcap", flow.Key5Tuple, 0, 1900, 300, 1, 100},
		{"fragments.pcap", flow.Key5Tuple, time.Minute, 1000, 171, 1, 0},
	} {
		c, err := loadCapture(context.Background(), tc.file, []string{pcaps + tc.file}, flow.KeySpec{Kind: tc.kind}, nil, tc.window)
		if err != nil {
			t.Fatal(err)
		}
		got := c.describe()
		if got.Elements != tc.elements || got.Distinct != tc.distinct || got.Windows != tc.windows || got.Unkeyed != tc.unkeyed || got.Late != 0 {
			t.Errorf("%s %v window %v: %+v, want %d keys, %d distinct, %d windows, %d unkeyed",
				tc.file, tc.kind, tc.window, got, tc.elements, tc.distinct, tc.windows, tc.unkeyed)
		}
		if len(c.starts) != tc.windows-1 {
			t.Errorf("%s: %d window starts, want %d", tc.file, len(c.starts), tc.windows-1)
		}
	}
}

// writePcap writes Ethernet frames with the given times (seconds) to a
// pcap file in dir and returns its path.
func writePcap(t *testing.T, frames [][]byte, secs []float64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriterNanos(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, fr := range frames {
		ci := gopacket.CaptureInfo{Timestamp: base.Add(time.Duration(secs[i] * float64(time.Second))), CaptureLength: len(fr), Length: len(fr)}
		if err := w.WritePacket(ci, fr); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func addr(i int) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], 10<<24+uint32(i))
	return netip.AddrFrom4(b)
}

// Replay's windows, by hand: a packet older than the open window is late
// (not keyed), a frame that does not parse still moves time, and a key
// is distinct again in each window.
func TestCaptureWindowsAsReplay(t *testing.T) {
	frames := [][]byte{
		testframe.UDP4Frame(addr(1), addr(9), 1, 2, 46), // 0 s, window 0: distinct
		testframe.UDP4Frame(addr(1), addr(9), 1, 2, 46), // 10 s: duplicate
		{0xff, 0xff}, // 61 s: not keyed, but opens window 1
		testframe.UDP4Frame(addr(2), addr(9), 1, 2, 46), // 30 s: late (window 0 has closed)
		testframe.UDP4Frame(addr(1), addr(9), 1, 2, 46), // 62 s: distinct again in window 1
		testframe.UDP4Frame(addr(1), addr(9), 1, 2, 46), // 200 s, window 3: distinct
	}
	path := writePcap(t, frames, []float64{0, 10, 61, 30, 62, 200})
	c, err := loadCapture(context.Background(), "t", []string{path}, flow.KeySpec{Kind: flow.KeySrc}, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	info := c.describe()
	if info.Elements != 4 || info.Distinct != 3 || info.Late != 1 || info.Unkeyed != 1 || info.Windows != 3 {
		t.Errorf("info %+v", info)
	}
	wantDup := []bool{false, true, false, false}
	for i, d := range wantDup {
		if c.dup[i] != d {
			t.Errorf("element %d dup %v, want %v", i, c.dup[i], d)
		}
	}
	// Window 1 starts at element 2 (the unkeyed frame opened it), window 3
	// at element 3.
	if len(c.starts) != 2 || c.starts[0] != 2 || c.starts[1] != 3 {
		t.Errorf("window starts %v, want [2 3]", c.starts)
	}
	// Without windows nothing is late and the key is a duplicate throughout.
	c, err = loadCapture(context.Background(), "t", []string{path}, flow.KeySpec{Kind: flow.KeySrc}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if info := c.describe(); info.Elements != 5 || info.Distinct != 2 || info.Late != 0 || info.Windows != 1 {
		t.Errorf("no windows: %+v", info)
	}
}

func TestSplitKeepsTruthAndWindows(t *testing.T) {
	c, err := loadCapture(context.Background(), "zipf", []string{pcaps + "zipf.pcap.gz"}, flow.KeySpec{Kind: flow.KeySrc}, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := c.materialize(7)
	for _, w := range []int{1, 2, 5} {
		for _, thin := range []uint{0, 2} {
			sh := split(e, w, thin)
			n, dups, kept := 0, 0, 0
			for _, h := range e.hashes {
				if keepThinned(h, thin) {
					kept++
				}
			}
			for i, s := range sh {
				n += len(s.hashes)
				for j, h := range s.hashes {
					if flow.ShardOf(h, w) != i || !keepThinned(h, thin) {
						t.Fatalf("w=%d: hash %x in shard %d", w, h, i)
					}
					if s.dup[j] {
						dups++
					}
				}
				for k := 1; k < len(s.starts); k++ {
					if s.starts[k] <= s.starts[k-1] || s.starts[0] <= 0 || int(s.starts[k]) >= len(s.hashes) {
						t.Errorf("w=%d shard %d: starts %v not increasing inside (0, %d)", w, i, s.starts, len(s.hashes))
					}
				}
				if len(s.starts) > len(c.starts) {
					t.Errorf("w=%d shard %d: %d clears for %d boundaries", w, i, len(s.starts), len(c.starts))
				}
			}
			if n != kept {
				t.Errorf("w=%d thin=%d: %d elements dealt, want %d", w, thin, n, kept)
			}
			// Thinning keeps about 1/4 of the keys; zipf.pcap.gz has 331
			// sources, so a binomial count with sd sqrt(331*3/16) = 7.9.
			if thin == 2 && w == 1 {
				keys := map[uint64]bool{}
				for _, h := range sh[0].hashes {
					keys[h] = true
				}
				if d := len(keys) - 331/4; d < -40 || d > 40 {
					t.Errorf("thinning kept %d of 331 keys, want about 83 (5 sd: 40)", len(keys))
				}
			}
		}
	}
}

// recordSink keeps the pipeline's records.
type recordSink struct{ recs []record.Record }

func (s *recordSink) Record(r *record.Record) error      { s.recs = append(s.recs, *r); return nil }
func (s *recordSink) Window(*record.WindowSummary) error { return nil }
func (s *recordSink) Close() error                       { return nil }

// replay runs the real pipeline as `flowdedup replay --seed seed` does and
// returns its records.
func replay(t *testing.T, path, spec string, key flow.KeySpec, window time.Duration, workers int, seed uint64) []record.Record {
	t.Helper()
	sink := &recordSink{}
	p, err := pipeline.New(pipeline.Config{Workers: workers, Filter: spec, Key: key.Kind, Prefix: key.Mask, Seed: seed, FilterSeed: seed, Window: window}, sink)
	if err != nil {
		t.Fatal(err)
	}
	src, err := pcapfile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := p.Run(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	return sink.recs
}

// firstSeen is the ground truth by key and window: the time of the first
// packet of each key in each window, from reading the capture directly
// (not through tune).
type kw struct {
	k flow.Key
	w int64
}

func firstSeen(t *testing.T, path string, key flow.KeySpec, window time.Duration) (map[kw]int64, int) {
	t.Helper()
	src, err := pcapfile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	first := map[kw]int64{}
	times := map[kw]map[int64]bool{}
	var pkt capture.Packet
	for {
		err := src.Next(&pkt)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		k, err := flow.Parse(pkt.Data, pkt.LinkType, key.Kind)
		if err != nil {
			continue
		}
		key.Mask.Apply(&k)
		w := int64(0)
		if window > 0 {
			w = floorDiv(pkt.TimeNs, int64(window)) * int64(window)
		}
		key := kw{k, w}
		if times[key] == nil {
			times[key] = map[int64]bool{}
		}
		if times[key][pkt.TimeNs] {
			t.Fatalf("%s: key %v has two packets at %d: records cannot be told apart", path, k, pkt.TimeNs)
		}
		times[key][pkt.TimeNs] = true
		if _, ok := first[key]; !ok {
			first[key] = pkt.TimeNs
		}
	}
	return first, len(first)
}

// The heart of tune: its counts for a filter and a seed are exactly the
// errors `flowdedup replay --seed S` makes with that filter, computed
// here from the real pipeline's records. A record at the first time of
// its key in its window is a true distinct; any other record is a false
// negative; a first occurrence with no record is a false positive. The
// filters are small so that they do make errors. Keys by network
// (--prefix) too.
func TestEvaluateMatchesReplay(t *testing.T) {
	for _, tc := range []struct {
		file    string
		kind    flow.KeyKind
		prefix  string // --prefix; "" for hosts
		window  time.Duration
		workers int
		specs   []string
	}{
		{"zipf.pcap.gz", flow.Key5Tuple, "", time.Minute, 2, []string{"qht:mem=2KiB,buckets=2,fpbits=6", "sbf:mem=1KiB,max=3,k=2,p=3", "rlbsbf:mem=1KiB,k=2"}},
		{"zipf.pcap.gz", flow.KeyPair, "", 0, 3, []string{"qqhtd:mem=1KiB,buckets=4,fpbits=4", "bdbf:mem=2KiB,window=500", "cuckoo:mem=512B,buckets=2,fpbits=6"}},
		{"zipf.pcap.gz", flow.Key5Tuple, "16,48", time.Minute, 2, []string{"qht:mem=1KiB,buckets=2,fpbits=6"}},
		{"windows.pcap", flow.Key5Tuple, "", time.Minute, 1, []string{"qht:mem=256B,buckets=1,fpbits=3", "a2:mem=512B,fpr=0.1", "fpsbf:mem=1KiB,c=3,f=6,k=3,fps=0.1,xi=1"}},
		{"windows.pcap", flow.KeyPair, "20,60", time.Minute, 1, []string{"qht:mem=128B,buckets=1,fpbits=3"}},
		{"malformed.pcap", flow.KeySrc, "", 30 * time.Second, 2, []string{"bloom:mem=8B,k=2", "lru:mem=32B"}},
	} {
		path := pcaps + tc.file
		mask, err := flow.ParseMask(tc.prefix)
		if err != nil {
			t.Fatal(err)
		}
		key := flow.KeySpec{Kind: tc.kind, Mask: mask}
		c, err := loadCapture(context.Background(), tc.file, []string{path}, key, nil, tc.window)
		if err != nil {
			t.Fatal(err)
		}
		first, distinct := firstSeen(t, path, key, tc.window)
		for _, seed := range []uint64{1, 0xdeadbeef} {
			e, _ := c.materialize(seed)
			d := &dataset{seed: seed, samples: [][]shardStream{split(e, tc.workers, 0)}}
			for _, spec := range tc.specs {
				got, st := evaluate(spec, d, limit{})
				if st != done {
					t.Fatalf("%s: status %v", spec, st)
				}
				recs := replay(t, path, spec, key, tc.window, tc.workers, seed)
				tp, fn := 0, 0
				for _, r := range recs {
					if first[kw{r.Key, r.WindowNs}] == r.TimeNs {
						tp++
					} else {
						fn++
					}
				}
				want := tally{elements: c.describe().Elements, distinct: distinct, fp: distinct - tp, fn: fn}
				want.duplicates = want.elements - want.distinct
				if got.elements != want.elements || got.distinct != want.distinct || got.duplicates != want.duplicates || got.fp != want.fp || got.fn != want.fn {
					t.Errorf("%s %v w=%d seed %d %s: tune counted %d keys %d distinct FP %d FN %d; replay made FP %d FN %d over %d distinct",
						tc.file, tc.kind, tc.workers, seed, spec, got.elements, got.distinct, got.fp, got.fn, want.fp, want.fn, want.distinct)
				}
				if got.fp+got.fn == 0 {
					t.Errorf("%s %s: no error at all; the test wants a filter small enough to err", tc.file, spec)
				}
			}
		}
	}
}

// The timed loop allocates nothing: observing a shard's stream, window
// clears included, costs no allocation once the filter is built.
func TestObserveShardAllocatesNothing(t *testing.T) {
	c, err := loadCapture(context.Background(), "zipf", []string{pcaps + "zipf.pcap.gz"}, flow.KeySpec{Kind: flow.Key5Tuple}, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := c.materialize(1)
	sh := split(e, 2, 0)
	for _, spec := range []string{DefaultSpec("8KiB"), "sbf:mem=8KiB,max=1,k=2,p=4", "rlbsbf:mem=8KiB,k=2"} {
		f, err := filters.New(spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		sp := &speed{} // no speed limit: its reference is built once, on a slow chunk
		var tl tally
		if n := testing.AllocsPerRun(5, func() { observeShard(f, &sh[0], &tl, sp) }); n != 0 {
			t.Errorf("%s: %.1f allocations per shard pass", spec, n)
		}
	}
}

// Samples key by network as replay --prefix does: with /0 every IPv4
// address is one network and every IPv6 address another, so each of
// zipf.pcap.gz's five one-minute windows (both families in each) has two
// distinct keys, whatever the kind. The configured prefix applies to bare
// files and to pcap: specs without prefix=, which one with prefix=
// overrides.
func TestSamplesPrefix(t *testing.T) {
	all, err := flow.ParseMask("0,0")
	if err != nil {
		t.Fatal(err)
	}
	file := pcaps + "zipf.pcap.gz"
	for _, c := range []struct {
		specs    []string
		key      flow.KeySpec
		distinct int
	}{
		{[]string{file}, flow.KeySpec{Kind: flow.KeySrc, Mask: all}, 10},
		{[]string{"pcap:" + file}, flow.KeySpec{Kind: flow.KeyPair, Mask: all}, 10},
		{[]string{"pcap:" + file + ",prefix=0,0"}, flow.KeySpec{Kind: flow.KeySrc}, 10},
		{[]string{"pcap:" + file + ",key=5tuple,prefix=0,0"}, flow.KeySpec{Kind: flow.KeySrc}, 0}, // ports: more than 10
		{[]string{"pcap:" + file + ",prefix=32,128"}, flow.KeySpec{Kind: flow.KeySrc, Mask: all}, 304 + 299 + 304 + 300 + 302},
	} {
		ss, err := openSamples(context.Background(), c.specs, c.key, nil, time.Minute, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := ss[0].describe()
		if c.distinct == 0 {
			if got.Distinct <= 10 {
				t.Errorf("%q, %v: %d distinct, want more than 10", c.specs, c.key, got.Distinct)
			}
			continue
		}
		if got.Distinct != c.distinct || got.Elements != 20000 || got.Windows != 5 {
			t.Errorf("%q, %v: %+v, want %d distinct of 20000 keys in 5 windows", c.specs, c.key, got, c.distinct)
		}
	}
	if _, err := openSamples(context.Background(), []string{"pcap:" + file + ",prefix=33"}, flow.KeySpec{Kind: flow.KeySrc}, nil, 0, 1); !errors.Is(err, flow.ErrBadMask) {
		t.Errorf("prefix=33: %v, want flow.ErrBadMask", err)
	}
}

// TestSamplesDecap: a capture's keys are taken through its tunnels with
// Config.Decap, or a pcap: spec's decap=, which overrides it. erspan.pcap
// (scripts/mkdecap.py) holds 6 ERSPAN packets from 2 mirror sources
// (192.0.2.11, 2001:db8:ffff::11) of 6 hosts (tshark -e ip.src -e
// ipv6.src: 10.2.0.1 to 10.2.4.1 and 2001:db8:2:1::1).
func TestSamplesDecap(t *testing.T) {
	all, err := flow.ParseDecap("all")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join("..", "flow", "testdata", "decap", "erspan.pcap")
	for _, c := range []struct {
		specs    []string
		decap    *flow.Decap
		distinct int
	}{
		{[]string{file}, nil, 2},
		{[]string{file}, &flow.Decap{}, 2},
		{[]string{file}, &all, 6},
		{[]string{"pcap:" + file}, &all, 6},
		{[]string{"pcap:" + file + ",decap=erspan"}, nil, 6},
		{[]string{"pcap:" + file + ",decap=gre"}, &all, 2}, // ERSPAN is not GRE's
		{[]string{"pcap:" + file + ",decap=none"}, &all, 2},
	} {
		ss, err := openSamples(context.Background(), c.specs, flow.KeySpec{Kind: flow.KeySrc}, c.decap, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := ss[0].describe(); got.Distinct != c.distinct || got.Elements != 6 || got.Unkeyed != 0 {
			t.Errorf("%q, decap %v: %+v, want %d distinct of 6 keys", c.specs, c.decap, got, c.distinct)
		}
	}
}

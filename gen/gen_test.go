package gen

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/mix"
)

// mixed exercises every feature at once.
var mixed = Config{
	Packets: 6000, Flows: 700, Zipf: 0.9, IPv6: 0.3, VLAN: true, Duration: 150 * time.Second,
	Seed: 42, Malformed: 0.05, Fragments: 0.2,
}

type packet struct {
	ci   gopacket.CaptureInfo
	data []byte
}

func write(t *testing.T, cfg Config) ([]byte, Stats) {
	t.Helper()
	var buf bytes.Buffer
	st, err := Write(&buf, cfg)
	if err != nil {
		t.Fatalf("Write(%+v): %v", cfg, err)
	}
	return buf.Bytes(), st
}

// readAll reads back a capture Write made, whatever its format.
func readAll(t *testing.T, file []byte, cfg Config) []packet {
	t.Helper()
	var r io.Reader = bytes.NewReader(file)
	if cfg.Gzip {
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	var src interface {
		ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
		LinkType() layers.LinkType
	}
	var err error
	if cfg.Format == FormatPcapNG {
		src, err = pcapgo.NewNgReader(r, pcapgo.DefaultNgReaderOptions)
	} else {
		src, err = pcapgo.NewReader(r)
	}
	if err != nil {
		t.Fatal(err)
	}
	if src.LinkType() != layers.LinkTypeEthernet {
		t.Fatalf("link type %v, want Ethernet", src.LinkType())
	}
	var pkts []packet
	for {
		data, ci, err := src.ReadPacketData()
		if err == io.EOF {
			return pkts
		}
		if err != nil {
			t.Fatalf("packet %d: %v", len(pkts)+1, err)
		}
		pkts = append(pkts, packet{ci, data})
	}
}

func TestDeterministic(t *testing.T) {
	for _, format := range []string{FormatPcap, FormatPcapNG} {
		for _, gz := range []bool{false, true} {
			cfg := mixed
			cfg.Format, cfg.Gzip = format, gz
			a, sa := write(t, cfg)
			b, sb := write(t, cfg)
			if !bytes.Equal(a, b) || sa != sb {
				t.Errorf("%s gzip=%v: two writes of the same config differ", format, gz)
			}
			cfg.Seed++
			if c, _ := write(t, cfg); bytes.Equal(a, c) {
				t.Errorf("%s gzip=%v: seeds %d and %d give the same bytes", format, gz, cfg.Seed-1, cfg.Seed)
			}
		}
	}
}

// keySets gathers the distinct keys of every kind over the frames
// flow.Parse keys, and the errors of the others.
type keySets struct {
	keys   [flow.Key5Tuple + 1]map[flow.Key]int // by kind; counts packets
	errs   map[error]int
	tagged int // frames with a VLAN tag
	qinq   int
}

func collect(t *testing.T, pkts []packet) keySets {
	t.Helper()
	var s keySets
	s.errs = map[error]int{}
	for k := flow.KeySrc; k <= flow.Key5Tuple; k++ {
		s.keys[k] = map[flow.Key]int{}
	}
	for i, p := range pkts {
		switch etype := uint16(p.data[12])<<8 | uint16(p.data[13]); etype {
		case etherTypeQinQ:
			s.qinq++
			s.tagged++
		case etherTypeVLAN:
			s.tagged++
		}
		var firstErr error
		for k := flow.KeySrc; k <= flow.Key5Tuple; k++ {
			key, err := flow.Parse(p.data, flow.LinkEthernet, k)
			if k == flow.KeySrc {
				firstErr = err
			} else if err != firstErr {
				t.Fatalf("packet %d: kind %v fails with %v, src with %v", i+1, k, err, firstErr)
			}
			if err == nil {
				s.keys[k][key]++
			}
		}
		if firstErr != nil {
			s.errs[firstErr]++
		}
	}
	return s
}

func TestStatsMatchParse(t *testing.T) {
	cases := []Config{
		mixed,
		{Packets: 1, Flows: 1},
		{Packets: 10, Flows: 10, IPv6: 1},
		{Packets: 2000, Flows: 300},
		{Packets: 2000, Flows: 300, Zipf: 1.2, IPv6: 0.8, VLAN: true, Format: FormatPcapNG},
		{Packets: 3000, Flows: 2850, Malformed: 0.05, Fragments: 1, Seed: 7},
		{Packets: 500, Flows: 4, Zipf: 3, Malformed: 0.5, Gzip: true},
	}
	for _, cfg := range cases {
		t.Run(fmt.Sprintf("%d/%d", cfg.Packets, cfg.Flows), func(t *testing.T) {
			file, st := write(t, cfg)
			pkts := readAll(t, file, cfg)
			if len(pkts) != cfg.Packets || st.Packets != cfg.Packets {
				t.Fatalf("read %d packets, Stats.Packets %d, want %d", len(pkts), st.Packets, cfg.Packets)
			}
			s := collect(t, pkts)

			wantMal := int(math.Round(cfg.Malformed * float64(cfg.Packets)))
			if st.Malformed != wantMal || st.Truncated+st.BadVersion+st.NotIP != wantMal {
				t.Errorf("Stats.Malformed %d (%d+%d+%d), want %d", st.Malformed, st.Truncated, st.BadVersion, st.NotIP, wantMal)
			}
			for err, want := range map[error]int{flow.ErrTruncated: st.Truncated, flow.ErrBadHeader: st.BadVersion, flow.ErrNotIP: st.NotIP} {
				if s.errs[err] != want {
					t.Errorf("flow.Parse: %d frames fail with %v, Stats says %d", s.errs[err], err, want)
				}
				delete(s.errs, err)
			}
			if len(s.errs) != 0 {
				t.Errorf("unexpected parse errors: %v", s.errs)
			}

			// Flows: the 5-tuple keys with ports or of ICMP, the others
			// being the port-less keys of fragments.
			flows, v6, frags := 0, 0, 0
			for k, n := range s.keys[flow.Key5Tuple] {
				if k.HasPorts() || k.Proto() == protoICMP || k.Proto() == protoICMPv6 {
					flows++
					if k.Is6() {
						v6++
					}
				} else {
					frags += n
				}
			}
			if flows != cfg.Flows || st.Flows != cfg.Flows {
				t.Errorf("%d distinct flows, Stats.Flows %d, want %d", flows, st.Flows, cfg.Flows)
			}
			if want := int(math.Round(cfg.IPv6 * float64(cfg.Flows))); v6 != want || st.IPv6Flows != want {
				t.Errorf("%d IPv6 flows, Stats.IPv6Flows %d, want %d", v6, st.IPv6Flows, want)
			}
			if frags != st.Fragments {
				t.Errorf("%d fragments, Stats.Fragments %d", frags, st.Fragments)
			}
			if cfg.Fragments == 0 && st.Fragments != 0 {
				t.Errorf("Stats.Fragments %d without fragments asked for", st.Fragments)
			}
			for _, c := range []struct {
				kind flow.KeyKind
				got  int
			}{{flow.KeySrc, st.Sources}, {flow.KeyDst, st.Destinations}, {flow.KeyPair, st.Pairs}, {flow.Key5Tuple, st.FiveTuples}} {
				if len(s.keys[c.kind]) != c.got {
					t.Errorf("%v: %d distinct keys, Stats says %d", c.kind, len(s.keys[c.kind]), c.got)
				}
			}
			if cfg.Flows >= 30 && !(st.Sources < st.Pairs && st.Destinations < st.Pairs && st.Pairs < st.FiveTuples) {
				t.Errorf("distinct counts should nest: src %d, dst %d, pair %d, 5tuple %d",
					st.Sources, st.Destinations, st.Pairs, st.FiveTuples)
			}

			if cfg.VLAN {
				if s.tagged != len(pkts) {
					t.Errorf("--vlan: %d of %d frames tagged", s.tagged, len(pkts))
				}
				if cfg.Flows >= 100 && (s.qinq == 0 || s.qinq == len(pkts)) {
					t.Errorf("--vlan: %d of %d frames QinQ, want some", s.qinq, len(pkts))
				}
			} else if s.tagged != 0 {
				t.Errorf("%d frames tagged without --vlan", s.tagged)
			}
		})
	}
}

// TestFramesDecode checks the well-formed frames against gopacket's full
// decoder: no decoding error, valid checksums in every layer, and the
// addresses flow.Parse found.
func TestFramesDecode(t *testing.T) {
	cfg := mixed
	file, _ := write(t, cfg)
	for i, p := range readAll(t, file, cfg) {
		key, err := flow.Parse(p.data, flow.LinkEthernet, flow.KeyPair)
		if err != nil {
			continue
		}
		pkt := gopacket.NewPacket(p.data, layers.LayerTypeEthernet, gopacket.NoCopy)
		if e := pkt.ErrorLayer(); e != nil {
			t.Fatalf("packet %d: gopacket: %v", i+1, e.Error())
		}
		nl := pkt.NetworkLayer()
		src, dst := nl.NetworkFlow().Endpoints()
		if src.String() != key.Src().String() || dst.String() != key.Dst().String() {
			t.Errorf("packet %d: gopacket %v > %v, flow.Parse %v", i+1, src, dst, key)
		}
		for _, l := range pkt.Layers() {
			if c, ok := l.(interface {
				SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
			}); ok {
				c.SetNetworkLayerForChecksum(nl)
			}
			if c, ok := l.(interface {
				VerifyChecksum() (error, gopacket.ChecksumVerificationResult)
			}); ok {
				if err, res := c.VerifyChecksum(); err != nil || !res.Valid {
					t.Errorf("packet %d: %v checksum %#x, want %#x (%v)", i+1, l.LayerType(), res.Actual, res.Correct, err)
				}
			}
		}
	}
}

func TestTimestamps(t *testing.T) {
	start := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, cfg := range []Config{
		{Packets: 5000, Flows: 100, Duration: 150 * time.Second},
		{Packets: 5000, Flows: 100, Duration: time.Hour, Start: start, Format: FormatPcapNG},
		{Packets: 100, Flows: 10},
		{Packets: 1, Flows: 1, Duration: time.Second},
	} {
		file, _ := write(t, cfg)
		pkts := readAll(t, file, cfg)
		first, end := cfg.start(), cfg.start().Add(cfg.Duration)
		if !pkts[0].ci.Timestamp.Equal(first) {
			t.Errorf("%v over %v: first packet at %v, want %v", cfg.Packets, cfg.Duration, pkts[0].ci.Timestamp, first)
		}
		// Uniform points: in each tenth of the span, a tenth of the packets.
		perTenth := make([]int, 10)
		for i, p := range pkts {
			ts := p.ci.Timestamp
			if i > 0 && ts.Before(pkts[i-1].ci.Timestamp) {
				t.Fatalf("packet %d at %v, before packet %d at %v", i+1, ts, i, pkts[i-1].ci.Timestamp)
			}
			if ts.After(end) {
				t.Fatalf("packet %d at %v, after the end %v", i+1, ts, end)
			}
			if cfg.Duration > 0 {
				perTenth[min(9, int(10*float64(ts.Sub(first))/float64(cfg.Duration)))]++
			}
		}
		if cfg.Packets >= 1000 {
			// Binomial(n, 0.1): 6 standard deviations.
			mean := float64(cfg.Packets) / 10
			tol := 6 * math.Sqrt(mean*0.9)
			for i, n := range perTenth {
				if math.Abs(float64(n)-mean) > tol {
					t.Errorf("%d packets in tenth %d of the span, want %.0f ± %.0f", n, i, mean, tol)
				}
			}
		}
	}
}

// TestZipfPopularity checks the most popular flow against the Zipf pmf. Its
// count is 1 (its introduction) plus Binomial(m, p1) over the m packets
// drawn by popularity, so it lies within 5 standard deviations of
// 1 + m*p1 but for one run in about 3.5 million. The runner-up must not come
// near it: rank 2 has p1/2^s.
func TestZipfPopularity(t *testing.T) {
	for _, s := range []float64{0.6, 1, 1.5} {
		cfg := Config{Packets: 60000, Flows: 500, Zipf: s, Seed: 3, Malformed: 0.01}
		file, st := write(t, cfg)
		counts := slices.Collect(maps.Values(collect(t, readAll(t, file, cfg)).keys[flow.Key5Tuple]))
		slices.Sort(counts)
		top := counts[len(counts)-1]

		var h float64
		for k := 1; k <= cfg.Flows; k++ {
			h += math.Pow(float64(k), -s)
		}
		p1 := 1 / h
		m := float64(cfg.Packets - st.Malformed - cfg.Flows)
		mean, sd := 1+m*p1, math.Sqrt(m*p1*(1-p1))
		t.Logf("s=%v: most popular flow has %d packets, pmf says %.0f ± %.0f", s, top, mean, sd)
		if math.Abs(float64(top)-mean) > 5*sd {
			t.Errorf("s=%v: most popular flow has %d packets, want %.0f ± %.0f (p1 = %.4f)", s, top, mean, 5*sd, p1)
		}
	}
}

// TestUniformPopularity: without Zipf every flow gets 1 + Binomial(m, 1/F)
// packets; a chi-square statistic over the flows stays below its 1e-6
// quantile (normal approximation) in all but one run in a million.
func TestUniformPopularity(t *testing.T) {
	cfg := Config{Packets: 50000, Flows: 200, Seed: 9}
	file, _ := write(t, cfg)
	keys := collect(t, readAll(t, file, cfg)).keys[flow.Key5Tuple]
	m := float64(cfg.Packets - cfg.Flows)
	want := m / float64(cfg.Flows)
	var chi2 float64
	for _, n := range keys {
		d := float64(n-1) - want
		chi2 += d * d / want
	}
	df := float64(cfg.Flows - 1)
	if limit := df + 4.75*math.Sqrt(2*df); chi2 > limit {
		t.Errorf("chi-square %.1f over %d flows, want below %.1f", chi2, cfg.Flows, limit)
	}
}

func TestPcapNGMatchesPcap(t *testing.T) {
	cfg := mixed
	pcap, _ := write(t, cfg)
	cfg.Format = FormatPcapNG
	ng, _ := write(t, cfg)
	a, b := readAll(t, pcap, mixed), readAll(t, ng, cfg)
	if len(a) != len(b) {
		t.Fatalf("pcap has %d packets, pcapng %d", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i].data, b[i].data) || !a[i].ci.Timestamp.Equal(b[i].ci.Timestamp) || a[i].ci.Length != b[i].ci.Length {
			t.Fatalf("packet %d differs between pcap and pcapng", i+1)
		}
	}
}

func TestSnapLen(t *testing.T) {
	cfg := mixed
	cfg.SnapLen = MinSnapLen
	file, st := write(t, cfg)
	pkts := readAll(t, file, cfg)
	cut := 0
	for _, p := range pkts {
		if p.ci.CaptureLength > cfg.SnapLen || p.ci.CaptureLength > p.ci.Length {
			t.Fatalf("capture length %d, length %d, snap length %d", p.ci.CaptureLength, p.ci.Length, cfg.SnapLen)
		}
		if p.ci.CaptureLength < p.ci.Length {
			cut++
		}
	}
	if cut == 0 {
		t.Error("no frame cut at the snap length")
	}
	s := collect(t, pkts)
	if len(s.keys[flow.Key5Tuple]) != st.FiveTuples || s.errs[flow.ErrTruncated] != st.Truncated {
		t.Errorf("snap length changed the keys: %d 5-tuples (want %d), %d truncated (want %d)",
			len(s.keys[flow.Key5Tuple]), st.FiveTuples, s.errs[flow.ErrTruncated], st.Truncated)
	}
}

func TestValidate(t *testing.T) {
	ok := Config{Packets: 100, Flows: 10}
	bad := map[string]func(*Config){
		"no packets":          func(c *Config) { c.Packets = 0 },
		"no flows":            func(c *Config) { c.Flows = 0 },
		"too many flows":      func(c *Config) { c.Flows = MaxFlows + 1; c.Packets = MaxFlows + 1 },
		"flows > packets":     func(c *Config) { c.Flows = 101 },
		"flows > well-formed": func(c *Config) { c.Flows = 100; c.Malformed = 0.01 },
		"negative zipf":       func(c *Config) { c.Zipf = -1 },
		"NaN zipf":            func(c *Config) { c.Zipf = math.NaN() },
		"infinite zipf":       func(c *Config) { c.Zipf = math.Inf(1) },
		"ipv6 > 1":            func(c *Config) { c.IPv6 = 1.5 },
		"NaN ipv6":            func(c *Config) { c.IPv6 = math.NaN() },
		"negative malformed":  func(c *Config) { c.Malformed = -0.1 },
		"fragments > 1":       func(c *Config) { c.Fragments = 2 },
		"negative duration":   func(c *Config) { c.Duration = -time.Second },
		"format":              func(c *Config) { c.Format = "erf" },
		"snaplen too small":   func(c *Config) { c.SnapLen = MinSnapLen - 1 },
		"snaplen too large":   func(c *Config) { c.SnapLen = MaxSnapLen + 1 },
		"start before 1970":   func(c *Config) { c.Start = time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC) },
		"pcap past 2106":      func(c *Config) { c.Start = time.Date(2106, 3, 1, 0, 0, 0, 0, time.UTC) },
		"pcapng past 2262": func(c *Config) {
			c.Start = time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)
			c.Duration = 1 << 62
			c.Format = FormatPcapNG
		},
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("%+v: %v", ok, err)
	}
	for name, change := range bad {
		cfg := ok
		change(&cfg)
		err := cfg.Validate()
		var ce *ConfigError
		if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || ce.Problem == "" {
			t.Errorf("%s: Validate() = %v, want a *ConfigError matching ErrConfig", name, err)
		}
		if _, werr := Write(io.Discard, cfg); !errors.Is(werr, ErrConfig) {
			t.Errorf("%s: Write = %v, want ErrConfig", name, werr)
		}
	}
	for _, good := range []Config{
		{Packets: 100, Flows: 100},
		{Packets: 100, Flows: 95, Malformed: 0.05},
		{Packets: 1, Flows: 1, Zipf: 1e-9, IPv6: 1, Malformed: 0, Fragments: 1, SnapLen: MinSnapLen},
		{Packets: 10, Flows: 1, Start: time.Date(2106, 1, 1, 0, 0, 0, 0, time.UTC), Format: FormatPcapNG},
	} {
		if err := good.Validate(); err != nil {
			t.Errorf("%+v: %v", good, err)
		}
	}
}

// TestNoAllocsPerPacket: Write's allocations depend on the flows, not on
// the packets.
func TestNoAllocsPerPacket(t *testing.T) {
	allocs := func(packets int) float64 {
		cfg := Config{Packets: packets, Flows: 100, Zipf: 1, IPv6: 0.5, VLAN: true, Malformed: 0.1, Fragments: 0.1}
		return testing.AllocsPerRun(5, func() {
			if _, err := Write(io.Discard, cfg); err != nil {
				t.Fatal(err)
			}
		})
	}
	few, many := allocs(1000), allocs(20000)
	t.Logf("%v allocations for 1000 packets, %v for 20000", few, many)
	if many > few {
		t.Errorf("Write allocates %v times for 1000 packets, %v for 20000", few, many)
	}
}

func TestPermuteIndexIsBijection(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 7, 8, 9, 1000, 1 << 12} {
		seen := make([]bool, n)
		for i := range n {
			j := permuteIndex(i, n, 0xfeed)
			if j >= n || seen[j] {
				t.Fatalf("n=%d: %d -> %d, out of range or taken", n, i, j)
			}
			seen[j] = true
		}
	}
}

func TestSelectorTakesExactly(t *testing.T) {
	r := mix.NewPCG(1, 1)
	for _, c := range [][2]int{{0, 0}, {10, 0}, {10, 10}, {1000, 37}} {
		s := selector{left: c[0], want: c[1]}
		got := 0
		for range c[0] {
			if s.take(&r) {
				got++
			}
		}
		if got != c[1] {
			t.Errorf("selector(%d of %d) took %d", c[1], c[0], got)
		}
	}
}

func BenchmarkWrite(b *testing.B) {
	cfg := Config{Packets: 100000, Flows: 10000, Zipf: 1, IPv6: 0.3, VLAN: true, Duration: time.Minute}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Write(io.Discard, cfg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*cfg.Packets), "ns/packet")
}

func ExampleWrite() {
	var buf bytes.Buffer
	st, err := Write(&buf, Config{Packets: 2000, Flows: 300, IPv6: 0.2, Malformed: 0.05, Seed: 1})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d packets, %d malformed, %d flows\n", st.Packets, st.Malformed, st.Flows)
	fmt.Printf("distinct keys: src %d, dst %d, pair %d, 5tuple %d\n", st.Sources, st.Destinations, st.Pairs, st.FiveTuples)
	// Output:
	// 2000 packets, 100 malformed, 300 flows
	// distinct keys: src 48, dst 20, pair 150, 5tuple 300
}

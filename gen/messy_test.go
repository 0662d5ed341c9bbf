package gen

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math"
	"os"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/pcapfile"
)

// The messy options are off at their zero values and leave the bytes as
// they were; one interface given as 1 is the same as 0.
func TestMessyOffKeepsTheBytes(t *testing.T) {
	for _, format := range []string{FormatPcap, FormatPcapNG} {
		cfg := mixed
		cfg.Format = format
		a, sa := write(t, cfg)
		cfg.Interfaces = 1
		b, sb := write(t, cfg)
		if !bytes.Equal(a, b) || sa != sb || sa.Backward != 0 {
			t.Errorf("%s: Interfaces 1 changed the file, or Backward %d", format, sa.Backward)
		}
	}
}

// Jitter moves each packet back by its own amount in [0, Jitter], and
// changes nothing else: the frames are those of the capture without it,
// in the same order. The amounts are uniform: their mean lies within 6
// standard errors (Jitter/sqrt(12n)) of Jitter/2, and their extremes near
// 0 and Jitter. Backward counts the steps back exactly.
func TestJitter(t *testing.T) {
	const jitter = 3 * time.Second
	for _, format := range []string{FormatPcap, FormatPcapNG} {
		base := Config{Packets: 6000, Flows: 400, Duration: 10 * time.Minute, Seed: 11, Format: format, Malformed: 0.02}
		plain := readAll(t, must(write(t, base)), base)
		cfg := base
		cfg.Jitter = jitter
		file, st := write(t, cfg)
		pkts := readAll(t, file, cfg)
		if len(pkts) != len(plain) {
			t.Fatalf("%d packets, want %d", len(pkts), len(plain))
		}
		var sum float64
		lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
		backward := 0
		for i, p := range pkts {
			if !bytes.Equal(p.data, plain[i].data) {
				t.Fatalf("packet %d: the frame differs from the one without jitter", i+1)
			}
			d := plain[i].ci.Timestamp.Sub(p.ci.Timestamp)
			if d < 0 || d > jitter {
				t.Fatalf("packet %d moved back by %v, want 0 to %v", i+1, d, jitter)
			}
			sum += float64(d)
			lo, hi = min(lo, d), max(hi, d)
			if i > 0 && p.ci.Timestamp.Before(pkts[i-1].ci.Timestamp) {
				backward++
			}
		}
		n := float64(len(pkts))
		mean, se := sum/n, float64(jitter)/math.Sqrt(12*n)
		if math.Abs(mean-float64(jitter)/2) > 6*se {
			t.Errorf("%s: mean jitter %v, want %v ± %v", format, time.Duration(mean), jitter/2, time.Duration(6*se))
		}
		// The least of n uniforms exceeds jitter*10/n with probability
		// (1-10/n)^n < e^-10; the greatest likewise.
		if lo > jitter*10/time.Duration(n) || hi < jitter-jitter*10/time.Duration(n) {
			t.Errorf("%s: jitter from %v to %v, want it to span 0 to %v", format, lo, hi, jitter)
		}
		// With 100 ms between packets on average and 3 s of jitter, most
		// steps are random and about half go back.
		if backward != st.Backward || backward < len(pkts)/4 {
			t.Errorf("%s: %d steps back, Stats.Backward %d", format, backward, st.Backward)
		}
		cfg.Seed++
		other := readAll(t, must(write(t, cfg)), cfg)
		if other[len(other)/2].ci.Timestamp.Equal(pkts[len(pkts)/2].ci.Timestamp) {
			t.Errorf("%s: seeds %d and %d jitter alike", format, cfg.Seed-1, cfg.Seed)
		}
	}
}

// With several interfaces, each packet goes out on one drawn uniformly,
// stamped by its interface's clock: the time it has without interfaces,
// less i*InterfaceSkew/(n-1) on interface i. The frames and their order do
// not change. Interface counts lie within 6 standard deviations of n/k.
func TestInterfaces(t *testing.T) {
	const ifaces, skew = 3, 2 * time.Second
	base := Config{Packets: 6000, Flows: 400, Duration: time.Minute, Seed: 12, Format: FormatPcapNG, VLAN: true}
	plain := readAll(t, must(write(t, base)), base)
	cfg := base
	cfg.Interfaces, cfg.InterfaceSkew = ifaces, skew
	file, st := write(t, cfg)

	r, err := pcapgo.NewNgReader(bytes.NewReader(file), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	per := make([]int, ifaces)
	backward := 0
	var prev time.Time
	for i := 0; ; i++ {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			if i != len(plain) {
				t.Fatalf("%d packets, want %d", i, len(plain))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, plain[i].data) {
			t.Fatalf("packet %d: the frame differs from the one with one interface", i+1)
		}
		id := ci.InterfaceIndex
		if id < 0 || id >= ifaces {
			t.Fatalf("packet %d on interface %d", i+1, id)
		}
		per[id]++
		if want := plain[i].ci.Timestamp.Add(-skew * time.Duration(id) / (ifaces - 1)); !ci.Timestamp.Equal(want) {
			t.Fatalf("packet %d on interface %d at %v, want %v", i+1, id, ci.Timestamp, want)
		}
		if i > 0 && ci.Timestamp.Before(prev) {
			backward++
		}
		prev = ci.Timestamp
	}
	if r.NInterfaces() != ifaces {
		t.Fatalf("%d interfaces, want %d", r.NInterfaces(), ifaces)
	}
	for i := range ifaces {
		intf, err := r.Interface(i)
		if err != nil || intf.Name != "gen"+string(rune('0'+i)) {
			t.Errorf("interface %d: %+v, %v", i, intf, err)
		}
	}
	mean := float64(cfg.Packets) / ifaces
	sd := math.Sqrt(mean * (1 - 1.0/ifaces))
	for i, n := range per {
		if math.Abs(float64(n)-mean) > 6*sd {
			t.Errorf("interface %d has %d packets, want %.0f ± %.0f", i, n, mean, 6*sd)
		}
	}
	if backward != st.Backward || backward == 0 {
		t.Errorf("%d steps back, Stats.Backward %d", backward, st.Backward)
	}
}

// CutShort appends one record cut after its header and half its data: the
// file is the capture without it, byte for byte, then those bytes; a reader
// gets Packets records, then finds the file truncated inside the next one.
// With gzip the stream is whole and holds the same bytes.
func TestCutShort(t *testing.T) {
	for _, c := range []struct {
		format string
		gzip   bool
		hdr    int
	}{{FormatPcap, false, 16}, {FormatPcapNG, false, 28}, {FormatPcap, true, 16}, {FormatPcapNG, true, 28}} {
		base := Config{Packets: 500, Flows: 50, Seed: 13, Format: c.format, Gzip: c.gzip, IPv6: 0.5}
		whole, stWhole := write(t, base)
		cfg := base
		cfg.CutShort = true
		file, st := write(t, cfg)
		if st != stWhole {
			t.Errorf("%s gzip=%v: Stats %+v, want those without CutShort %+v", c.format, c.gzip, st, stWhole)
		}
		if c.gzip {
			whole, file = gunzip(t, whole), gunzip(t, file)
		}
		if !bytes.HasPrefix(file, whole) {
			t.Fatalf("%s gzip=%v: the file does not begin with the capture written without CutShort", c.format, c.gzip)
		}
		pkts := readAll(t, whole, Config{Format: c.format})
		last := pkts[len(pkts)-1].data
		if extra := len(file) - len(whole); extra != c.hdr+len(last)/2 {
			t.Errorf("%s gzip=%v: %d bytes of the cut record, want %d (header) + %d (half of %d)", c.format, c.gzip, extra, c.hdr, len(last)/2, len(last))
		}
		if !bytes.Equal(file[len(whole)+c.hdr:], last[:len(last)/2]) {
			t.Errorf("%s gzip=%v: the cut record does not hold the last packet's first bytes", c.format, c.gzip)
		}

		// Read back by the project's reader: the packets, then damage
		// in record Packets+1, at the end of the whole capture.
		path := t.TempDir() + "/cut"
		b, _ := write(t, cfg)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := pcapfile.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		var p capture.Packet
		for err = s.Next(&p); err == nil; err = s.Next(&p) {
			n++
		}
		var fe *pcapfile.Error
		if n != cfg.Packets || !errors.As(err, &fe) || !errors.Is(err, io.ErrUnexpectedEOF) ||
			fe.Record != int64(cfg.Packets+1) || fe.Offset != int64(len(whole)) {
			t.Errorf("%s gzip=%v: %d packets, then %v; want %d, then truncation in record %d at offset %d",
				c.format, c.gzip, n, err, cfg.Packets, cfg.Packets+1, len(whole))
		}
		s.Close()
	}
}

func TestValidateMessy(t *testing.T) {
	ok := Config{Packets: 100, Flows: 10, Format: FormatPcapNG}
	for name, change := range map[string]func(*Config){
		"negative jitter":          func(c *Config) { c.Jitter = -time.Second },
		"negative interfaces":      func(c *Config) { c.Interfaces = -1 },
		"too many interfaces":      func(c *Config) { c.Interfaces = MaxInterfaces + 1 },
		"interfaces in pcap":       func(c *Config) { c.Interfaces, c.Format = 2, FormatPcap },
		"skew with one interface":  func(c *Config) { c.InterfaceSkew = time.Second },
		"negative skew":            func(c *Config) { c.Interfaces, c.InterfaceSkew = 2, -time.Second },
		"jitter back before 1970":  func(c *Config) { c.Start, c.Jitter = time.Unix(5, 0), 6*time.Second },
		"skew back before 1970":    func(c *Config) { c.Start, c.Interfaces, c.InterfaceSkew = time.Unix(5, 0), 2, 6*time.Second },
		"jitter and skew overflow": func(c *Config) { c.Interfaces, c.Jitter, c.InterfaceSkew = 2, math.MaxInt64, math.MaxInt64 },
	} {
		cfg := ok
		change(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate() = %v, want ErrConfig", name, err)
		}
	}
	for _, good := range []Config{
		{Packets: 100, Flows: 10, Jitter: time.Hour},
		{Packets: 100, Flows: 10, Interfaces: 1},
		{Packets: 100, Flows: 10, Interfaces: MaxInterfaces, InterfaceSkew: time.Second, Format: FormatPcapNG},
		{Packets: 100, Flows: 10, Start: time.Unix(5, 0), Jitter: 3 * time.Second, Interfaces: 2, InterfaceSkew: 2 * time.Second, Format: FormatPcapNG},
		{Packets: 1, Flows: 1, CutShort: true, Gzip: true},
	} {
		if err := good.Validate(); err != nil {
			t.Errorf("%+v: %v", good, err)
		}
	}
}

func must(b []byte, _ Stats) []byte { return b }

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

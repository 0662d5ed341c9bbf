package soak

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

func smallConfig() Config {
	return Config{
		Start:      time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Window:     time.Hour,
		Lateness:   5 * time.Second,
		Windows:    12,
		Keys:       200,
		Stragglers: 10,
	}
}

// Index inverts Key, a window's keys are distinct, consecutive windows
// share half of them, and addresses outside a window are not its keys.
func TestKeyIndex(t *testing.T) {
	c := smallConfig()
	c.Keys = 1 << 12
	for _, h := range []int{0, 1, 719, 1 << 20} {
		n := c.keys(h)
		seen := map[uint32]bool{}
		for j := range n {
			a := c.Key(h, j)
			if seen[a] {
				t.Fatalf("window %d: key %d (%s) repeats an earlier one", h, j, addrString(a))
			}
			seen[a] = true
			if got, ok := c.Index(h, a); !ok || got != j {
				t.Fatalf("window %d: Index(Key(%d)) = %d, %v", h, j, got, ok)
			}
			if j >= c.Keys/2 {
				if b := c.Key(h+1, j-c.Keys/2); b != a {
					t.Fatalf("window %d key %d is %s, window %d key %d is %s: want the same", h, j, addrString(a), h+1, j-c.Keys/2, addrString(b))
				}
			}
		}
		if _, ok := c.Index(h, c.Key(h+2, c.Keys-10)); ok {
			t.Errorf("window %d: a key of window %d two ahead, past its half, is taken for its own", h, h+2)
		}
		if _, ok := c.Index(h, lateBase|7); ok {
			t.Errorf("window %d: a late packet's source is taken for a key", h)
		}
	}
}

func TestValidate(t *testing.T) {
	for name, edit := range map[string]func(*Config){
		"short window":        func(c *Config) { c.Window = time.Second },
		"no lateness":         func(c *Config) { c.Lateness = 0 },
		"lateness too long":   func(c *Config) { c.Lateness = c.Window / 2 },
		"unaligned start":     func(c *Config) { c.Start = c.Start.Add(time.Minute) },
		"no windows":          func(c *Config) { c.Windows = 0 },
		"too few keys":        func(c *Config) { c.Keys = MinKeys - 1 },
		"too many keys":       func(c *Config) { c.Keys = MaxKeys + 1 },
		"no stragglers":       func(c *Config) { c.Stragglers = 0 },
		"too many stragglers": func(c *Config) { c.Stragglers = (c.Keys-9)/4 + 1 },
		"start in 1999":       func(c *Config) { c.Start = time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC) },
		"start after 2106":    func(c *Config) { c.Start = time.Date(2107, 1, 1, 0, 0, 0, 0, time.UTC) },
	} {
		c := smallConfig()
		edit(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate = %v, want ErrConfig", name, err)
		}
		if _, err := c.Write(io.Discard, 0, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Write = %v, want ErrConfig", name, err)
		}
	}
	c := smallConfig()
	if err := c.Validate(); err != nil {
		t.Errorf("smallConfig: %v", err)
	}
}

// The truth Write returns is what the stream's construction gives, counted
// by hand from Write's description: window h has Keys - h%10 distinct
// keys, one packet per key plus a repeat for every key j with j%4 == 3,
// and every window after the first receives five late packets.
func TestWriteTruth(t *testing.T) {
	c := smallConfig()
	truth, err := c.Write(io.Discard, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(truth.Windows) != c.Windows+1 {
		t.Fatalf("%d windows, want %d", len(truth.Windows), c.Windows+1)
	}
	var total uint64
	for h, w := range truth.Windows {
		want := Window{Start: c.Start.Add(time.Duration(h) * time.Hour)}
		if h == c.Windows {
			want.Keys, want.Distinct = 3, 3
		} else {
			n := c.Keys - h%10
			want.Distinct = uint64(n)
			want.Keys = uint64(n)
			for j := range n - c.Stragglers { // stragglers have no repeat
				if j%4 == 3 {
					want.Keys++
				}
			}
		}
		if h > 0 {
			want.Late = 5
		}
		want.Packets = want.Keys + want.Late
		if w != want {
			t.Errorf("window %d: %+v, want %+v", h, w, want)
		}
		total += want.Packets
	}
	if truth.Packets != total {
		t.Errorf("%d packets, want %d", truth.Packets, total)
	}
}

// The bytes Write writes, decoded by gopacket (a reader independent of
// flowdedup's and of the generator): a nanosecond pcap of raw IPv4/UDP
// frames with valid checksums; the packets timed in window h carry
// exactly its keys; the late packets' sources are all outside every
// window; and replaying the documented lateness rule over the decoded
// times gives the counts of the truth.
func TestWriteDecoded(t *testing.T) {
	c := smallConfig()
	var buf bytes.Buffer
	truth, err := c.Write(&buf, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := pcapgo.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != layers.LinkTypeIPv4 || r.Resolution() != gopacket.TimestampResolutionNanosecond {
		t.Fatalf("link type %v, resolution %v: want raw IPv4 in nanoseconds", r.LinkType(), r.Resolution())
	}
	d, l := int64(c.Window), int64(c.Lateness)
	start := c.Start.UnixNano()
	index := func(t int64) int64 { // floor((t-start)/d)
		i := (t - start) / d
		if t < start && (t-start)%d != 0 {
			i--
		}
		return i
	}
	byTime := make([]map[uint32]bool, c.Windows+1)
	got := make([]Window, c.Windows+1)
	var newest int64
	var packets uint64
	for n := 0; ; n++ {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		packets++
		p := gopacket.NewPacket(data, layers.LayerTypeIPv4, gopacket.Default) // gopacket has no decoder registered for link type 228
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		udp, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if ip == nil || udp == nil || p.ErrorLayer() != nil {
			t.Fatalf("packet %d does not decode as IPv4/UDP: %v", n, p)
		}
		if ipChecksum(data[:20]) != 0 {
			t.Fatalf("packet %d: bad IPv4 header checksum", n)
		}
		src := uint32(ip.SrcIP[0])<<24 | uint32(ip.SrcIP[1])<<16 | uint32(ip.SrcIP[2])<<8 | uint32(ip.SrcIP[3])
		ts := ci.Timestamp.UnixNano()
		late := src&^lateMask == lateBase
		if w := index(ts); !late {
			if w < 0 || w > int64(c.Windows) {
				t.Fatalf("packet %d from %s at %v: outside the stream", n, ip.SrcIP, ci.Timestamp)
			}
			if _, ok := c.Index(int(w), src); !ok {
				t.Fatalf("packet %d from %s at %v: not a key of its window", n, ip.SrcIP, ci.Timestamp)
			}
			if byTime[w] == nil {
				byTime[w] = map[uint32]bool{}
			}
			byTime[w][src] = true
		}
		// The rule: a window closes once a time past its end plus the
		// lateness has been seen; a packet of a closed window is late, in
		// the window of the newest time.
		if n == 0 || ts > newest {
			newest = ts
		}
		if w := index(ts); w < index(newest-l) {
			if !late {
				t.Fatalf("packet %d from %s at %v: late, but not from a late source", n, ip.SrcIP, ci.Timestamp)
			}
			got[index(newest)].Late++
			got[index(newest)].Packets++
			continue
		} else if late {
			t.Fatalf("packet %d from %s at %v: a late source, but on time", n, ip.SrcIP, ci.Timestamp)
		}
		got[index(ts)].Packets++
		got[index(ts)].Keys++
	}
	if packets != truth.Packets {
		t.Errorf("%d packets decoded, the truth says %d", packets, truth.Packets)
	}
	for h := range got {
		got[h].Start = truth.Windows[h].Start
		got[h].Distinct = uint64(len(byTime[h]))
		if got[h] != truth.Windows[h] {
			t.Errorf("window %d decoded: %+v, the truth says %+v", h, got[h], truth.Windows[h])
		}
	}
}

// Write pauses at every boundary whose number is a multiple of every, with
// the output flushed up to the packet that closed the boundary's window
// and its late packets.
func TestWritePauses(t *testing.T) {
	c := smallConfig()
	var buf bytes.Buffer
	var calls []int
	_, err := c.Write(&buf, 4, func(closed int) error {
		calls = append(calls, closed)
		if (buf.Len()-24)%recordLen != 0 {
			t.Errorf("at %d: %d bytes written, not whole records", closed, buf.Len())
		}
		// The fifth packet from the end is the one at the boundary plus
		// the lateness; the late packets follow it.
		rec := buf.Bytes()[buf.Len()-6*recordLen:]
		ts := int64(binary.LittleEndian.Uint32(rec[0:]))*1e9 + int64(binary.LittleEndian.Uint32(rec[4:]))
		if want := c.Start.Add(time.Duration(closed)*c.Window + c.Lateness).UnixNano(); ts != want {
			t.Errorf("at %d: the packet before the late ones is at %v, want %v", closed, time.Unix(0, ts).UTC(), time.Unix(0, want).UTC())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{4, 8, 12}; !slices.Equal(calls, want) {
		t.Errorf("at was called with %v, want %v", calls, want)
	}
	stop := errors.New("stop")
	if _, err := c.Write(io.Discard, 4, func(int) error { return stop }); err != stop {
		t.Errorf("Write after at failed: %v, want at's error", err)
	}
}

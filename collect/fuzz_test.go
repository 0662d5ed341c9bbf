package collect

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/collect/collecttest"
	"github.com/flowdedup/flowdedup/collect/netflow"
	"github.com/flowdedup/flowdedup/export/ipfix"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil/testexporter"
	"github.com/flowdedup/flowdedup/internal/testutil/testframe"
	"github.com/flowdedup/flowdedup/record"
)

// writeSeeds rewrites FuzzDatagramToKey's seed corpus from the real
// exporters: go test ./collect -run TestWriteSeeds -write-seeds
var writeSeeds = flag.Bool("write-seeds", false, "write the real exporters' datagrams to testdata/fuzz/FuzzDatagramToKey")

// fuzzInput is FuzzDatagramToKey's input: a protocol byte (0 NetFlow and
// IPFIX, 1 sFlow), then datagrams each preceded by its length (2 bytes,
// big endian).
func fuzzInput(sflow bool, msgs [][]byte) []byte {
	b := []byte{0}
	if sflow {
		b[0] = 1
	}
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
		b = append(b, m...)
	}
	return b
}

// TestWriteSeeds captures what softflowd (v5, v9, IPFIX), pmacct's
// sfprobe and flowdedup's own IPFIX export send, and with -write-seeds
// writes them as FuzzDatagramToKey's seeds. Without the flag it checks
// that every one decodes to keys without an error.
func TestWriteSeeds(t *testing.T) {
	capture := filepath.Join("..", "testdata", "pcaps", "small.pcap")
	seeds := map[string][]byte{}
	for _, v := range []int{5, 9, 10} {
		seeds[fmt.Sprintf("softflowd-v%d", v)] = fuzzInput(false, testexporter.CaptureSoftflowd(t, capture, v))
	}
	sf := testexporter.CaptureSfprobe(t, capture, netip.MustParseAddr("192.0.2.1"), 3)
	seeds["sfprobe"] = fuzzInput(true, sf[:min(len(sf), 8)])
	seeds["flowdedup-ipfix"] = fuzzInput(false, flowdedupExport(t))
	for name, b := range seeds {
		st := decodeFuzz(t, b)
		for r := range st.errors {
			if n := st.errors[r].Load(); n != 0 {
				t.Errorf("%s: %s: %d", name, reasons[r], n)
			}
		}
		if st.records.Load() == 0 {
			t.Errorf("%s: no records", name)
		}
		if *writeSeeds {
			path := filepath.Join("testdata", "fuzz", "FuzzDatagramToKey", name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// flowdedupExport returns the datagrams flowdedup's IPFIX exporter
// (--export ipfix://) sends for a few 5-tuple records.
func flowdedupExport(t *testing.T) [][]byte {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e, err := ipfix.New(ipfix.Config{Network: "udp", Address: c.LocalAddr().String(), Kind: flow.Key5Tuple, ObservationDomain: 9})
	if err != nil {
		t.Fatal(err)
	}
	var recs []record.Record
	for i := range 40 {
		src := netip.AddrFrom4([4]byte{10, 9, 0, byte(i)})
		if i%4 == 0 {
			src = netip.AddrFrom16([16]byte{0x20, 1, 0xd, 0xb8, 15: byte(i)})
		}
		dst := netip.AddrFrom4([4]byte{10, 8, 0, 1})
		if src.Is6() {
			dst = netip.MustParseAddr("2001:db8::1")
		}
		recs = append(recs, record.Record{Key: flow.MakeKey(flow.Key5Tuple, src, dst, 6, uint16(1000+i), 443), TimeNs: exportTime.UnixNano() + int64(i)})
	}
	if err := e.Records(&record.Batch{Records: recs}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// As many datagrams as the exporter says it sent, each waited for
	// (not a pause of the wall clock taken as the end: on a loaded
	// machine loopback delivery may lag the send).
	sent := e.Stats().Messages
	if sent == 0 {
		t.Fatal("the exporter sent nothing")
	}
	var msgs [][]byte
	buf := make([]byte, 65536)
	c.SetReadDeadline(time.Now().Add(waitLimit)) // a last resort against a hang
	for range sent {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("datagram %d of the %d the exporter sent: %v", len(msgs)+1, sent, err)
		}
		msgs = append(msgs, append([]byte(nil), buf[:n]...))
	}
	return msgs
}

// decodeFuzz runs b (fuzzInput) through a source's decoder, as datagrams
// of one exporter address, and checks every packet it makes.
func decodeFuzz(t *testing.T, b []byte) *sourceStats { return decodeFuzzEach(t, b, nil) }

// fuzzDecap is --decap all, with which decodeFuzz keys every frame an sFlow
// sample carries, as the pipeline keys it with collect --decap all.
var fuzzDecap = func() flow.Decap {
	d, err := flow.ParseDecap("all")
	if err != nil {
		panic(err)
	}
	return d
}()

// decodeFuzzEach is decodeFuzz, calling each, when not nil, with every
// frame's error keyed through its tunnels (flow.Key.DecodeDecap, --decap
// all).
func decodeFuzzEach(t *testing.T, b []byte, each func(frame []byte, err error)) *sourceStats {
	if len(b) == 0 {
		return new(sourceStats)
	}
	sflow := b[0]&1 == 1
	reg := newRegistry(4, 2, time.Hour)
	st := new(sourceStats)
	budget := netflow.NewBudget(64 << 10)
	d := decoder{kind: flow.Key5Tuple, reg: reg, stats: st, lim: netflow.Limits{MaxTemplates: 8, MaxDomains: 4, Budget: budget}, ahead: int64(DefaultMaxClockAhead)}
	exps := newExporters(2, d.lim, st)
	from := netip.MustParseAddr("192.0.2.7")
	proto := NetFlow
	if sflow {
		proto = SFlow
	}
	// The datagrams come after the seeds' exporters sent them (2026),
	// from the same address and, a byte of the input says, from one of
	// four source ports (transport sessions).
	arrival := fuzzArrival.UnixNano()
	var p capture.Packet
	port := uint16(b[0] >> 1 & 3)
	b = b[1:]
	for len(b) >= 2 {
		n := min(int(binary.BigEndian.Uint16(b)), len(b)-2)
		msg := b[2 : 2+n]
		b = b[2+n:]
		e := exps.get(from, 1000+port, proto, arrival)
		if sflow {
			d.startSFlow(msg, e, arrival)
		} else {
			d.startNetFlow(msg, e, arrival)
		}
		for d.next(&p) {
			switch {
			case p.Key.IsValid() && (p.Key.Kind() != flow.Key5Tuple || p.Data != nil):
				t.Fatalf("a key %v of kind %v with %d bytes of data", p.Key, p.Key.Kind(), len(p.Data))
			case !p.Key.IsValid() && (len(p.Data) == 0 || len(p.Data) > len(msg) || p.WireLen < len(p.Data)):
				t.Fatalf("a frame of %d bytes (wire %d) from a datagram of %d", len(p.Data), p.WireLen, len(msg))
			case p.ObserverID == 0 || reg.name(p.ObserverID) == "":
				t.Fatalf("observer %d", p.ObserverID)
			case p.TimeNs < minSaneNs || p.TimeNs > arrival+d.ahead:
				t.Fatalf("a packet of time %d, arrival %d", p.TimeNs, arrival)
			}
			if p.Data == nil {
				continue
			}
			// The frame as the pipeline keys it, outermost and innermost:
			// a key of the kind, or an error of a reason it counts.
			var k flow.Key
			for _, dc := range []*flow.Decap{nil, &fuzzDecap} {
				err := k.DecodeDecap(p.Data, p.LinkType, flow.KeySrc, dc)
				switch {
				case err != nil && flow.Reason(err) == "other":
					t.Fatalf("a frame of %d bytes: error %v of no reason", len(p.Data), err)
				case err == nil && (!k.IsValid() || k.Kind() != flow.KeySrc):
					t.Fatalf("a frame of %d bytes: key %v", len(p.Data), k)
				case err != nil && k != (flow.Key{}):
					t.Fatalf("a frame of %d bytes: error %v with key %v", len(p.Data), err, k)
				}
				if dc != nil && each != nil {
					each(p.Data, err)
				}
			}
		}
		if budget.Used() > budget.Max() {
			t.Fatalf("templates of %d bytes, budget %d", budget.Used(), budget.Max())
		}
	}
	if n := len(reg.observers(arrival)); n > 4+1 { // and other
		t.Fatalf("%d observers, limit 4", n-1)
	}
	return st
}

// fuzzArrival is when FuzzDatagramToKey's datagrams come.
var fuzzArrival = exportTime.Add(time.Hour)

// FuzzDatagramToKey runs datagrams through the whole path from bytes to
// keys (the decoders, the exporter and observer tables, key making) and
// checks that nothing panics, every packet is a key of the kind or a frame
// within its datagram, every observer is named, and the tables stay within
// their bounds. Seeds: TestWriteSeeds.
func FuzzDatagramToKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) { decodeFuzz(t, b) })
}

// hostileSeeds are the datagrams of issue 25 as FuzzDatagramToKey's
// inputs: what made collect stop, merge exporters or grow.
func hostileSeeds() map[string][]byte {
	ipfixMax := ipfixMsg(1, 0, layoutA.template(256), layoutA.records(256, 1, 0, 1))
	binary.BigEndian.PutUint64(ipfixMax[len(ipfixMax)-8:], 1<<64-1)
	var truncated, domains [][]byte
	frame := testframe.UDP4Frame(netip.MustParseAddr("10.1.1.1"), netip.MustParseAddr("10.2.2.2"), 1, 2, 46)
	for i := range 40 {
		a := &collecttest.SFlow{Agent: netip.AddrFrom4([4]byte{10, 9, 0, byte(i)})}
		d := a.Datagram([]collecttest.SFlowSample{{Header: frame, Protocol: 1, FrameLength: 60}}, false)
		truncated = append(truncated, d[:len(d)-20])
		e := collecttest.Exporter{Version: 5, Boot: exportTime.Add(-time.Hour), Domain: uint32(i * 7919)}
		domains = append(domains, e.Encode(exportTime, collecttest.Flows(1, 1, exportTime), 1)...)
	}
	varOverrun := ipfixMsg(1, 0, ipfixSet(2, []byte{1, 44, 0, 2, 0, 82, 255, 255, 0, 8, 0, 4}),
		ipfixSet(300, []byte{2, 'e', 'n', 10, 0, 0, 1, 200, 'x', 10, 0, 0, 2}))
	layouts := fuzzInput(false, [][]byte{
		ipfixMsg(5, 0, layoutA.template(256), layoutA.records(256, 1, 0, 5)),
		ipfixMsg(5, 0, layoutB.template(256), layoutB.records(256, 2, 0, 5)),
	})
	layouts[0] |= 2 << 1 // another source port
	return map[string][]byte{
		"v5-before-epoch":     fuzzInput(false, [][]byte{v5Epoch()}),
		"ipfix-start-max":     fuzzInput(false, [][]byte{ipfixMax}),
		"ipfix-fast-clock":    fuzzInput(false, [][]byte{startsAt(1, 5, fuzzArrival.Add(30*time.Second))}),
		"sflow-truncated":     fuzzInput(true, truncated),
		"v5-random-domains":   fuzzInput(false, domains),
		"ipfix-var-overrun":   fuzzInput(false, [][]byte{varOverrun}),
		"ipfix-layouts-port2": layouts,
	}
}

// TestWriteHostileSeeds writes hostileSeeds to FuzzDatagramToKey's corpus
// with -write-seeds, and checks that they are there and that each is
// counted by its reason.
func TestWriteHostileSeeds(t *testing.T) {
	want := map[string]string{
		"v5-before-epoch": BadTime, "ipfix-start-max": BadTime, "sflow-truncated": "truncated", "ipfix-var-overrun": "truncated",
	}
	for name, b := range hostileSeeds() {
		path := filepath.Join("testdata", "fuzz", "FuzzDatagramToKey", name)
		if *writeSeeds {
			if err := os.WriteFile(path, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b) {
			t.Errorf("%s: not in the corpus (go test ./collect -run TestWriteHostileSeeds -write-seeds)", path)
		}
		st := decodeFuzz(t, b)
		if r, ok := want[name]; ok && st.errors[reasonIndex(r)].Load() == 0 {
			t.Errorf("%s: no %s counted", name, r)
		}
		if name == "ipfix-fast-clock" && st.startAhead.Load() != 5 {
			t.Errorf("%s: start_ahead %d, want 5", name, st.startAhead.Load())
		}
	}
}

func reasonIndex(reason string) int {
	for i, r := range reasons {
		if r == reason {
			return i
		}
	}
	panic(reason)
}

// tunnelSeeds are FuzzDatagramToKey's sFlow inputs whose samples carry
// tunnelled packets: every frame of the tunnel captures of
// scripts/mkdecap.py (scapy), a datagram per capture, some as raw IPv4 and
// IPv6 headers; and the same frames cut as an agent's header size cuts
// them (64 and 100 bytes), inside their tunnel headers.
func tunnelSeeds(t *testing.T) map[string][]byte {
	t.Helper()
	var whole, cut [][]byte
	for i, name := range []string{"erspan", "gre", "vxlan", "geneve", "gtpu", "ipip", "nested", "bad"} {
		a := &collecttest.SFlow{Agent: netip.AddrFrom4([4]byte{10, 9, 1, byte(i)})}
		var ss, cs []collecttest.SFlowSample
		for j, f := range decapFrames(t, name) {
			s := collecttest.SFlowSample{Header: f, Protocol: 1, FrameLength: uint32(len(f)), SamplingRate: 1}
			if j%2 == 1 && len(f) > 14 {
				switch binary.BigEndian.Uint16(f[12:14]) {
				case 0x0800:
					s.Header, s.Protocol = f[14:], 11
				case 0x86dd:
					s.Header, s.Protocol = f[14:], 12
				}
			}
			ss = append(ss, s)
			for _, n := range []int{64, 100} {
				if len(f) > n {
					cs = append(cs, collecttest.SFlowSample{Header: f[:n], Protocol: 1, FrameLength: uint32(len(f)), SamplingRate: 1})
				}
			}
		}
		whole = append(whole, a.Datagram(ss, false))
		cut = append(cut, a.Datagram(cs, false))
	}
	return map[string][]byte{"sflow-tunnels": fuzzInput(true, whole), "sflow-tunnels-cut": fuzzInput(true, cut)}
}

// decapFrames returns the frames of flow/testdata/decap/NAME.pcap.
func decapFrames(t *testing.T, name string) [][]byte {
	t.Helper()
	src, err := pcapfile.Open(filepath.Join("..", "flow", "testdata", "decap", name+".pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var frames [][]byte
	var p capture.Packet
	for {
		err := src.Next(&p)
		if errors.Is(err, io.EOF) {
			return frames
		}
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, append([]byte(nil), p.Data...))
	}
}

// TestWriteTunnelSeeds writes tunnelSeeds to FuzzDatagramToKey's corpus
// with -write-seeds and checks that they are there; that every sample of
// the tunnel captures but bad.pcap's is keyed through its tunnels (tshark
// finds an IP header inside each: internal/cli's TestCollectSFlowDecap),
// and bad.pcap's 26 are not; and that the cut ones are counted by reason,
// among them truncated (a 64-byte cut of vxlan.pcap's first frame: 14 +
// 20 + 8 + 8 bytes of Ethernet, IPv4, UDP and VXLAN, the inner Ethernet
// header's 14, and none of the inner IPv4 header) and tunnel_truncated.
func TestWriteTunnelSeeds(t *testing.T) {
	for name, b := range tunnelSeeds(t) {
		path := filepath.Join("testdata", "fuzz", "FuzzDatagramToKey", name)
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if *writeSeeds {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Errorf("%s: not in the corpus (go test ./collect -run TestWriteTunnelSeeds -write-seeds)", path)
		}
		byReason := map[string]int{}
		st := decodeFuzzEach(t, b, func(_ []byte, err error) { byReason[flow.Reason(err)]++ })
		for r := range st.errors {
			if n := st.errors[r].Load(); n != 0 {
				t.Errorf("%s: %s: %d", name, reasons[r], n)
			}
		}
		switch name {
		case "sflow-tunnels":
			frames := 0
			for _, c := range []string{"erspan", "gre", "vxlan", "geneve", "gtpu", "ipip", "nested"} {
				frames += len(decapFrames(t, c))
			}
			if byReason["ok"] != frames || byReason["ok"]+26 != int(st.records.Load()) {
				t.Errorf("%s: %v of %d samples; want %d keyed and bad.pcap's 26 not", name, byReason, st.records.Load(), frames)
			}
		case "sflow-tunnels-cut":
			if byReason["tunnel_truncated"] == 0 || byReason["truncated"] == 0 {
				t.Errorf("%s: %v: want tunnel_truncated and truncated among them", name, byReason)
			}
		}
	}
}

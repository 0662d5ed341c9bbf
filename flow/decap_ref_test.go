package flow

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/pcapgo"
)

// refDecodeDecap is decodeDecap as it was before it keyed the innermost
// header from what ipPayload found (commit 0835f05): it looked for a tunnel
// with refTunnel, which read the IP header with refIPPayload, then parsed
// the header holding none again with parseIPv4 or parseIPv6. It is the
// reference the differential tests hold decodeDecap to; the tunnel headers'
// own decoders (gre, vxlan, geneve, gtpu) were not changed and are shared.
func (k *Key) refDecodeDecap(frame []byte, lt LinkType, kind KeyKind, d *Decap) (int, error) {
	if !kind.IsValid() {
		*k = Key{}
		return 0, ErrBadKind
	}
	*k = Key{kind: kind}
	w := decapWalk{d: d}
	b, v, err := linkIP(frame, lt)
	for err == nil {
		var inner []byte
		var iv uint8
		var ok bool
		inner, iv, ok, err = w.refTunnel(b, v)
		if !ok || err != nil {
			break
		}
		b, v = inner, iv
	}
	if err == nil {
		if v == 4 {
			err = k.parseIPv4(b)
		} else {
			err = k.parseIPv6(b)
		}
	}
	if err != nil {
		*k = Key{}
		return w.levels, err
	}
	if w.hasSeg && !d.NoSegment {
		k.flags |= flagSeg
		k.seg = w.seg
	}
	return w.levels, nil
}

// refIPPayload is ipPayload before it counted extension headers.
func refIPPayload(b []byte, v uint8) (uint8, []byte, bool) {
	if v == 4 {
		if len(b) < 20 || b[0]>>4 != 4 {
			return 0, nil, false
		}
		hlen := int(b[0]&0x0f) * 4
		if hlen < 20 || len(b) < hlen {
			return 0, nil, false
		}
		if total := int(binary.BigEndian.Uint16(b[2:4])); total != 0 {
			if total < hlen {
				return 0, nil, false
			}
			if total < len(b) {
				b = b[:total]
			}
		}
		if binary.BigEndian.Uint16(b[6:8])&0x1fff != 0 {
			return 0, nil, false
		}
		return b[9], b[hlen:], true
	}
	if len(b) < 40 || b[0]>>4 != 6 {
		return 0, nil, false
	}
	if plen := int(binary.BigEndian.Uint16(b[4:6])); plen != 0 && 40+plen < len(b) {
		b = b[:40+plen]
	}
	next, p := b[6], b[40:]
	for walked := 0; ; walked++ {
		hlen := 0
		switch next {
		case ip6HopByHop, ip6Routing, ip6DestOpts:
			if len(p) < 2 {
				return 0, nil, false
			}
			hlen = (int(p[1]) + 1) * 8
		case ip6Fragment:
			hlen = 8
			if len(p) < hlen || binary.BigEndian.Uint16(p[2:4])&0xfff8 != 0 {
				return 0, nil, false
			}
		default:
			return next, p, true
		}
		if walked == MaxIPv6Headers || len(p) < hlen {
			return 0, nil, false
		}
		next = p[0]
		p = p[hlen:]
	}
}

// refTunnel is tunnel before it took ipPayload's answer from its caller.
func (w *decapWalk) refTunnel(b []byte, v uint8) (inner []byte, iv uint8, ok bool, err error) {
	proto, p, ok := refIPPayload(b, v)
	if !ok {
		return nil, 0, false, nil
	}
	d := w.d
	switch proto {
	case protoIPIP, protoIPv6:
		if d.Tunnels&TunnelIPIP == 0 {
			return nil, 0, false, nil
		}
		if err := w.enter(); err != nil {
			return nil, 0, true, err
		}
		if proto == protoIPIP {
			return p, 4, true, nil
		}
		return p, 6, true, nil
	case protoGRE:
		if d.Tunnels&(TunnelGRE|TunnelERSPAN) == 0 {
			return nil, 0, false, nil
		}
		if err := w.enter(); err != nil {
			return nil, 0, true, err
		}
		return w.gre(p)
	case protoUDP:
		if len(p) < 4 {
			return nil, 0, false, nil
		}
		sport, dport := binary.BigEndian.Uint16(p[0:2]), binary.BigEndian.Uint16(p[2:4])
		var t Tunnels
		switch {
		case d.Tunnels&TunnelVXLAN != 0 && dport != 0 && (dport == d.VXLANPorts[0] || dport == d.VXLANPorts[1]):
			t = TunnelVXLAN
		case d.Tunnels&TunnelGeneve != 0 && dport != 0 && dport == d.GenevePort:
			t = TunnelGeneve
		case d.Tunnels&TunnelGTPU != 0 && d.GTPUPort != 0 && (dport == d.GTPUPort || sport == d.GTPUPort):
			t = TunnelGTPU
		default:
			return nil, 0, false, nil
		}
		if err := w.enter(); err != nil {
			return nil, 0, true, err
		}
		if len(p) < 8 {
			return nil, 0, true, ErrTunnelTruncated
		}
		p = p[8:]
		switch t {
		case TunnelVXLAN:
			inner, iv, err = w.vxlan(p)
		case TunnelGeneve:
			inner, iv, err = w.geneve(p)
		default:
			inner, iv, err = gtpu(p)
		}
		return inner, iv, true, err
	}
	return nil, 0, false, nil
}

// refDecaps are the Decaps the differential tests compare under: every
// kind, each kind alone, gopacket's ports, no segments, odd ports.
var refDecaps = func() []Decap {
	ds := []Decap{decapAll, decapGopacket, mustDecap("all,novni"), mustDecap("all,vxlan=2152+6081,geneve=4789,gtpu=4789")}
	for _, n := range tunnelNames {
		ds = append(ds, mustDecap(n))
	}
	return ds
}()

// checkDecapRef fails t unless decodeDecap and refDecodeDecap give frame
// the same key, error (and so reason) and number of tunnels, for every key
// kind (and two invalid ones) and every Decap of refDecaps. It also checks
// that frame is left as it was.
func checkDecapRef(t *testing.T, what string, frame []byte, lt LinkType) {
	t.Helper()
	orig := bytes.Clone(frame)
	for i := range refDecaps {
		d := &refDecaps[i]
		for kind := KeyKind(0); kind <= Key5Tuple+1; kind++ {
			var k, rk Key
			levels, err := k.decodeDecap(frame, lt, kind, d)
			rlevels, rerr := rk.refDecodeDecap(frame, lt, kind, d)
			if k != rk || err != rerr || levels != rlevels || Reason(err) != Reason(rerr) {
				t.Fatalf("%s (%v, %d bytes) %v, --decap %v: key %v, %v (%s), %d levels; reference %v, %v (%s), %d levels",
					what, lt, len(frame), kind, d, k, err, Reason(err), levels, rk, rerr, Reason(rerr), rlevels)
			}
		}
	}
	if !bytes.Equal(frame, orig) {
		t.Fatalf("%s: the frame was modified", what)
	}
}

// readCapture returns the frames and link type of a pcap, pcapng or
// gzipped pcap file.
func readCapture(t testing.TB, path string) ([][]byte, LinkType) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		r = zr
	}
	var frames [][]byte
	var lt LinkType
	if strings.HasSuffix(path, ".pcapng") {
		nr, err := pcapgo.NewNgReader(r, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		lt = LinkType(nr.LinkType())
		for {
			data, _, err := nr.ReadPacketData()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: frame %d: %v", path, len(frames)+1, err)
			}
			frames = append(frames, data)
		}
	} else {
		pr, err := pcapgo.NewReader(r)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		lt = LinkType(pr.LinkType())
		for {
			data, _, err := pr.ReadPacketData()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: frame %d: %v", path, len(frames)+1, err)
			}
			frames = append(frames, data)
		}
	}
	if len(frames) == 0 {
		t.Fatalf("%s: no frames", path)
	}
	return frames, lt
}

// refCapture is the frames of one capture, and their link type.
type refCapture struct {
	name   string
	lt     LinkType
	frames [][]byte
	tunnel bool // a capture of tunnels: every truncation is checked
}

// refCaptures reads the captures the differential tests go through:
// flow/testdata/decap, the real tunnel captures of testdata/tunnels and the
// generator's captures of testdata/pcaps.
func refCaptures(t testing.TB) []refCapture {
	t.Helper()
	var cs []refCapture
	for _, glob := range []string{"testdata/decap/*.pcap", "../testdata/tunnels/*.pcap", "../testdata/pcaps/*.pcap*"} {
		paths, err := filepath.Glob(glob)
		if err != nil || len(paths) == 0 {
			t.Fatalf("%s: no captures (%v)", glob, err)
		}
		for _, p := range paths {
			frames, lt := readCapture(t, p)
			cs = append(cs, refCapture{p, lt, frames, !strings.Contains(p, "pcaps")})
		}
	}
	return cs
}

// refCrafted are frames that reach the edges of the change: IPv6 extension
// headers before AH headers, up to and past MaxIPv6Headers together (which
// withTransport counts from the IPv6 header), tunnels after them, IPv4 AH,
// first and non-first fragments, a tunnel kind not decapsulated holding a
// packet, padding past the IP length.
func refCrafted() [][]byte {
	var fs [][]byte
	v6 := func(next uint8, payload []byte) []byte {
		return ether(etherTypeIPv6, ip6{src: "2001:db8::1", dst: "2001:db8::2", next: next}.packet(payload))
	}
	v4 := func(h ip4, payload []byte) []byte {
		h.src, h.dst = "192.0.2.1", "192.0.2.2"
		return ether(etherTypeIPv4, h.packet(payload))
	}
	inner4 := ip4{src: "10.0.0.1", dst: "10.0.0.2", proto: protoTCP}.packet(tcp(1, 2))
	for ext := 0; ext <= MaxIPv6Headers+1; ext++ {
		for ahs := 0; ahs+ext <= MaxIPv6Headers+2; ahs++ {
			for _, last := range []struct {
				proto   uint8
				payload []byte
			}{{protoUDP, udp(1000, 53, nil)}, {protoGRE, cat(be16(0), be16(etherTypeIPv4), inner4)}, {protoIPIP, inner4}} {
				// Build from the inside out: the AH headers, then the
				// destination options before them.
				next, b := last.proto, last.payload
				for range ahs {
					b = cat(ah(next, 1), b)
					next = protoAH
				}
				for range ext {
					b = cat(opts6(next, 0), b)
					next = ip6DestOpts
				}
				fs = append(fs, v6(next, b))
			}
		}
	}
	fs = append(fs,
		v6(ip6Fragment, cat(frag6(protoUDP, 0, true), udp(1, 4789, nil))),
		v6(ip6Fragment, cat(frag6(protoUDP, 5, false), udp(1, 2, nil))),
		v6(ip6HopByHop, cat(opts6(ip6Fragment, 0), frag6(protoAH, 0, true), ah(protoTCP, 2), tcp(7, 8))),
		v4(ip4{proto: protoAH}, cat(ah(protoUDP, 1), udp(3, 4, nil))),
		v4(ip4{proto: protoAH}, cat(ah(protoGRE, 1), be16(0), be16(etherTypeIPv4), inner4)),
		v4(ip4{proto: protoUDP, fragOff: 3}, udp(1, 4789, nil)),
		v4(ip4{proto: protoUDP, moreFrags: true}, udp(1, 6081, nil)),
		v4(ip4{proto: protoUDP, options: make([]byte, 8)}, udp(9, 10, nil)),
		v4(ip4{proto: protoTCP, totalLen: 40}, cat(tcp(5, 6), make([]byte, 30))),
		v4(ip4{proto: protoGRE}, cat(be16(0), be16(etherTypeERSPAN), inner4)),
		v4(ip4{proto: protoICMP}, icmpEcho(8)),
		v4(ip4{proto: protoIPv6}, ip6{src: "::1", dst: "::2", next: ip6DestOpts}.packet(cat(opts6(protoAH, 0), ah(protoUDP, 1), udp(1, 2, nil)))),
	)
	return fs
}

// TestDecapMatchesReference: decodeDecap gives every frame of the captures
// and refCrafted, every truncation of the tunnel captures' frames and of
// refCrafted, and each of those without its Ethernet header as a raw IP
// packet, the key, error and number of tunnels of the reference, today's
// algorithm before the change, under every Decap of refDecaps.
func TestDecapMatchesReference(t *testing.T) {
	checked := 0
	check := func(what string, frame []byte, lt LinkType, cuts bool) {
		n := len(frame)
		if cuts {
			n = 0
		}
		for l := len(frame); l >= n; l-- {
			checkDecapRef(t, what, frame[:l], lt)
			if lt == LinkEthernet && l >= 14 {
				checkDecapRef(t, what+" as raw IP", frame[14:l], LinkRaw)
			}
			checked++
		}
	}
	for _, c := range refCaptures(t) {
		for i, f := range c.frames {
			check(c.name+" frame "+itoa(i+1), f, c.lt, c.tunnel)
		}
	}
	for i, f := range refCrafted() {
		check("crafted frame "+itoa(i+1), f, LinkEthernet, true)
	}
	t.Logf("%d frames and truncations", checked)
}

func itoa(i int) string { return strconv.Itoa(i) }

// FuzzDecapReference: decodeDecap is the reference, today's algorithm
// before the change, on any input; seeded with the tunnel captures' frames,
// refCrafted and a few truncations of each.
func FuzzDecapReference(f *testing.F) {
	for _, c := range refCaptures(f) {
		if !c.tunnel {
			continue
		}
		li := fuzzLinkIndex(c.lt)
		for _, fr := range c.frames {
			f.Add(li, fr)
		}
	}
	for _, fr := range refCrafted() {
		f.Add(fuzzLinkIndex(LinkEthernet), fr)
		f.Add(fuzzLinkIndex(LinkEthernet), fr[:len(fr)-3])
		f.Add(fuzzLinkIndex(LinkRaw), fr[14:])
	}
	f.Fuzz(func(t *testing.T, li uint8, frame []byte) {
		checkDecapRef(t, "input", frame, fuzzLinkTypes[int(li)%len(fuzzLinkTypes)])
	})
}

// BenchmarkDecapReference: decodeDecap against the reference (the
// algorithm before it keyed the innermost header from ipPayload's answer)
// in one binary, so that both run under the same load; with Decode on the
// same frames, the cost of looking for tunnels in frames without one.
// Sub-benchmarks are algorithm/frame/kind.
func BenchmarkDecapReference(b *testing.B) {
	frames := []struct {
		name  string
		frame []byte
	}{
		{"eth-ipv4-tcp", ether(etherTypeIPv4, tcp4IP)},
		{"eth-ipv6-udp", ether(etherTypeIPv6, ip6{src: "2001:db8::1", dst: "2001:db8::2", next: protoUDP}.packet(udp(1000, 53, nil)))},
		{"gre-ipv4", readPcap(b, "testdata/decap/gre.pcap")[0]},
		{"vxlan", readPcap(b, "testdata/decap/vxlan.pcap")[0]},
	}
	algos := []struct {
		name string
		fn   func(k *Key, frame []byte, kind KeyKind) error
	}{
		{"decode", func(k *Key, frame []byte, kind KeyKind) error { return k.Decode(frame, LinkEthernet, kind) }},
		{"reference", func(k *Key, frame []byte, kind KeyKind) error {
			_, err := k.refDecodeDecap(frame, LinkEthernet, kind, &decapAll)
			return err
		}},
		{"decap", func(k *Key, frame []byte, kind KeyKind) error {
			_, err := k.decodeDecap(frame, LinkEthernet, kind, &decapAll)
			return err
		}},
	}
	for _, f := range frames {
		for _, kind := range []KeyKind{KeySrc, Key5Tuple} {
			for _, a := range algos {
				if a.name == "decode" && !strings.HasPrefix(f.name, "eth-") {
					continue // Decode does not decapsulate: no comparison
				}
				b.Run(a.name+"/"+f.name+"/"+kind.String(), func(b *testing.B) {
					b.ReportAllocs()
					var k Key
					var err error
					for b.Loop() {
						err = a.fn(&k, f.frame, kind)
					}
					if err != nil {
						b.Fatal(err)
					}
					sinkKey = k
				})
			}
		}
	}
}

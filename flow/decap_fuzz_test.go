package flow

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// decapGopacket lists the tunnels gopacket decodes, on the ports it
// decodes them on: it has no VXLAN on 8472. It reads ERSPAN types I and II,
// not III.
var decapGopacket = Decap{
	Tunnels:    TunnelsAll,
	VXLANPorts: [2]uint16{DefaultVXLANPort, 0},
	GenevePort: DefaultGenevePort,
	GTPUPort:   DefaultGTPUPort,
}

// FuzzDecap checks that DecodeDecap never panics nor modifies its input,
// that where it recognised no tunnel it is Decode, that the four key kinds
// agree, that every error has a reason, and that on Ethernet frames its
// innermost header and VNI are gopacket's wherever gopacket decodes the same
// tunnels by the same rules.
func FuzzDecap(f *testing.F) {
	for _, name := range append(decapGood, "bad") {
		for _, frame := range readPcap(f, filepath.Join("testdata", "decap", name+".pcap")) {
			f.Add(fuzzLinkIndex(LinkEthernet), frame)
			f.Add(fuzzLinkIndex(LinkRaw), frame[14:]) // the same without the Ethernet header
		}
	}
	f.Fuzz(func(t *testing.T, li uint8, frame []byte) {
		lt := fuzzLinkTypes[int(li)%len(fuzzLinkTypes)]
		orig := bytes.Clone(frame)
		var keys [Key5Tuple + 1]Key
		var errs [Key5Tuple + 1]error
		for kind := KeySrc; kind <= Key5Tuple; kind++ {
			var k Key
			levels, err := k.decodeDecap(frame, lt, kind, &decapAll)
			if levels == 0 {
				want, werr := Parse(frame, lt, kind)
				if k != want || err != werr {
					t.Fatalf("%v, no tunnel: DecodeDecap = %v, %v; Decode = %v, %v", kind, k, err, want, werr)
				}
			}
			if levels > MaxDecapLevels {
				t.Fatalf("%d levels", levels)
			}
			if err != nil && (k != Key{} || Reason(err) == "other") {
				t.Fatalf("%v: error %v (%s) with key %v", kind, err, Reason(err), k)
			}
			if err == nil {
				checkBinaryRoundTrip(t, k)
				if k.Kind() != kind {
					t.Fatalf("kind %v, want %v", k.Kind(), kind)
				}
			}
			keys[kind], errs[kind] = k, err
		}
		if !bytes.Equal(frame, orig) {
			t.Fatal("DecodeDecap modified the frame")
		}
		// src, dst and pair need the same headers.
		if errs[KeySrc] != errs[KeyPair] || errs[KeyDst] != errs[KeyPair] {
			t.Fatalf("errors differ by kind: src %v, dst %v, pair %v", errs[KeySrc], errs[KeyDst], errs[KeyPair])
		}
		pair := keys[KeyPair]
		if errs[KeyPair] == nil {
			seg, hasSeg := pair.Segment()
			for kind := KeySrc; kind <= Key5Tuple; kind++ {
				k := keys[kind]
				if errs[kind] != nil {
					continue
				}
				s, ok := k.Segment()
				if (kind != KeyDst && k.Src() != pair.Src()) || (kind != KeySrc && k.Dst() != pair.Dst()) || s != seg || ok != hasSeg {
					t.Fatalf("%v key %v disagrees with the pair %v", kind, k, pair)
				}
			}
		} else if errs[Key5Tuple] == nil {
			t.Fatalf("5-tuple %v where the pair fails: %v", keys[Key5Tuple], errs[KeyPair])
		}
		if lt == LinkEthernet {
			var k Key
			if err := k.DecodeDecap(frame, lt, KeyPair, &decapGopacket); err == nil {
				compareDecapGopacket(t, frame, k)
			}
		}
	})
}

// compareDecapGopacket decodes frame with gopacket and checks that k, the
// pair DecodeDecap keyed with decapGopacket, holds its innermost IP header's
// addresses (before any ICMP) and the VNI of the last VXLAN or Geneve layer
// before it. It checks nothing where gopacket decodes by other rules; each
// such case is commented.
func compareDecapGopacket(t *testing.T, frame []byte, k Key) bool {
	t.Helper()
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	var src, dst netip.Addr
	var vni uint32
	var hasVNI, segAtIP bool
	var segVNI uint32
	var prev gopacket.Layer
	ipPayload := -1 // the bytes after the last IPv4 header, by its lengths
layers:
	for _, l := range pkt.Layers() {
		if _, failed := l.(*gopacket.DecodeFailure); failed && prev != nil && qinqOld(prev) {
			// Skip: gopacket does not know 0x9100 VLAN tags.
			return false
		}
		if _, failed := l.(*gopacket.DecodeFailure); failed && prev != nil && ipLayer(prev) {
			// Skip: gopacket refused what follows an IP header by
			// checks Decode does not make (the type-length encoding of
			// IPv6 options, ...), so it went no deeper.
			return false
		}
		if _, failed := l.(*gopacket.DecodeFailure); failed && prev != nil && tunnelLayer(prev) {
			// Skip: gopacket failed to decode a tunnel's header, or
			// the frame in it, by checks of its own (GTP-U's length
			// field against the bytes captured, ...), where DecodeDecap
			// goes by the bytes there are, as it does for IP lengths.
			return false
		}
		before := prev
		prev = l
		switch l := l.(type) {
		case *layers.MPLS:
			// Skip: MPLS right after an IP header is MPLS-in-IP
			// (protocol 137), which DecodeDecap does not open.
			switch before.(type) {
			case *layers.IPv4, *layers.IPv6:
				return false
			}
		case *layers.IPv4:
			// Skip: gopacket does not decode past an IPv4 fragment, first
			// or not, nor past options it finds malformed (leaving the
			// addresses unset); DecodeDecap decapsulates a first fragment
			// and skips options by the header length.
			if l.Flags&layers.IPv4MoreFragments != 0 || l.FragOffset != 0 || l.SrcIP == nil {
				return false
			}
			src, _ = netip.AddrFromSlice(l.SrcIP)
			dst, _ = netip.AddrFromSlice(l.DstIP)
			segVNI, segAtIP = vni, hasVNI
			ipPayload = len(l.Payload)
		case *layers.IPv6:
			if l.SrcIP == nil {
				return false // Skip: gopacket failed the header (DecodeDecap's error, or a layer it does not open)
			}
			if l.Length == 0 {
				// Skip: gopacket refuses a payload length of 0 without a
				// Hop-by-Hop header; Decode and DecodeDecap take it for a
				// jumbogram or a GSO capture and go by the bytes captured.
				return false
			}
			src, _ = netip.AddrFromSlice(l.SrcIP)
			dst, _ = netip.AddrFromSlice(l.DstIP)
			segVNI, segAtIP = vni, hasVNI
			ipPayload = -1 // extension headers may come between
			if l.NextHeader == layers.IPProtocolUDP {
				ipPayload = len(l.Payload)
			}
		case *layers.UDP:
			// Skip: gopacket bounds the UDP payload by the UDP length;
			// DecodeDecap, as Decode, by the IP lengths only.
			if ipPayload >= 0 && int(l.Length) < ipPayload {
				return false
			}
			// Skip: gopacket picks the next layer by the destination
			// port, then by the source port, any port it knows (DNS,
			// VXLAN, ...); DecodeDecap takes the destination port for
			// VXLAN and Geneve, either for GTP-U.
			if gopacketUDPNext(l) != decapUDPNext(l) {
				return false
			}
		case *layers.GRE:
			// Skip: gopacket does not know ERSPAN type III.
			if l.Protocol == etherTypeERSPAN3 {
				return false
			}
		case *layers.VXLAN:
			vni, hasVNI = l.VNI, true
		case *layers.Geneve:
			// Skip: gopacket reads options past the header's option
			// length when the last one claims more; the length bounds
			// them (RFC 8926), as for DecodeDecap.
			if len(l.Contents) != 8+int(l.OptionsLength) {
				return false
			}
			vni, hasVNI = l.VNI, true
		case *layers.ICMPv4, *layers.ICMPv6:
			break layers
		case *layers.Ethernet, *layers.Dot1Q, *layers.PPPoE, *layers.PPP, *layers.ERSPANII,
			*layers.IPv6HopByHop, *layers.IPv6Routing, *layers.IPv6Destination, *layers.GTPv1U,
			*gopacket.Payload, *gopacket.DecodeFailure, *layers.TCP, *layers.SCTP, *layers.UDPLite:
			// The layers both decode alike, and the ends.
		default:
			// Skip: a layer DecodeDecap does not decapsulate, which
			// gopacket may decode past (IPsec AH, an IPv6 fragment
			// header, GUE, EtherIP, LLC, ...).
			if src.IsValid() {
				// After the innermost header (DNS, ...): nothing
				// more to compare to.
				if !layerMayHoldIP(l.LayerType()) {
					break layers
				}
			}
			return false
		}
	}
	if !src.IsValid() {
		t.Fatalf("DecodeDecap keyed %v; gopacket decoded no IP header\n%v", k, pkt)
	}
	want := MakeKey(KeyPair, src, dst, 0, 0, 0)
	if segAtIP {
		want = want.WithSegment(segVNI)
	}
	if k != want {
		t.Fatalf("DecodeDecap: %v; gopacket's innermost: %v\n%v", k, want, pkt)
	}
	return true
}

// qinqOld reports whether l is an Ethernet header or VLAN tag followed by
// a pre-802.1ad S-tag (0x9100).
func qinqOld(l gopacket.Layer) bool {
	switch l := l.(type) {
	case *layers.Ethernet:
		return l.EthernetType == etherTypeQinQOld
	case *layers.Dot1Q:
		return l.Type == etherTypeQinQOld
	}
	return false
}

// ipLayer reports whether l is an IP header or an IPv6 extension header.
func ipLayer(l gopacket.Layer) bool {
	switch l.(type) {
	case *layers.IPv4, *layers.IPv6, *layers.IPv6HopByHop, *layers.IPv6Destination, *layers.IPv6Routing:
		return true
	}
	return false
}

// tunnelLayer reports whether l is a tunnel header, or a UDP header of a
// tunnel DecodeDecap decapsulates, after which gopacket decodes the tunnel.
func tunnelLayer(l gopacket.Layer) bool {
	switch l := l.(type) {
	case *layers.GRE, *layers.ERSPANII, *layers.VXLAN, *layers.Geneve, *layers.GTPv1U:
		return true
	case *layers.UDP:
		return decapUDPNext(l) != gopacket.LayerTypePayload
	}
	return false
}

// gopacketUDPNext is the tunnel layer gopacket decodes after u, or
// LayerTypePayload for none.
func gopacketUDPNext(u *layers.UDP) gopacket.LayerType {
	lt := u.DstPort.LayerType()
	if lt == gopacket.LayerTypePayload {
		lt = u.SrcPort.LayerType()
	}
	switch lt {
	case layers.LayerTypeVXLAN, layers.LayerTypeGeneve, layers.LayerTypeGTPv1U:
		return lt
	}
	return gopacket.LayerTypePayload
}

// decapUDPNext is the tunnel DecodeDecap decapsulates after u with
// decapGopacket (written from the package documentation), as a gopacket
// layer type.
func decapUDPNext(u *layers.UDP) gopacket.LayerType {
	switch {
	case u.DstPort == DefaultVXLANPort:
		return layers.LayerTypeVXLAN
	case u.DstPort == DefaultGenevePort:
		return layers.LayerTypeGeneve
	case u.DstPort == DefaultGTPUPort || u.SrcPort == DefaultGTPUPort:
		return layers.LayerTypeGTPv1U
	}
	return gopacket.LayerTypePayload
}

// layerMayHoldIP reports whether a gopacket layer of type t may carry an IP
// packet that DecodeDecap would not decapsulate.
func layerMayHoldIP(t gopacket.LayerType) bool {
	switch t {
	case layers.LayerTypeIPSecAH, layers.LayerTypeIPv6Fragment, gopacket.LayerTypeFragment,
		layers.LayerTypeAGUEVar0, layers.LayerTypeAGUEVar1, layers.LayerTypeEtherIP, layers.LayerTypeLLC, layers.LayerTypeSNAP:
		return true
	}
	return false
}

// TestDecapMatchesGopacket runs the gopacket comparison of FuzzDecap over
// the captures, and checks that it compared the frames of each tunnel kind
// gopacket decodes.
func TestDecapMatchesGopacket(t *testing.T) {
	// The frames gopacket decodes by other rules, by file and frame
	// number: a non-first fragment (gre 12), an IPv6 Fragment header (ipip
	// 6), ERSPAN type III (erspan 4 and 5). The VXLAN frames on 8472 are
	// compared: neither decapsulates them (decapGopacket as gopacket).
	skip := map[string][]int{"gre": {12}, "ipip": {6}, "erspan": {4, 5}}
	for _, name := range []string{"gre", "erspan", "vxlan", "geneve", "gtpu", "ipip", "nested"} {
		path := filepath.Join("testdata", "decap", name+".pcap")
		if _, err := os.Stat(path); err != nil {
			t.Fatal(err)
		}
		for i, frame := range readPcap(t, path) {
			var k Key
			if err := k.DecodeDecap(frame, LinkEthernet, KeyPair, &decapGopacket); err != nil {
				t.Errorf("%s frame %d: %v", name, i+1, err)
				continue
			}
			if got, want := compareDecapGopacket(t, frame, k), !slices.Contains(skip[name], i+1); got != want {
				t.Errorf("%s frame %d: compared %v, want %v", name, i+1, got, want)
			}
		}
	}
}

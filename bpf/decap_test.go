//go:build linux && !(mips || mips64 || ppc64 || s390x)

package bpf_test

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/flow"
)

// Tunnel headers, written from their specifications (not from xdp.c).

const (
	pIPIP = 4
	pIPv6 = 41
	pGRE  = 47

	etTEB     = 0x6558 // transparent Ethernet bridging
	etERSPAN2 = 0x88be // ERSPAN type I and II
	etERSPAN3 = 0x22eb // ERSPAN type III
)

// Error indexes of bpf.Errs (enum fd_err).
const (
	eTruncated = iota
	eNotIP
	eBadHeader
	eTooMany
	eTunTruncated
	eTunUnknown
	eTunNotData
	eTunTooDeep
	eTunBadHeader
)

// gre is a GRE header (RFC 2784, 2890): the flags and version word, the
// protocol, then the optional fields as given (checksum+reserved, key,
// sequence number: 4 bytes each).
func gre(flags, proto uint16, opts ...uint32) []byte {
	b := cat(be16(flags), be16(proto))
	for _, o := range opts {
		b = binary.BigEndian.AppendUint32(b, o)
	}
	return b
}

// GRE flag bits.
const (
	greC = 0x8000 // checksum present
	greR = 0x4000 // routing present (RFC 1701)
	greK = 0x2000 // key present
	greS = 0x1000 // sequence number present
)

// erspan2 is an ERSPAN type II header (draft-foschiano-erspan): version
// 1, VLAN, COS, encapsulation type, truncated bit, session ID; reserved
// and index.
func erspan2(ver uint8, session uint16) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(ver)<<12|5) // version, VLAN 5
	b = binary.BigEndian.AppendUint16(b, session&0x3ff)        // COS 0, En 0, T 0, session
	return binary.BigEndian.AppendUint32(b, 42)                // reserved, index
}

// erspan3 is an ERSPAN type III header: version 2, VLAN, COS, BSO, T,
// session ID; timestamp; SGT, P, frame type, hardware ID, D, Gra, O;
// then the 8-byte platform specific subheader when o.
func erspan3(ver uint8, ft uint8, o bool) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(ver)<<12|7)
	b = binary.BigEndian.AppendUint16(b, 9)
	b = binary.BigEndian.AppendUint32(b, 0x01020304) // timestamp
	b = binary.BigEndian.AppendUint16(b, 0xabcd)     // SGT
	w := uint16(ft&0x1f)<<10 | 3<<4 | 1<<1           // FT, hardware ID 3, gra 1
	if o {
		w |= 1
	}
	b = binary.BigEndian.AppendUint16(b, w)
	if o {
		b = append(b, 0xa0, 1, 2, 3, 4, 5, 6, 7) // platform ID 0x14 and its data
	}
	return b
}

// vxlan is a VXLAN header (RFC 7348): flags (I = 0x08), reserved, VNI,
// reserved.
func vxlan(flags uint8, vni uint32) []byte {
	return []byte{flags, 0, 0, 0, byte(vni >> 16), byte(vni >> 8), byte(vni), 0}
}

// geneve is a Geneve header (RFC 8926): version and options length (in
// 4-byte words), O and C flags, protocol, VNI, reserved, then opts.
func geneve(ver uint8, optWords uint8, proto uint16, vni uint32, opts []byte) []byte {
	b := []byte{ver<<6 | optWords&0x3f, 0}
	b = append(b, be16(proto)...)
	b = append(b, byte(vni>>16), byte(vni>>8), byte(vni), 0)
	return append(b, opts...)
}

// gtpu is a GTP-U header (3GPP TS 29.281): flags (version, PT, E, S, PN),
// message type, length (of what follows the first 8 bytes), TEID, then
// rest (the optional fields and extension headers, then the payload).
func gtpu(flags, msgType uint8, rest []byte) []byte {
	b := []byte{flags, msgType}
	b = append(b, be16(uint16(len(rest)))...)
	b = binary.BigEndian.AppendUint32(b, 0x11223344)
	return append(b, rest...)
}

// GTP-U flags: version 1, PT 1, and the E, S and PN bits.
const (
	gtpV1 = 0x30
	gtpE  = 0x04
	gtpS  = 0x02
	gtpPN = 0x01
)

// gtpOpt is the 4-byte optional field: sequence number, N-PDU number,
// next extension header type.
func gtpOpt(next uint8) []byte { return []byte{0, 7, 0, next} }

// gtpExt is an extension header of units*4 bytes: its length, content,
// and the next type last.
func gtpExt(units uint8, next uint8) []byte {
	b := make([]byte, int(units)*4)
	if len(b) > 0 {
		b[0] = units
		b[len(b)-1] = next
	}
	return b
}

// Inner hosts, told apart from the outer a4/b4/a6/b6.
var (
	c4 = [4]byte{10, 1, 2, 3}
	d4 = [4]byte{10, 9, 8, 7}
	c6 = [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11}
	d6 = [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x22}
)

// Inner packets: IPv4/TCP 1111 > 2222 and IPv6/UDP 3333 > 4444.
func inner4() []byte { return cat(ip4(pTCP, c4, d4, 20), tcp(1111, 2222)) }
func inner6() []byte { return cat(ip6(pUDP, c6, d6, 12), udp(3333, 4444, 4)) }

var (
	want4 = innerKey{netip.AddrFrom4(c4), netip.AddrFrom4(d4), pTCP, 1111, 2222}
	want6 = innerKey{netip.AddrFrom16(c6), netip.AddrFrom16(d6), pUDP, 3333, 4444}
)

// innerKey is the expected key's fields.
type innerKey struct {
	src, dst     netip.Addr
	proto        uint8
	sport, dport uint16
}

func (w innerKey) key(kind flow.KeyKind) flow.Key {
	return flow.MakeKey(kind, w.src, w.dst, w.proto, w.sport, w.dport)
}

// Outer headers around a payload.
func over4(proto uint8, payload []byte) []byte {
	return cat(eth(etIPv4), ip4(proto, a4, b4, len(payload)), payload)
}
func over6(next uint8, payload []byte) []byte {
	return cat(eth(etIPv6), ip6(next, a6, b6, len(payload)), payload)
}

// udpOver is a UDP datagram to dport carrying payload.
func udpOver(dport uint16, payload []byte) []byte {
	u := udp(40000, dport, 0)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	return cat(u, payload)
}

// tunnelCase is a tunnelled frame and what the decapsulating program must
// make of it: the key of want (every kind), or the error index err, or,
// with outer, flow.Parse's key of the frame without decapsulation.
type tunnelCase struct {
	name    string
	frame   []byte
	outer   flow.Tunnels // the outermost tunnel's kind, 0 when none
	want    *innerKey
	err     int  // with want nil and !asOuter
	asOuter bool // flow.Parse's key of the outer header
	nested  bool // tunnels of several kinds
	// eitherGRE: a GRE header whose fault is found before its protocol
	// is told GRE's or ERSPAN's: the same with either listed.
	eitherGRE bool
}

func keyed(name string, outer flow.Tunnels, w innerKey, frame []byte) tunnelCase {
	return tunnelCase{name: name, frame: frame, outer: outer, want: &w}
}
func failed(name string, outer flow.Tunnels, err int, frame []byte) tunnelCase {
	return tunnelCase{name: name, frame: frame, outer: outer, err: err}
}
func asOuter(name string, outer flow.Tunnels, frame []byte) tunnelCase {
	return tunnelCase{name: name, frame: frame, outer: outer, asOuter: true}
}

func nested(c tunnelCase) tunnelCase    { c.nested = true; return c }
func eitherGRE(c tunnelCase) tunnelCase { c.eitherGRE = true; return c }

func tunnelCases() []tunnelCase {
	e4 := func() []byte { return cat(eth(etIPv4), inner4()) }
	e6 := func() []byte { return cat(eth(etIPv6), inner6()) }
	vx := func(inner []byte) []byte { return udpOver(4789, cat(vxlan(0x08, 100), inner)) }
	greIP := func(inner []byte) []byte { return cat(gre(0, etIPv4), inner) }
	gtp := func(inner []byte) []byte { return udpOver(2152, gtpu(gtpV1, 0xff, inner)) }

	// Nesting: n levels alternating IP-in-IP, GRE and VXLAN, inner4 at
	// the bottom.
	nest := func(n int) []byte {
		b := inner4()
		for i := range n {
			switch i % 3 {
			case 0:
				b = cat(ip4(pIPIP, a4, b4, len(b)), b)
			case 1:
				b = cat(ip4(pGRE, a4, b4, 4+len(b)), greIP(b))
			case 2:
				p := cat(eth(etIPv4), b)
				b = cat(ip4(pUDP, a4, b4, 16+len(p)), vx(p))
			}
		}
		return cat(eth(etIPv4), b)
	}

	gtpChain := func(n int, last uint8) []byte {
		b := gtpOpt(0x85)
		for i := range n {
			next := uint8(0x85)
			if i == n-1 {
				next = last
			}
			b = append(b, gtpExt(1, next)...)
		}
		return b
	}
	icmpErr := cat(eth(etIPv4), ip4(pICMP, b4, a4, 8+20+4+len(inner4())), []byte{3, 1, 0, 0, 0, 0, 0, 0},
		ip4(pGRE, a4, b4, 4+len(inner4())), greIP(inner4()))

	return []tunnelCase{
		// GRE
		keyed("gre ipv4 in ipv4", flow.TunnelGRE, want4, over4(pGRE, greIP(inner4()))),
		keyed("gre ipv6 in ipv6", flow.TunnelGRE, want6, over6(pGRE, cat(gre(0, etIPv6), inner6()))),
		keyed("gre ipv6 in ipv4 with checksum, key, sequence", flow.TunnelGRE, want6, over4(pGRE, cat(gre(greC|greK|greS, etIPv6, 0xbeef0000, 77, 5), inner6()))),
		keyed("gre with key only", flow.TunnelGRE, want4, over4(pGRE, cat(gre(greK, etIPv4, 77), inner4()))),
		keyed("gre mpls", flow.TunnelGRE, want4, over4(pGRE, cat(gre(0, etMPLS), mpls(16, false), mpls(17, true), inner4()))),
		keyed("gre transparent ethernet bridging", flow.TunnelGRE, want4, over4(pGRE, cat(gre(0, etTEB), e4()))),
		keyed("gre teb with vlan and qinq", flow.TunnelGRE, want6, over4(pGRE, cat(gre(0, etTEB), eth(etQinQ), vlan(3, etVLAN), vlan(4, etIPv6), inner6()))),
		keyed("gre teb with pppoe", flow.TunnelGRE, want4, over4(pGRE, cat(gre(0, etTEB), eth(etPPPoE), pppoe(2+40, 0x0021), inner4()))),
		eitherGRE(failed("gre routing bit", flow.TunnelGRE, eTunBadHeader, over4(pGRE, cat(gre(greR, etIPv4, 0), inner4())))),
		eitherGRE(failed("gre unknown protocol", flow.TunnelGRE, eTunUnknown, over4(pGRE, cat(gre(0, 0x1234), inner4())))),
		eitherGRE(failed("gre version 1 (pptp)", flow.TunnelGRE, eTunUnknown, over4(pGRE, cat(gre(greK|1, 0x880b, 0x00040001), make([]byte, 4))))),
		eitherGRE(failed("gre header cut", flow.TunnelGRE, eTunTruncated, over4(pGRE, gre(0, etIPv4)[:3]))),
		eitherGRE(failed("gre optional fields cut", flow.TunnelGRE, eTunTruncated, over4(pGRE, gre(greC|greK|greS, etIPv4, 0, 0, 0)[:14]))),
		eitherGRE(failed("gre optional fields cut, unknown protocol", flow.TunnelGRE, eTunTruncated, over4(pGRE, gre(greK|greS, 0x1234, 0, 0)[:10]))),
		failed("gre inner ipv4 cut", flow.TunnelGRE, eTruncated, over4(pGRE, greIP(inner4()[:12]))),
		failed("gre inner not ip (arp over teb)", flow.TunnelGRE, eNotIP, over4(pGRE, cat(gre(0, etTEB), eth(etARP), make([]byte, 28)))),
		failed("gre inner version mismatch", flow.TunnelGRE, eBadHeader, over4(pGRE, cat(gre(0, etIPv6), inner4()))),
		keyed("vlan and mpls around gre", flow.TunnelGRE, want4, cat(eth(etVLAN), vlan(9, etMPLS), mpls(30, true), ip4(pGRE, a4, b4, 4+len(inner4())), greIP(inner4()))),
		asOuter("icmp error quoting gre", 0, icmpErr),

		// ERSPAN
		keyed("erspan type ii", flow.TunnelERSPAN, want4, over4(pGRE, cat(gre(greS, etERSPAN2, 1), erspan2(1, 100), e4()))),
		keyed("erspan type i", flow.TunnelERSPAN, want6, over4(pGRE, cat(gre(0, etERSPAN2), e6()))),
		keyed("erspan type iii", flow.TunnelERSPAN, want4, over4(pGRE, cat(gre(greS, etERSPAN3, 1), erspan3(2, 0, false), e4()))),
		keyed("erspan type iii with platform subheader", flow.TunnelERSPAN, want6, over6(pGRE, cat(gre(greS, etERSPAN3, 1), erspan3(2, 0, true), e6()))),
		keyed("erspan type ii of a vlan-tagged frame", flow.TunnelERSPAN, want4, over4(pGRE, cat(gre(greS, etERSPAN2, 1), erspan2(1, 100), eth(etVLAN), vlan(5, etIPv4), inner4()))),
		failed("erspan type ii version 2", flow.TunnelERSPAN, eTunBadHeader, over4(pGRE, cat(gre(greS, etERSPAN2, 1), erspan2(2, 100), e4()))),
		failed("erspan type iii version 1", flow.TunnelERSPAN, eTunBadHeader, over4(pGRE, cat(gre(greS, etERSPAN3, 1), erspan3(1, 0, false), e4()))),
		keyed("erspan type iii frame type ip", flow.TunnelERSPAN, want4, over4(pGRE, cat(gre(greS, etERSPAN3, 1), erspan3(2, 2, false), inner4()))),
		failed("erspan type iii frame type ip, not ip", flow.TunnelERSPAN, eTunUnknown, over4(pGRE, cat(gre(greS, etERSPAN3, 1), erspan3(2, 2, false), make([]byte, 20)))),
		failed("erspan type iii frame type 5", flow.TunnelERSPAN, eTunUnknown, over4(pGRE, cat(gre(greS, etERSPAN3, 1), erspan3(2, 5, false), e4()))),
		failed("erspan type ii header cut", flow.TunnelERSPAN, eTunTruncated, over4(pGRE, cat(gre(greS, etERSPAN2, 1), erspan2(1, 100)[:5]))),
		failed("erspan type iii subheader cut", flow.TunnelERSPAN, eTunTruncated, over4(pGRE, cat(gre(greS, etERSPAN3, 1), erspan3(2, 0, true)[:16]))),

		// VXLAN
		keyed("vxlan 4789", flow.TunnelVXLAN, want4, over4(pUDP, vx(e4()))),
		keyed("vxlan 8472 in ipv6", flow.TunnelVXLAN, want6, over6(pUDP, udpOver(8472, cat(vxlan(0x08, 0xabcdef), e6())))),
		keyed("vxlan with vlan inside", flow.TunnelVXLAN, want4, over4(pUDP, vx(cat(eth(etVLAN), vlan(5, etIPv4), inner4())))),
		failed("vxlan i flag clear", flow.TunnelVXLAN, eTunBadHeader, over4(pUDP, udpOver(4789, cat(vxlan(0x00, 100), e4())))),
		failed("vxlan header cut", flow.TunnelVXLAN, eTunTruncated, over4(pUDP, udpOver(4789, vxlan(0x08, 100)[:6]))),
		failed("vxlan udp header cut", flow.TunnelVXLAN, eTunTruncated, over4(pUDP, udpOver(4789, nil)[:6])),
		asOuter("udp to another port", 0, over4(pUDP, udpOver(4790, cat(vxlan(0x08, 100), e4())))),

		// Geneve
		keyed("geneve ethernet", flow.TunnelGeneve, want4, over4(pUDP, udpOver(6081, cat(geneve(0, 0, etTEB, 5, nil), e4())))),
		keyed("geneve ipv6 with options", flow.TunnelGeneve, want6, over4(pUDP, udpOver(6081, cat(geneve(0, 3, etIPv6, 5, make([]byte, 12)), inner6())))),
		keyed("geneve ipv4 in ipv6", flow.TunnelGeneve, want4, over6(pUDP, udpOver(6081, cat(geneve(0, 0, etIPv4, 5, nil), inner4())))),
		failed("geneve options past the packet", flow.TunnelGeneve, eTunTruncated, over4(pUDP, udpOver(6081, geneve(0, 63, etIPv4, 5, make([]byte, 20))))),
		failed("geneve version 1", flow.TunnelGeneve, eTunBadHeader, over4(pUDP, udpOver(6081, cat(geneve(1, 0, etIPv4, 5, nil), inner4())))),
		failed("geneve unknown protocol", flow.TunnelGeneve, eTunUnknown, over4(pUDP, udpOver(6081, cat(geneve(0, 0, 0x8847, 5, nil), mpls(1, true), inner4())))),

		// GTP-U
		keyed("gtp-u t-pdu", flow.TunnelGTPU, want4, over4(pUDP, gtp(inner4()))),
		keyed("gtp-u t-pdu ipv6 with sequence number", flow.TunnelGTPU, want6, over4(pUDP, udpOver(2152, gtpu(gtpV1|gtpS, 0xff, cat(gtpOpt(0), inner6()))))),
		keyed("gtp-u t-pdu with n-pdu number", flow.TunnelGTPU, want4, over6(pUDP, udpOver(2152, gtpu(gtpV1|gtpPN, 0xff, cat(gtpOpt(0x85), inner4()))))),
		keyed("gtp-u t-pdu with 2 extension headers", flow.TunnelGTPU, want4, over4(pUDP, udpOver(2152, gtpu(gtpV1|gtpE, 0xff, cat(gtpChain(2, 0), inner4()))))),
		keyed("gtp-u t-pdu with 8 extension headers", flow.TunnelGTPU, want6, over4(pUDP, udpOver(2152, gtpu(gtpV1|gtpE, 0xff, cat(gtpChain(8, 0), inner6()))))),
		failed("gtp-u extension chain that does not end", flow.TunnelGTPU, eTooMany, over4(pUDP, udpOver(2152, gtpu(gtpV1|gtpE, 0xff, cat(gtpChain(9, 0), inner4()))))),
		failed("gtp-u extension header of length 0", flow.TunnelGTPU, eTunBadHeader, over4(pUDP, udpOver(2152, gtpu(gtpV1|gtpE, 0xff, cat(gtpOpt(0x85), []byte{0, 0, 0, 0}, inner4()))))),
		failed("gtp-u extension header past the packet", flow.TunnelGTPU, eTunTruncated, over4(pUDP, udpOver(2152, gtpu(gtpV1|gtpE, 0xff, cat(gtpOpt(0x85), []byte{200, 0, 0, 0}))))),
		failed("gtp-u echo request", flow.TunnelGTPU, eTunNotData, over4(pUDP, udpOver(2152, gtpu(gtpV1|gtpS, 1, gtpOpt(0))))),
		failed("gtp-u error indication", flow.TunnelGTPU, eTunNotData, over4(pUDP, udpOver(2152, gtpu(gtpV1, 26, make([]byte, 8))))),
		keyed("gtp-u t-pdu from port 2152", flow.TunnelGTPU, want4, over4(pUDP, cat(func() []byte {
			u := udp(2152, 33333, 0)
			binary.BigEndian.PutUint16(u[4:], uint16(8+8+len(inner4())))
			return u
		}(), gtpu(gtpV1, 0xff, inner4())))),
		failed("gtp version 2", flow.TunnelGTPU, eTunBadHeader, over4(pUDP, udpOver(2152, gtpu(0x50, 0xff, inner4())))),
		failed("gtp' (pt 0)", flow.TunnelGTPU, eTunBadHeader, over4(pUDP, udpOver(2152, gtpu(0x20, 0xff, inner4())))),
		failed("gtp-u header cut", flow.TunnelGTPU, eTunTruncated, over4(pUDP, udpOver(2152, gtpu(gtpV1, 0xff, nil)[:5]))),
		failed("gtp-u t-pdu not ip", flow.TunnelGTPU, eTunUnknown, over4(pUDP, gtp(make([]byte, 20)))),

		// IP in IP
		keyed("ipv4 in ipv4", flow.TunnelIPIP, want4, over4(pIPIP, inner4())),
		keyed("ipv6 in ipv4 (6in4)", flow.TunnelIPIP, want6, over4(pIPv6, inner6())),
		keyed("ipv4 in ipv6", flow.TunnelIPIP, want4, over6(pIPIP, inner4())),
		keyed("ipv6 in ipv6", flow.TunnelIPIP, want6, over6(pIPv6, inner6())),
		keyed("ipv4 in ipv6 after extension headers", flow.TunnelIPIP, want4, cat(eth(etIPv6), ip6(pHop, a6, b6, 16+len(inner4())), ext6(pDst, 0), ext6(pIPIP, 0), inner4())),
		failed("ipv4 in ipv4, inner version 6", flow.TunnelIPIP, eBadHeader, over4(pIPIP, inner6())),
		failed("ipv4 in ipv4, inner cut", flow.TunnelIPIP, eTruncated, over4(pIPIP, inner4()[:19])),
		asOuter("gre after ipsec ah", flow.TunnelGRE, cat(eth(etIPv4), ip4(pAH, a4, b4, 12+4+len(inner4())), ah(pGRE, 1), greIP(inner4()))),
		asOuter("ipv6 in ipv6 after ipsec ah", flow.TunnelIPIP, cat(eth(etIPv6), ip6(pAH, a6, b6, 12+len(inner6())), ah(pIPv6, 1), inner6())),
		asOuter("ipv4 in ipv4, outer non-first fragment", flow.TunnelIPIP, cat(eth(etIPv4), ip4(pIPIP, a4, b4, 40, func(h []byte) { h[6], h[7] = 0, 10 }), inner4())),
		asOuter("ipv6 in ipv6, outer non-first fragment", flow.TunnelIPIP, cat(eth(etIPv6), ip6(pFrag, a6, b6, 8+len(inner6())), frag6(pIPv6, 20, false), inner6())),
		keyed("ipv6 in ipv6, outer first fragment", flow.TunnelIPIP, want6, cat(eth(etIPv6), ip6(pFrag, a6, b6, 8+len(inner6())), frag6(pIPv6, 0, true), inner6())),

		// Nesting
		nested(keyed("2 levels: gre in ipip", flow.TunnelGRE, want4, nest(2))),
		nested(keyed("3 levels: vxlan in gre in ipip", flow.TunnelVXLAN, want4, nest(3))),
		nested(keyed("4 levels", flow.TunnelIPIP, want4, nest(4))),
		nested(failed("5 levels", flow.TunnelGRE, eTunTooDeep, nest(5))),
		nested(failed("5 levels, the fifth header cut", flow.TunnelGRE, eTunTooDeep, nest(5)[:14+4*20+8+16+14+20+2])),
		nested(failed("6 levels", flow.TunnelVXLAN, eTunTooDeep, nest(6))),
		nested(keyed("gtp-u in vxlan in erspan", flow.TunnelERSPAN, want6, over4(pGRE, cat(gre(greS, etERSPAN2, 1), erspan2(1, 1),
			eth(etIPv4), ip4(pUDP, a4, b4, 16+14+20+8+8+len(inner6())), vx(cat(eth(etIPv4), ip4(pUDP, b4, a4, 16+len(inner6())), gtp(inner6()))))))),
	}
}

// outcome runs the program once on frame and returns what it did: a key
// or an error index, checking the counters moved by one frame.
func (h *harness) outcome(frame []byte) (result, error) {
	h.tb.Helper()
	if err := h.run(frame); err != nil {
		return result{}, err
	}
	evs := h.drain(nil)
	d := h.delta()
	if d.Packets != 1 {
		return result{}, fmt.Errorf("packets moved by %d", d.Packets)
	}
	if d.Keyed == 1 {
		if len(evs) != 1 || d.Emitted != 1 || d.Errors != [bpf.NumErrs]uint64{} {
			return result{}, fmt.Errorf("keyed, but %d events, counters %+v", len(evs), d)
		}
		return result{key: evs[0].key, err: -1}, nil
	}
	r := result{err: -2}
	for i, n := range d.Errors {
		switch {
		case n == 1 && r.err == -2:
			r.err = i
		case n != 0:
			return result{}, fmt.Errorf("counters moved by %+v", d)
		}
	}
	if r.err < 0 || len(evs) != 0 || d.Keyed != 0 {
		return result{}, fmt.Errorf("counters moved by %+v, %d events", d, len(evs))
	}
	return r, nil
}

// decapHarnesses loads one program per kind decapsulating tunnels.
func decapHarnesses(tb testing.TB, d flow.Decap) map[flow.KeyKind]*harness {
	hs := make(map[flow.KeyKind]*harness)
	for _, k := range kinds {
		hs[k] = newHarness(tb, bpf.Config{Kind: k, PrefilterBytes: -1, RingBytes: 1 << 20, Decap: d})
	}
	return hs
}

// expect is what c must give for kind with decapsulation on.
func (c tunnelCase) expect(tb testing.TB, kind flow.KeyKind) result {
	switch {
	case c.want != nil:
		return result{key: c.want.key(kind), err: -1}
	case c.asOuter:
		k, err := flow.Parse(c.frame, flow.LinkEthernet, kind)
		if err != nil {
			tb.Fatalf("%s: flow.Parse: %v", c.name, err)
		}
		return result{key: k, err: -1}
	}
	return result{err: c.err}
}

// TestDecapTunnels runs every tunnel case through the programs of every key
// kind decapsulating every tunnel kind. The expected keys are the inner
// packets' fields as the cases built them; where gopacket decodes the
// tunnel, its innermost IP layer must agree.
func TestDecapTunnels(t *testing.T) {
	hs := decapHarnesses(t, decapOf(flow.TunnelsAll, true))
	byGopacket := 0
	for _, c := range tunnelCases() {
		for _, kind := range kinds {
			want := c.expect(t, kind)
			if want.err == -1 && kind == flow.KeySrc && !want.key.IsValid() {
				t.Fatalf("%s: invalid expected key", c.name)
			}
			got, err := hs[kind].outcome(c.frame)
			if err != nil {
				t.Errorf("%s, %v key: %v", c.name, kind, err)
				continue
			}
			if got != want {
				t.Errorf("%s, %v key: kernel %v, want %v (frame %x)", c.name, kind, got, want, c.frame)
			}
		}
		if c.want != nil && gopacketInner(t, c.frame, *c.want) {
			byGopacket++
		}
	}
	t.Logf("%d cases, %d of them keyed as gopacket decodes them too", len(tunnelCases()), byGopacket)
	if byGopacket < 10 {
		t.Errorf("gopacket agreed on only %d cases", byGopacket)
	}
	for _, h := range hs {
		checkInvariants(t, h.o)
	}
}

// gopacketInner decodes frame with gopacket and, when it decoded past the
// outermost IP header, checks that its innermost IP layer has want's
// addresses; it reports whether it checked.
func gopacketInner(t *testing.T, frame []byte, want innerKey) bool {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	var ips []gopacket.Layer
	for _, l := range p.Layers() {
		if l.LayerType() == layers.LayerTypeIPv4 || l.LayerType() == layers.LayerTypeIPv6 {
			ips = append(ips, l)
		}
	}
	if len(ips) < 2 {
		return false
	}
	var src, dst netip.Addr
	switch l := ips[len(ips)-1].(type) {
	case *layers.IPv4:
		src, _ = netip.AddrFromSlice(l.SrcIP.To4())
		dst, _ = netip.AddrFromSlice(l.DstIP.To4())
	case *layers.IPv6:
		src, _ = netip.AddrFromSlice(l.SrcIP)
		dst, _ = netip.AddrFromSlice(l.DstIP)
	}
	if src != want.src || dst != want.dst {
		// gopacket stopped short (a layer it does not decode): no check.
		if src == netip.AddrFrom4(a4) || src == netip.AddrFrom16(a6) || src == netip.AddrFrom4(b4) {
			return false
		}
		t.Errorf("gopacket's innermost IP layer of %x is %v > %v, the case expects %v > %v", frame, src, dst, want.src, want.dst)
	}
	return true
}

// knownAddrs are every address the tunnel cases use.
var knownAddrs = map[netip.Addr]bool{
	netip.AddrFrom4(a4): true, netip.AddrFrom4(b4): true, netip.AddrFrom16(a6): true, netip.AddrFrom16(b6): true,
	netip.AddrFrom4(c4): true, netip.AddrFrom4(d4): true, netip.AddrFrom16(c6): true, netip.AddrFrom16(d6): true,
}

// TestDecapTruncated cuts every tunnel case at every length from an
// Ethernet header on, for every key kind: the program stays within the
// frame (it loads, and runs on each without a fault), counts each cut
// frame once, as a key or under one of its reasons, and keys only
// addresses the frame holds in full. The 5-tuple results by reason are
// logged.
func TestDecapTruncated(t *testing.T) {
	hs := decapHarnesses(t, decapOf(flow.TunnelsAll, true))
	var byReason [bpf.NumErrs]int
	cuts := 0
	for _, c := range tunnelCases() {
		for n := minRunLen; n < len(c.frame); n++ {
			cut := c.frame[:n]
			cuts++
			for _, kind := range kinds {
				got, err := hs[kind].outcome(cut)
				if err != nil {
					t.Fatalf("%s cut to %d bytes, %v key: %v", c.name, n, kind, err)
				}
				if got.err >= 0 {
					if kind == flow.Key5Tuple {
						byReason[got.err]++
					}
					continue
				}
				if !knownAddrs[got.key.Src()] && !knownAddrs[got.key.Dst()] {
					t.Errorf("%s cut to %d bytes, %v key: %v holds no address of the frame", c.name, n, kind, got.key)
				}
			}
		}
	}
	t.Logf("%d cuts of %d tunnel frames, 4 key kinds; 5-tuple errors by reason %v", cuts, len(tunnelCases()), byReason)
	if byReason[eTunTruncated] == 0 || byReason[eTruncated] == 0 {
		t.Errorf("no cut counted as tunnel_truncated or truncated: %v", byReason)
	}
	for _, h := range hs {
		checkInvariants(t, h.o)
	}
}

// TestDecapOffTunnels: without Config.Decap the program keys tunnelled
// frames, and their cuts, as flow.Parse does (the outermost header), as
// before decapsulation existed.
func TestDecapOffTunnels(t *testing.T) {
	p := &parityRun{tb: t, hs: parityHarnesses(t)}
	for _, c := range tunnelCases() {
		for n := minRunLen; n <= len(c.frame); n++ {
			p.check(c.frame[:n])
		}
	}
	t.Logf("%d frames; 5-tuple errors by class %v", p.frames, p.classes)
	for _, h := range p.hs {
		checkInvariants(t, h.o)
	}
}

// TestDecapSelected: a program decapsulating one tunnel kind looks into
// that kind only; the frames of the others get the outer key, flow.Parse's.
func TestDecapSelected(t *testing.T) {
	for _, bit := range []flow.Tunnels{flow.TunnelGRE, flow.TunnelERSPAN, flow.TunnelVXLAN, flow.TunnelGeneve, flow.TunnelGTPU, flow.TunnelIPIP} {
		hs := decapHarnesses(t, decapOf(bit, true))
		for _, c := range tunnelCases() {
			if c.nested && c.outer == bit {
				continue // its inner tunnels are of kinds not decapsulated
			}
			for _, kind := range kinds {
				want := c.expect(t, kind)
				if c.outer != bit && !(c.eitherGRE && bit == flow.TunnelERSPAN) {
					k, err := flow.Parse(c.frame, flow.LinkEthernet, kind)
					want = result{key: k, err: errIndex(err)}
					if err == nil {
						want.err = -1
					}
				}
				got, err := hs[kind].outcome(c.frame)
				if err != nil {
					t.Fatalf("tunnels %#x, %s, %v key: %v", bit, c.name, kind, err)
				}
				if got != want {
					t.Errorf("tunnels %#x, %s, %v key: kernel %v, want %v", bit, c.name, kind, got, want)
				}
			}
		}
	}
}

// TestDecapPorts: the UDP ports are the configured ones, not the defaults.
func TestDecapPorts(t *testing.T) {
	vx := func(port uint16) []byte {
		return over4(pUDP, udpOver(port, cat(vxlan(0x08, 7), eth(etIPv4), inner4())))
	}
	gn := func(port uint16) []byte {
		return over4(pUDP, udpOver(port, cat(geneve(0, 0, etIPv4, 7, nil), inner4())))
	}
	gt := func(port uint16) []byte { return over4(pUDP, udpOver(port, gtpu(gtpV1, 0xff, inner4()))) }
	h := newHarness(t, bpf.Config{Kind: flow.KeySrc, PrefilterBytes: -1, RingBytes: 1 << 20,
		Decap: flow.Decap{Tunnels: flow.TunnelsAll, NoSegment: true, VXLANPorts: [2]uint16{4790, 0}, GenevePort: 6082, GTPUPort: 2153}})
	inner, outer := want4.key(flow.KeySrc), flow.MakeKey(flow.KeySrc, netip.AddrFrom4(a4), netip.Addr{}, 0, 0, 0)
	for _, c := range []struct {
		name  string
		frame []byte
		want  flow.Key
	}{
		{"vxlan 4790", vx(4790), inner}, {"vxlan 4789", vx(4789), outer}, {"vxlan 8472", vx(8472), outer},
		{"geneve 6082", gn(6082), inner}, {"geneve 6081", gn(6081), outer},
		{"gtp-u 2153", gt(2153), inner}, {"gtp-u 2152", gt(2152), outer},
		{"udp port 0", vx(0), outer},
	} {
		got, err := h.outcome(c.frame)
		if err != nil || got != (result{key: c.want, err: -1}) {
			t.Errorf("%s: %v %v, want key %v", c.name, got, err, c.want)
		}
	}
}

// TestDecapLoads: the verifier accepts the program with decapsulation off
// and on, for each tunnel kind alone and all, every key kind, with and
// without a prefix mask and windows.
func TestDecapLoads(t *testing.T) {
	m, err := flow.ParseMask("24,64")
	if err != nil {
		t.Fatal(err)
	}
	for _, tun := range []flow.Tunnels{0, flow.TunnelGRE, flow.TunnelERSPAN, flow.TunnelVXLAN, flow.TunnelGeneve, flow.TunnelGTPU, flow.TunnelIPIP, flow.TunnelsAll} {
		for _, kind := range kinds {
			for _, cfg := range []bpf.Config{
				{Kind: kind, Decap: decapOf(tun, false)},
				{Kind: kind, Prefix: m, Window: time.Minute, Decap: decapOf(tun, true)},
			} {
				cfg.RingBytes = 1 << 16
				o, err := bpf.Load(cfg)
				if err != nil {
					t.Fatalf("Load(%+v): %v", cfg, err)
				}
				o.Close()
			}
		}
	}
	if _, err := bpf.Load(bpf.Config{Kind: flow.KeySrc, Decap: flow.Decap{Tunnels: 0x40}}); err == nil {
		t.Error("Load with an unknown tunnel bit succeeded")
	}
}

// decapOf is the Decap of the tunnel kinds t on the default ports, as
// flow.ParseDecap gives it ("all", "gre", ...), with or without segments.
func decapOf(t flow.Tunnels, noSegment bool) flow.Decap {
	d, err := flow.ParseDecap("all")
	if err != nil {
		panic(err)
	}
	d.Tunnels, d.NoSegment = t, noSegment
	return d
}

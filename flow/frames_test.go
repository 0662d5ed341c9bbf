package flow

// Frame builders for the tests: each returns a fresh slice holding one
// header, so that a test frame reads as the stack of its headers, outermost
// first, e.g. ether(etherTypeVLAN, vlan(7, etherTypeIPv4), v4.packet(tcp(1, 2))).

import (
	"encoding/binary"
	"net/netip"
)

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// ether is an Ethernet II header with fixed locally administered MACs.
func ether(etype uint16, payload ...[]byte) []byte {
	return cat([]byte{0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2}, be16(etype), cat(payload...))
}

// vlan is an 802.1Q/802.1ad tag: the tag control information, then the
// EtherType of what follows.
func vlan(vid, etype uint16) []byte { return cat(be16(vid&0x0fff), be16(etype)) }

// mpls is one label stack entry with TTL 64.
func mpls(label uint32, bottom bool) []byte {
	v := label<<12 | 64
	if bottom {
		v |= 1 << 8
	}
	return binary.BigEndian.AppendUint32(nil, v)
}

// pppoe is a PPPoE session header followed by the 2-byte PPP protocol.
func pppoe(pppProto uint16, payload []byte) []byte {
	return cat([]byte{0x11, 0x00, 0x12, 0x34}, be16(uint16(2+len(payload))), be16(pppProto), payload)
}

// sll is a Linux cooked v1 header of an incoming Ethernet frame.
func sll(etype uint16, payload []byte) []byte {
	return cat(be16(0), be16(1), be16(6), []byte{0x02, 0, 0, 0, 0, 2, 0, 0}, be16(etype), payload)
}

// sll2 is a Linux cooked v2 header of an incoming Ethernet frame on ifindex 2.
func sll2(etype uint16, payload []byte) []byte {
	return cat(be16(etype), be16(0), []byte{0, 0, 0, 2}, be16(1), []byte{0, 6}, []byte{0x02, 0, 0, 0, 0, 2, 0, 0}, payload)
}

// loopback is a DLT_NULL/LOOP header: the address family in the given order.
func loopback(order binary.AppendByteOrder, family uint32, payload []byte) []byte {
	return cat(order.AppendUint32(nil, family), payload)
}

// ip4 describes an IPv4 header.
type ip4 struct {
	src, dst  string
	proto     uint8
	options   []byte // a multiple of 4 bytes
	fragOff   uint16 // in 8-byte units
	moreFrags bool
	totalLen  int // 0: the header and payload lengths
	ihl       int // 0: from the options
	version   uint8
}

func (h ip4) packet(payload []byte) []byte {
	hdr := make([]byte, 20, 20+len(h.options))
	version, ihl := h.version, h.ihl
	if version == 0 {
		version = 4
	}
	if ihl == 0 {
		ihl = (20 + len(h.options)) / 4
	}
	hdr[0] = version<<4 | uint8(ihl)
	total := h.totalLen
	if total == 0 {
		total = 20 + len(h.options) + len(payload)
	}
	binary.BigEndian.PutUint16(hdr[2:], uint16(total))
	binary.BigEndian.PutUint16(hdr[4:], 0xbeef)
	ff := h.fragOff & 0x1fff
	if h.moreFrags {
		ff |= 0x2000
	}
	binary.BigEndian.PutUint16(hdr[6:], ff)
	hdr[8] = 64
	hdr[9] = h.proto
	s, d := netip.MustParseAddr(h.src).As4(), netip.MustParseAddr(h.dst).As4()
	copy(hdr[12:], s[:])
	copy(hdr[16:], d[:])
	hdr = append(hdr, h.options...)
	var sum uint32
	for i := 0; i+1 < len(hdr); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(hdr[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(hdr[10:], ^uint16(sum))
	return cat(hdr, payload)
}

// ip6 describes a fixed IPv6 header.
type ip6 struct {
	src, dst string
	next     uint8
	plen     int // 0: the payload length; -1: 0 in the header
}

func (h ip6) packet(payload []byte) []byte {
	hdr := make([]byte, 40)
	hdr[0] = 0x60
	plen := h.plen
	switch plen {
	case 0:
		plen = len(payload)
	case -1:
		plen = 0
	}
	binary.BigEndian.PutUint16(hdr[4:], uint16(plen))
	hdr[6] = h.next
	hdr[7] = 64
	s, d := netip.MustParseAddr(h.src).As16(), netip.MustParseAddr(h.dst).As16()
	copy(hdr[8:], s[:])
	copy(hdr[24:], d[:])
	return cat(hdr, payload)
}

// opts6 is a hop-by-hop or destination options header of 8*(units+1) bytes,
// filled with one PadN option.
func opts6(next, units uint8) []byte {
	n := 8 * (int(units) + 1)
	h := make([]byte, n)
	h[0], h[1] = next, units
	h[2], h[3] = 1, uint8(n-4) // PadN
	return h
}

// routing6 is a segment routing header with no segments left and one segment.
func routing6(next uint8) []byte {
	h := make([]byte, 24)
	h[0], h[1], h[2], h[3] = next, 2, 4, 0
	return h
}

// frag6 is an IPv6 fragment header; off is in 8-byte units.
func frag6(next uint8, off uint16, more bool) []byte {
	h := make([]byte, 8)
	h[0] = next
	v := off << 3
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(h[2:], v)
	binary.BigEndian.PutUint32(h[4:], 0xcafe)
	return h
}

// ah is an IPsec authentication header with 4*words bytes of ICV.
func ah(next, words uint8) []byte {
	h := make([]byte, 12+4*int(words))
	h[0], h[1] = next, words+1
	binary.BigEndian.PutUint32(h[4:], 0x1000) // SPI
	binary.BigEndian.PutUint32(h[8:], 1)      // sequence number
	return h
}

// tcp is a 20-byte TCP SYN header.
func tcp(sport, dport uint16) []byte {
	h := make([]byte, 20)
	binary.BigEndian.PutUint16(h[0:], sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	binary.BigEndian.PutUint32(h[4:], 1000)
	h[12] = 5 << 4
	h[13] = 0x02
	binary.BigEndian.PutUint16(h[14:], 65535)
	return h
}

// udp is a UDP header and payload; UDP-Lite shares the layout.
func udp(sport, dport uint16, payload []byte) []byte {
	return cat(be16(sport), be16(dport), be16(uint16(8+len(payload))), be16(0), payload)
}

// sctp is an SCTP common header.
func sctp(sport, dport uint16) []byte {
	return cat(be16(sport), be16(dport), []byte{0, 0, 0, 1, 0, 0, 0, 0})
}

// icmpEcho is an ICMP (or ICMPv6, with typ 128) echo request.
func icmpEcho(typ uint8) []byte { return []byte{typ, 0, 0, 0, 0, 1, 0, 1} }

// want5 is the 5-tuple key Parse should return.
func want5(proto uint8, src, dst string, sport, dport uint16) Key {
	return MakeKey(Key5Tuple, netip.MustParseAddr(src), netip.MustParseAddr(dst), proto, sport, dport)
}

// noPorts is k without its ports, as Parse keys a non-first fragment.
func noPorts(k Key) Key {
	k.sport, k.dport = 0, 0
	k.flags &^= flagPorts
	return k
}

// project reduces a 5-tuple key to the key of kind.
func project(k Key, kind KeyKind) Key {
	if kind == Key5Tuple {
		return k
	}
	return MakeKey(kind, k.Src(), k.Dst(), 0, 0, 0)
}

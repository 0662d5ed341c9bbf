package flow

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// Addresses and ports of the test frames.
var (
	v4     = ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoTCP}
	v4udp  = ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoUDP}
	v6     = ip6{src: "2001:db8::1", dst: "2001:db8:ffff::2", next: protoTCP}
	v6udp  = ip6{src: "2001:db8::1", dst: "2001:db8:ffff::2", next: protoUDP}
	tcp4   = want5(protoTCP, "192.0.2.1", "198.51.100.2", 40000, 443)
	udp4   = want5(protoUDP, "192.0.2.1", "198.51.100.2", 5353, 53)
	tcp6   = want5(protoTCP, "2001:db8::1", "2001:db8:ffff::2", 40000, 443)
	udp6   = want5(protoUDP, "2001:db8::1", "2001:db8:ffff::2", 5353, 53)
	tcp4IP = v4.packet(tcp(40000, 443))
	udp4IP = v4udp.packet(udp(5353, 53, []byte("query")))
	tcp6IP = v6.packet(tcp(40000, 443))
	udp6IP = v6udp.packet(udp(5353, 53, []byte("query")))
)

// parseCase is a frame and the result Parse should give for it: want, the
// 5-tuple key, projected to the other kinds; or errAll for every kind; or
// err5 for the 5-tuple kind alone, whose headers the other kinds do not need.
type parseCase struct {
	name   string
	lt     LinkType
	frame  []byte
	want   Key
	err5   error
	errAll error
}

func (c parseCase) expect(kind KeyKind) (Key, error) {
	switch {
	case c.errAll != nil:
		return Key{}, c.errAll
	case kind == Key5Tuple && c.err5 != nil:
		return Key{}, c.err5
	}
	return project(c.want, kind), nil
}

// vlanStack is n VLAN tags ending in etype.
func vlanStack(n int, etype uint16) []byte {
	var b []byte
	for i := range n {
		next := uint16(etherTypeVLAN)
		if i == n-1 {
			next = etype
		}
		b = append(b, vlan(uint16(i+1), next)...)
	}
	return b
}

// mplsStack is n MPLS labels, the last one the bottom of the stack.
func mplsStack(n int) []byte {
	var b []byte
	for i := range n {
		b = append(b, mpls(uint32(100+i), i == n-1)...)
	}
	return b
}

// destOptsChain is n destination options headers ending in next.
func destOptsChain(n int, next uint8) []byte {
	var b []byte
	for i := range n {
		nh := uint8(ip6DestOpts)
		if i == n-1 {
			nh = next
		}
		b = append(b, opts6(nh, 0)...)
	}
	return b
}

func parseCases() []parseCase {
	icmp4 := want5(protoICMP, "192.0.2.1", "198.51.100.2", 0, 0)
	gre := want5(47, "192.0.2.1", "198.51.100.2", 0, 0)
	v4icmp := ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoICMP}
	v4opts := ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoTCP,
		options: []byte{0x94, 0x04, 0, 0, 0x07, 0x07, 0x04, 0, 0, 0, 0, 0x00}} // router alert, record route, end
	v6ext := func(next uint8, payload []byte) []byte {
		return ip6{src: "2001:db8::1", dst: "2001:db8:ffff::2", next: next}.packet(payload)
	}
	// A frame cut by a snap length of 64 bytes: 50 bytes of IP claiming 1500.
	snapped := ether(etherTypeIPv4, ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoTCP, totalLen: 1500}.packet(tcp(40000, 443)))[:64]
	return []parseCase{
		// Each link type.
		{name: "ethernet/ipv4/tcp", lt: LinkEthernet, frame: ether(etherTypeIPv4, tcp4IP), want: tcp4},
		{name: "ethernet/ipv4/udp", lt: LinkEthernet, frame: ether(etherTypeIPv4, udp4IP), want: udp4},
		{name: "ethernet/ipv6/tcp", lt: LinkEthernet, frame: ether(etherTypeIPv6, tcp6IP), want: tcp6},
		{name: "ethernet/ipv6/udp", lt: LinkEthernet, frame: ether(etherTypeIPv6, udp6IP), want: udp6},
		{name: "raw/ipv4", lt: LinkRaw, frame: tcp4IP, want: tcp4},
		{name: "raw/ipv6", lt: LinkRaw, frame: udp6IP, want: udp6},
		{name: "ipv4", lt: LinkIPv4, frame: udp4IP, want: udp4},
		{name: "ipv6", lt: LinkIPv6, frame: tcp6IP, want: tcp6},
		{name: "linux_sll/ipv4", lt: LinkLinuxSLL, frame: sll(etherTypeIPv4, tcp4IP), want: tcp4},
		{name: "linux_sll/ipv6", lt: LinkLinuxSLL, frame: sll(etherTypeIPv6, udp6IP), want: udp6},
		{name: "linux_sll/vlan/ipv4", lt: LinkLinuxSLL, frame: sll(etherTypeVLAN, cat(vlan(5, etherTypeIPv4), tcp4IP)), want: tcp4},
		{name: "linux_sll2/ipv4", lt: LinkLinuxSLL2, frame: sll2(etherTypeIPv4, udp4IP), want: udp4},
		{name: "linux_sll2/ipv6", lt: LinkLinuxSLL2, frame: sll2(etherTypeIPv6, tcp6IP), want: tcp6},
		{name: "null/le/ipv4", lt: LinkNull, frame: loopback(binary.LittleEndian, afInet, tcp4IP), want: tcp4},
		{name: "null/be/ipv4", lt: LinkNull, frame: loopback(binary.BigEndian, afInet, tcp4IP), want: tcp4},
		{name: "null/le/ipv6-netbsd", lt: LinkNull, frame: loopback(binary.LittleEndian, afInet6NetBSD, udp6IP), want: udp6},
		{name: "null/le/ipv6-freebsd", lt: LinkNull, frame: loopback(binary.LittleEndian, afInet6FreeBSD, udp6IP), want: udp6},
		{name: "null/le/ipv6-darwin", lt: LinkNull, frame: loopback(binary.LittleEndian, afInet6Darwin, udp6IP), want: udp6},
		{name: "null/be/ipv6-darwin", lt: LinkNull, frame: loopback(binary.BigEndian, afInet6Darwin, tcp6IP), want: tcp6},
		{name: "null/linux-inet6-is-not-bsd", lt: LinkNull, frame: loopback(binary.LittleEndian, 10, tcp6IP), errAll: ErrNotIP},
		{name: "loop/ipv4", lt: LinkLoop, frame: loopback(binary.BigEndian, afInet, tcp4IP), want: tcp4},
		{name: "loop/ipv6", lt: LinkLoop, frame: loopback(binary.BigEndian, afInet6FreeBSD, udp6IP), want: udp6},
		{name: "loop/host-order-family", lt: LinkLoop, frame: loopback(binary.LittleEndian, afInet, tcp4IP), errAll: ErrNotIP},
		{name: "unsupported-link", lt: 9999, frame: tcp4IP, errAll: ErrUnsupportedLink},
		{name: "ieee802_11-unsupported", lt: 105, frame: tcp4IP, errAll: ErrUnsupportedLink},

		// VLAN stacks.
		{name: "vlan/ipv4", lt: LinkEthernet, frame: ether(etherTypeVLAN, vlan(100, etherTypeIPv4), tcp4IP), want: tcp4},
		{name: "qinq-88a8/ipv6", lt: LinkEthernet, frame: ether(etherTypeQinQ, vlan(10, etherTypeVLAN), vlan(20, etherTypeIPv6), udp6IP), want: udp6},
		{name: "qinq-9100/ipv4", lt: LinkEthernet, frame: ether(etherTypeQinQOld, vlan(10, etherTypeVLAN), vlan(20, etherTypeIPv4), udp4IP), want: udp4},
		{name: "vlan-x16", lt: LinkEthernet, frame: ether(etherTypeVLAN, vlanStack(16, etherTypeIPv4), tcp4IP), want: tcp4},
		{name: "vlan-x17", lt: LinkEthernet, frame: ether(etherTypeVLAN, vlanStack(17, etherTypeIPv4), tcp4IP), errAll: ErrTooManyHeaders},
		{name: "vlan/arp", lt: LinkEthernet, frame: ether(etherTypeVLAN, vlan(100, 0x0806), make([]byte, 28)), errAll: ErrNotIP},

		// MPLS label stacks.
		{name: "mpls/ipv4", lt: LinkEthernet, frame: ether(etherTypeMPLSUnicast, mpls(16, true), tcp4IP), want: tcp4},
		{name: "mpls-x3/ipv6", lt: LinkEthernet, frame: ether(etherTypeMPLSUnicast, mplsStack(3), udp6IP), want: udp6},
		{name: "mpls-multicast/ipv4", lt: LinkEthernet, frame: ether(etherTypeMPLSMulticast, mplsStack(2), udp4IP), want: udp4},
		{name: "vlan/mpls/ipv4", lt: LinkEthernet, frame: ether(etherTypeVLAN, vlan(7, etherTypeMPLSUnicast), mplsStack(2), tcp4IP), want: tcp4},
		{name: "mpls-x16", lt: LinkEthernet, frame: ether(etherTypeMPLSUnicast, mplsStack(16), tcp4IP), want: tcp4},
		{name: "mpls-x17", lt: LinkEthernet, frame: ether(etherTypeMPLSUnicast, mplsStack(17), tcp4IP), errAll: ErrTooManyHeaders},
		{name: "vlan-x8/mpls-x8", lt: LinkEthernet, frame: ether(etherTypeVLAN, vlanStack(8, etherTypeMPLSUnicast), mplsStack(8), tcp4IP), want: tcp4},
		{name: "vlan-x8/mpls-x9", lt: LinkEthernet, frame: ether(etherTypeVLAN, vlanStack(8, etherTypeMPLSUnicast), mplsStack(9), tcp4IP), errAll: ErrTooManyHeaders},
		{name: "mpls/pseudowire", lt: LinkEthernet, frame: ether(etherTypeMPLSUnicast, mpls(16, true), []byte{0, 0, 0, 0}, ether(etherTypeIPv4, tcp4IP)), errAll: ErrNotIP},

		// PPPoE sessions.
		{name: "pppoe/ipv4", lt: LinkEthernet, frame: ether(etherTypePPPoESession, pppoe(pppIPv4, tcp4IP)), want: tcp4},
		{name: "pppoe/ipv6", lt: LinkEthernet, frame: ether(etherTypePPPoESession, pppoe(pppIPv6, udp6IP)), want: udp6},
		{name: "vlan/pppoe/ipv4", lt: LinkEthernet, frame: ether(etherTypeVLAN, vlan(3, etherTypePPPoESession), pppoe(pppIPv4, udp4IP)), want: udp4},
		{name: "pppoe/compressed-protocol", lt: LinkEthernet, frame: ether(etherTypePPPoESession, []byte{0x11, 0, 0x12, 0x34}, be16(uint16(1+len(tcp4IP))), []byte{0x21}, tcp4IP), want: tcp4},
		{name: "pppoe/ethernet-padding", lt: LinkEthernet, frame: cat(ether(etherTypePPPoESession, pppoe(pppIPv4, v4icmp.packet(icmpEcho(8)))), make([]byte, 10)), want: icmp4},
		{name: "pppoe/length-ends-in-ip-header", lt: LinkEthernet, frame: ether(etherTypePPPoESession, []byte{0x11, 0, 0x12, 0x34}, be16(2+10), be16(pppIPv4), tcp4IP), errAll: ErrTruncated},
		{name: "pppoe/length-ends-in-protocol", lt: LinkEthernet, frame: ether(etherTypePPPoESession, []byte{0x11, 0, 0x12, 0x34}, be16(1), be16(pppIPv4), tcp4IP), errAll: ErrTruncated},
		{name: "pppoe/lcp", lt: LinkEthernet, frame: ether(etherTypePPPoESession, pppoe(0xc021, []byte{1, 1, 0, 4})), errAll: ErrNotIP},
		{name: "pppoe-discovery", lt: LinkEthernet, frame: ether(0x8863, []byte{0x11, 0x09, 0, 0, 0, 0}), errAll: ErrNotIP},

		// Other EtherTypes are counted apart from malformed frames.
		{name: "arp", lt: LinkEthernet, frame: ether(0x0806, make([]byte, 28)), errAll: ErrNotIP},
		{name: "lldp", lt: LinkEthernet, frame: ether(0x88cc, make([]byte, 32)), errAll: ErrNotIP},
		{name: "802.3-llc", lt: LinkEthernet, frame: ether(46, []byte{0x42, 0x42, 0x03}, make([]byte, 43)), errAll: ErrNotIP},
		{name: "linux_sll/arp", lt: LinkLinuxSLL, frame: sll(0x0806, make([]byte, 28)), errAll: ErrNotIP},

		// IPv4 headers.
		{name: "ipv4/options", lt: LinkEthernet, frame: ether(etherTypeIPv4, v4opts.packet(tcp(40000, 443))), want: tcp4},
		{name: "ipv4/icmp", lt: LinkEthernet, frame: ether(etherTypeIPv4, v4icmp.packet(icmpEcho(8))), want: icmp4},
		{name: "ipv4/udplite", lt: LinkRaw, frame: ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoUDPLite}.packet(udp(7, 8, nil)), want: want5(protoUDPLite, "192.0.2.1", "198.51.100.2", 7, 8)},
		{name: "ipv4/sctp", lt: LinkRaw, frame: ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoSCTP}.packet(sctp(3868, 3869)), want: want5(protoSCTP, "192.0.2.1", "198.51.100.2", 3868, 3869)},
		{name: "ipv4/ah/tcp", lt: LinkRaw, frame: ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoAH}.packet(cat(ah(protoTCP, 3), tcp(40000, 443))), want: tcp4},
		{name: "ipv4/ah-too-short", lt: LinkRaw, frame: ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoAH}.packet(cat([]byte{protoTCP, 0, 0, 0, 0, 0, 0, 0}, tcp(40000, 443))), want: tcp4, err5: ErrBadHeader},
		{name: "ipv4/esp", lt: LinkRaw, frame: ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: 50}.packet(make([]byte, 32)), want: want5(50, "192.0.2.1", "198.51.100.2", 0, 0)},
		{name: "ipv4/ipv6-ext-numbers-are-protocols", lt: LinkRaw, frame: ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: ip6DestOpts}.packet(cat(opts6(protoTCP, 0), tcp(1, 2))), want: want5(ip6DestOpts, "192.0.2.1", "198.51.100.2", 0, 0)},
		{name: "ipv4/first-fragment", lt: LinkEthernet, frame: ether(etherTypeIPv4, ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoTCP, moreFrags: true}.packet(tcp(40000, 443))), want: tcp4},
		{name: "ipv4/middle-fragment", lt: LinkEthernet, frame: ether(etherTypeIPv4, ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoTCP, fragOff: 185, moreFrags: true}.packet(make([]byte, 64))), want: noPorts(tcp4)},
		{name: "ipv4/last-fragment", lt: LinkEthernet, frame: ether(etherTypeIPv4, ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoUDP, fragOff: 1}.packet([]byte{1, 2})), want: noPorts(udp4)},
		{name: "ipv4/tso-zero-length", lt: LinkEthernet, frame: ether(etherTypeIPv4, ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoTCP, totalLen: 0x10000}.packet(tcp(40000, 443))), want: tcp4},
		{name: "ipv4/gre-tunnel", lt: LinkEthernet, frame: ether(etherTypeIPv4, ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: 47}.packet(cat([]byte{0, 0, 0x08, 0}, ip4{src: "10.0.0.1", dst: "10.0.0.2", proto: protoTCP}.packet(tcp(1, 2))))), want: gre},
		{name: "ipv4/ipip-tunnel", lt: LinkRaw, frame: ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: 4}.packet(ip4{src: "10.0.0.1", dst: "10.0.0.2", proto: protoTCP}.packet(tcp(1, 2))), want: want5(4, "192.0.2.1", "198.51.100.2", 0, 0)},
		{name: "ipv4/icmp-error-quoting-tcp", lt: LinkRaw, frame: v4icmp.packet(cat([]byte{3, 3, 0, 0, 0, 0, 0, 0}, ip4{src: "198.51.100.2", dst: "203.0.113.9", proto: protoTCP}.packet(tcp(9, 10)))), want: icmp4},
		{name: "ipv4/ethernet-padding", lt: LinkEthernet, frame: cat(ether(etherTypeIPv4, v4icmp.packet(icmpEcho(8))), make([]byte, 18)), want: icmp4},
		{name: "ipv4/ports-past-total-length", lt: LinkEthernet, frame: cat(ether(etherTypeIPv4, ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoTCP, totalLen: 22}.packet(nil)), []byte{0x9c, 0x40, 0x01, 0xbb}, make([]byte, 20)), want: tcp4, err5: ErrTruncated},
		{name: "ipv4/ihl-4", lt: LinkRaw, frame: ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoTCP, ihl: 4}.packet(tcp(1, 2)), errAll: ErrBadHeader},
		{name: "ipv4/total-below-header", lt: LinkRaw, frame: ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoTCP, totalLen: 19}.packet(tcp(1, 2)), errAll: ErrBadHeader},
		{name: "ipv4/options-past-total", lt: LinkRaw, frame: ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoTCP, options: make([]byte, 8), totalLen: 24}.packet(tcp(1, 2)), errAll: ErrBadHeader},
		{name: "ipv4-link/version-6", lt: LinkIPv4, frame: tcp6IP, errAll: ErrBadHeader},
		{name: "ethertype-ipv4/version-6", lt: LinkEthernet, frame: ether(etherTypeIPv4, tcp6IP), errAll: ErrBadHeader},
		{name: "raw/version-5", lt: LinkRaw, frame: ip4{src: "192.0.2.1", dst: "198.51.100.2", version: 5}.packet(nil), errAll: ErrBadHeader},

		// Snap length: the headers the kind needs are all there.
		{name: "snaplen/tcp-complete", lt: LinkEthernet, frame: snapped, want: tcp4},
		{name: "snaplen/in-tcp-ports", lt: LinkEthernet, frame: snapped[:14+20+4], want: tcp4},
		{name: "snaplen/cut-tcp-ports", lt: LinkEthernet, frame: snapped[:14+20+3], want: tcp4, err5: ErrTruncated},
		{name: "snaplen/cut-ipv4-header", lt: LinkEthernet, frame: snapped[:14+19], errAll: ErrTruncated},
		{name: "snaplen/cut-ipv4-options", lt: LinkEthernet, frame: ether(etherTypeIPv4, v4opts.packet(tcp(40000, 443)))[:14+28], errAll: ErrTruncated},
		{name: "snaplen/ipv6-cut-ext", lt: LinkRaw, frame: v6ext(ip6HopByHop, cat(opts6(protoTCP, 1), tcp(40000, 443)))[:40+12], want: tcp6, err5: ErrTruncated},

		// IPv6 extension headers.
		{name: "ipv6/sctp", lt: LinkRaw, frame: v6ext(protoSCTP, sctp(3868, 3869)), want: want5(protoSCTP, "2001:db8::1", "2001:db8:ffff::2", 3868, 3869)},
		{name: "ipv6/udplite", lt: LinkRaw, frame: v6ext(protoUDPLite, udp(7, 8, nil)), want: want5(protoUDPLite, "2001:db8::1", "2001:db8:ffff::2", 7, 8)},
		{name: "ipv6/icmp6", lt: LinkRaw, frame: v6ext(protoICMPv6, icmpEcho(128)), want: want5(protoICMPv6, "2001:db8::1", "2001:db8:ffff::2", 0, 0)},
		{name: "ipv6/hbh/tcp", lt: LinkRaw, frame: v6ext(ip6HopByHop, cat(opts6(protoTCP, 0), tcp(40000, 443))), want: tcp6},
		{name: "ipv6/hbh/routing/dest/udp", lt: LinkEthernet, frame: ether(etherTypeIPv6, v6ext(ip6HopByHop, cat(opts6(ip6Routing, 1), routing6(ip6DestOpts), opts6(protoUDP, 0), udp(5353, 53, nil)))), want: udp6},
		{name: "ipv6/first-fragment", lt: LinkEthernet, frame: ether(etherTypeIPv6, v6ext(ip6Fragment, cat(frag6(protoUDP, 0, true), udp(5353, 53, make([]byte, 100))))), want: udp6},
		{name: "ipv6/middle-fragment", lt: LinkEthernet, frame: ether(etherTypeIPv6, v6ext(ip6Fragment, cat(frag6(protoUDP, 14, true), make([]byte, 112)))), want: noPorts(udp6)},
		{name: "ipv6/dest/last-fragment", lt: LinkEthernet, frame: ether(etherTypeIPv6, v6ext(ip6DestOpts, cat(opts6(ip6Fragment, 0), frag6(protoTCP, 1, false), []byte{1, 2, 3}))), want: noPorts(tcp6)},
		{name: "ipv6/ah/tcp", lt: LinkRaw, frame: v6ext(protoAH, cat(ah(protoTCP, 3), tcp(40000, 443))), want: tcp6},
		{name: "ipv6/esp", lt: LinkRaw, frame: v6ext(50, make([]byte, 40)), want: want5(50, "2001:db8::1", "2001:db8:ffff::2", 0, 0)},
		{name: "ipv6/dest/no-next-header", lt: LinkRaw, frame: v6ext(ip6DestOpts, opts6(59, 0)), want: want5(59, "2001:db8::1", "2001:db8:ffff::2", 0, 0)},
		{name: "ipv6/mobility", lt: LinkRaw, frame: v6ext(135, []byte{59, 0, 5, 0, 0, 0, 0, 0}), want: want5(135, "2001:db8::1", "2001:db8:ffff::2", 0, 0)},
		{name: "ipv6/ext-x8", lt: LinkRaw, frame: v6ext(ip6DestOpts, cat(destOptsChain(8, protoTCP), tcp(40000, 443))), want: tcp6},
		{name: "ipv6/ext-x9", lt: LinkRaw, frame: v6ext(ip6DestOpts, cat(destOptsChain(9, protoTCP), tcp(40000, 443))), want: tcp6, err5: ErrTooManyHeaders},
		{name: "ipv6/jumbo-or-gso-length-0", lt: LinkRaw, frame: ip6{src: "2001:db8::1", dst: "2001:db8:ffff::2", next: protoTCP, plen: -1}.packet(tcp(40000, 443)), want: tcp6},
		{name: "ipv6/ext-past-payload-length", lt: LinkRaw, frame: ip6{src: "2001:db8::1", dst: "2001:db8:ffff::2", next: ip6HopByHop, plen: 4}.packet(cat(opts6(protoTCP, 0), tcp(40000, 443))), want: tcp6, err5: ErrTruncated},
		{name: "ipv6/ipv4-mapped", lt: LinkRaw, frame: ip6{src: "::ffff:192.0.2.1", dst: "::ffff:198.51.100.2", next: protoTCP}.packet(tcp(1, 2)), want: want5(protoTCP, "::ffff:192.0.2.1", "::ffff:198.51.100.2", 1, 2)},
		{name: "ipv6-link/version-4", lt: LinkIPv6, frame: tcp4IP, errAll: ErrBadHeader},
		{name: "ipv6/cut-fixed-header", lt: LinkRaw, frame: tcp6IP[:39], errAll: ErrTruncated},

		// Truncated link headers.
		{name: "ethernet/empty", lt: LinkEthernet, frame: nil, errAll: ErrTruncated},
		{name: "ethernet/header-only", lt: LinkEthernet, frame: ether(etherTypeIPv4), errAll: ErrTruncated},
		{name: "linux_sll2/short", lt: LinkLinuxSLL2, frame: sll2(etherTypeIPv4, nil)[:19], errAll: ErrTruncated},
	}
}

func TestParse(t *testing.T) {
	for _, c := range parseCases() {
		t.Run(c.name, func(t *testing.T) {
			orig := bytes.Clone(c.frame)
			for kind := KeySrc; kind <= Key5Tuple; kind++ {
				want, wantErr := c.expect(kind)
				got, err := Parse(c.frame, c.lt, kind)
				if err != wantErr || got != want {
					t.Errorf("Parse(%v) = %v, %v; want %v, %v", kind, got, err, want, wantErr)
				}
			}
			if !bytes.Equal(c.frame, orig) {
				t.Error("Parse modified the frame")
			}
		})
	}
}

// TestParsePrefixes cuts every test frame at every byte: a prefix must give
// the result of the whole frame or ErrTruncated, never another key or error,
// and never a panic.
func TestParsePrefixes(t *testing.T) {
	for _, c := range parseCases() {
		t.Run(c.name, func(t *testing.T) {
			for kind := KeySrc; kind <= Key5Tuple; kind++ {
				want, wantErr := c.expect(kind)
				for n := range len(c.frame) {
					got, err := Parse(c.frame[:n], c.lt, kind)
					if err != ErrTruncated && (err != wantErr || got != want) {
						t.Fatalf("Parse(frame[:%d], %v) = %v, %v; want %v, %v or ErrTruncated", n, kind, got, err, want, wantErr)
					}
				}
			}
		})
	}
}

func TestParseBadKind(t *testing.T) {
	for _, kind := range []KeyKind{0, Key5Tuple + 1, 255} {
		if k, err := Parse(tcp4IP, LinkRaw, kind); err != ErrBadKind || k.IsValid() {
			t.Errorf("Parse(kind %d) = %v, %v; want ErrBadKind", kind, k, err)
		}
	}
}

// TestParseNoAllocs proves that Parse allocates nothing, on success and on
// each kind of failure.
func TestParseNoAllocs(t *testing.T) {
	frames := []struct {
		name  string
		lt    LinkType
		frame []byte
	}{
		{"ethernet/ipv4/tcp", LinkEthernet, ether(etherTypeIPv4, tcp4IP)},
		{"vlan/ipv6/udp", LinkEthernet, ether(etherTypeVLAN, vlan(100, etherTypeIPv6), udp6IP)},
		{"qinq/mpls/ipv4", LinkEthernet, ether(etherTypeQinQ, vlan(1, etherTypeVLAN), vlan(2, etherTypeMPLSUnicast), mplsStack(3), tcp4IP)},
		{"pppoe/ipv6", LinkEthernet, ether(etherTypePPPoESession, pppoe(pppIPv6, tcp6IP))},
		{"ipv6/hbh/frag/udp", LinkRaw, ip6{src: "2001:db8::1", dst: "2001:db8::2", next: ip6HopByHop}.packet(cat(opts6(ip6Fragment, 0), frag6(protoUDP, 0, true), udp(1, 2, nil)))},
		{"ipv4/fragment", LinkRaw, ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoUDP, fragOff: 3}.packet(nil)},
		{"linux_sll2/ipv4", LinkLinuxSLL2, sll2(etherTypeIPv4, udp4IP)},
		{"null/ipv6", LinkNull, loopback(binary.LittleEndian, afInet6Darwin, tcp6IP)},
		{"err/arp", LinkEthernet, ether(0x0806, make([]byte, 28))},
		{"err/truncated", LinkEthernet, ether(etherTypeIPv4, tcp4IP)[:30]},
		{"err/bad-header", LinkIPv6, tcp4IP},
		{"err/unsupported-link", 9999, tcp4IP},
	}
	for _, f := range frames {
		for kind := KeySrc; kind <= Key5Tuple; kind++ {
			allocs := testing.AllocsPerRun(100, func() {
				sinkKey, sinkErr = Parse(f.frame, f.lt, kind)
			})
			if allocs != 0 {
				t.Errorf("Parse(%s, %v) allocates %v times per call", f.name, kind, allocs)
			}
			allocs = testing.AllocsPerRun(100, func() {
				sinkErr = sinkKey.Decode(f.frame, f.lt, kind)
			})
			if allocs != 0 {
				t.Errorf("Decode(%s, %v) allocates %v times per call", f.name, kind, allocs)
			}
		}
	}
}

var (
	sinkKey  Key
	sinkErr  error
	sinkHash uint64
)

func TestLinkType(t *testing.T) {
	for _, lt := range []LinkType{LinkNull, LinkEthernet, LinkRaw, LinkLoop, LinkLinuxSLL, LinkIPv4, LinkIPv6, LinkLinuxSLL2} {
		if !lt.Supported() {
			t.Errorf("%v: not Supported", lt)
		}
		if s := lt.String(); strings.HasPrefix(s, "linktype(") {
			t.Errorf("LinkType(%d).String() = %q", uint32(lt), s)
		}
	}
	if LinkType(105).Supported() || LinkType(105).String() != "linktype(105)" {
		t.Errorf("LinkType(105): Supported %v, String %q", LinkType(105).Supported(), LinkType(105).String())
	}
}

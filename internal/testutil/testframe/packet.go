package testframe

import (
	"encoding/binary"
	"net/netip"
)

// Builders of the packets the capture tests send and filter: the pcap-filter
// compiler's tables (capture/pcapfilter) and the AF_PACKET tests
// (capture/afpacket) use the same ones, so that a frame means the same in
// both. Each returns a new slice the caller owns.

// IP protocol numbers Transport knows.
const (
	protoTCP  = 6
	protoUDP  = 17
	protoSCTP = 132
)

// IPv4 returns an IPv4 header from src to dst (IPv4 addresses) carrying
// protocol proto, with options (a multiple of 4 bytes) after the fixed 20
// bytes, the flags and fragment offset field flagsFrag (the offset in 8-byte
// units), TTL 64 and a valid checksum, followed by payload.
func IPv4(src, dst netip.Addr, proto byte, options []byte, flagsFrag uint16, payload []byte) []byte {
	hl := 20 + len(options)
	b := make([]byte, hl, hl+len(payload))
	b[0] = 0x40 | byte(hl/4)
	binary.BigEndian.PutUint16(b[2:], uint16(hl+len(payload)))
	binary.BigEndian.PutUint16(b[4:], 0x1234)
	binary.BigEndian.PutUint16(b[6:], flagsFrag)
	b[8], b[9] = 64, proto
	s, d := src.As4(), dst.As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	copy(b[20:], options)
	var sum uint32
	for i := 0; i < hl; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(b[10:], ^uint16(sum))
	return append(b, payload...)
}

// IPv6 returns an IPv6 header from src to dst whose next header is next,
// with hop limit 64, followed by payload.
func IPv6(src, dst netip.Addr, next byte, payload []byte) []byte {
	b := make([]byte, 40, 40+len(payload))
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(len(payload)))
	b[6], b[7] = next, 64
	s, d := src.As16(), dst.As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	return append(b, payload...)
}

// Transport returns a transport header of protocol proto with the given
// ports, followed by 4 bytes of payload: a TCP SYN (20 bytes), a UDP header
// whose length covers the payload (8), an SCTP common header (12), or for
// any other protocol (ICMP, ICMPv6, IGMP) 8 bytes whose first four, type
// and code for those, are sport and dport.
func Transport(proto byte, sport, dport uint16) []byte {
	var b []byte
	switch proto {
	case protoTCP:
		b = make([]byte, 20)
		b[12] = 5 << 4
		b[13] = 0x02 // SYN
	case protoUDP:
		b = make([]byte, 8)
		binary.BigEndian.PutUint16(b[4:], 8+4)
	case protoSCTP:
		b = make([]byte, 12)
	default:
		b = make([]byte, 8)
	}
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	return append(b, "data"...)
}

// ARP returns an Ethernet/IPv4 ARP (or RARP) message of operation op
// (1 request, 2 reply, 3 and 4 RARP) from sender to target, IPv4 addresses.
func ARP(op uint16, sender, target netip.Addr) []byte {
	b := make([]byte, 28)
	binary.BigEndian.PutUint16(b[0:], 1)      // Ethernet
	binary.BigEndian.PutUint16(b[2:], 0x0800) // IPv4
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:], op)
	copy(b[8:], []byte{2, 0, 0, 0, 0, 1})
	s, d := sender.As4(), target.As4()
	copy(b[14:], s[:])
	copy(b[24:], d[:])
	return b
}

// Ethernet returns payload behind an Ethernet header of EtherType etherType
// from 02:00:00:00:00:01 to 02:00:00:00:00:02 (locally administered), with
// an 802.1Q tag of VLAN 100 before the EtherType when vlan is set.
func Ethernet(etherType uint16, vlan bool, payload []byte) []byte {
	b := make([]byte, 0, 18+len(payload))
	b = append(b, 0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1)
	if vlan {
		b = append(b, 0x81, 0x00, 0x00, 0x64)
	}
	b = binary.BigEndian.AppendUint16(b, etherType)
	return append(b, payload...)
}

package testframe

import (
	"encoding/binary"
	"net/netip"
)

// UDP4Frame returns an Ethernet/IPv4/UDP frame of size bytes (at least 42)
// from src to dst (IPv4 addresses), with a valid IPv4 header checksum and a
// zero UDP checksum (none), between locally administered MAC addresses. The
// payload, size-42 bytes, is zero.
func UDP4Frame(src, dst netip.Addr, sport, dport uint16, size int) []byte {
	f := make([]byte, max(size, 14+20+8))
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 1})
	copy(f[6:12], []byte{0x02, 0, 0, 0, 0, 2})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	ip[8], ip[9] = 64, 17
	s, d := src.As4(), dst.As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	var sum uint32
	for j := 0; j < 20; j += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[j:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	u := ip[20:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	return f
}

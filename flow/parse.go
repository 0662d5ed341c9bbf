package flow

import (
	"encoding/binary"
	"strconv"
)

// LinkType is the link-layer header type of a frame, numbered as pcap's
// LINKTYPE_ values (the link type field of pcap and pcapng files, and
// gopacket's layers.LinkType).
type LinkType uint32

// Link types Parse understands.
const (
	LinkNull      LinkType = 0   // BSD loopback: 4-byte address family in the capturing host's byte order
	LinkEthernet  LinkType = 1   // Ethernet II
	LinkRaw       LinkType = 101 // raw IPv4 or IPv6, told apart by the version nibble
	LinkLoop      LinkType = 108 // OpenBSD loopback: 4-byte address family in network byte order
	LinkLinuxSLL  LinkType = 113 // Linux cooked capture v1: 16-byte header, protocol at offset 14
	LinkIPv4      LinkType = 228 // raw IPv4
	LinkIPv6      LinkType = 229 // raw IPv6
	LinkLinuxSLL2 LinkType = 276 // Linux cooked capture v2: 20-byte header, protocol at offset 0
)

// Supported reports whether Parse understands frames of link type lt.
func (lt LinkType) Supported() bool {
	switch lt {
	case LinkNull, LinkEthernet, LinkRaw, LinkLoop, LinkLinuxSLL, LinkIPv4, LinkIPv6, LinkLinuxSLL2:
		return true
	}
	return false
}

// String returns the lower-case name of lt ("ethernet", "linux_sll", ...) or
// "linktype(N)" for other values.
func (lt LinkType) String() string {
	switch lt {
	case LinkNull:
		return "null"
	case LinkEthernet:
		return "ethernet"
	case LinkRaw:
		return "raw"
	case LinkLoop:
		return "loop"
	case LinkLinuxSLL:
		return "linux_sll"
	case LinkIPv4:
		return "ipv4"
	case LinkIPv6:
		return "ipv6"
	case LinkLinuxSLL2:
		return "linux_sll2"
	}
	return "linktype(" + strconv.FormatUint(uint64(lt), 10) + ")"
}

// Bounds on the headers Parse walks. The XDP program must unroll its loops
// to the same bounds so that both sides key the same frames.
const (
	// MaxLinkHeaders bounds the VLAN tags, MPLS labels and PPPoE headers
	// between the link header and the IP header, together.
	MaxLinkHeaders = 16
	// MaxIPv6Headers bounds the IPv6 extension headers (and IPsec AH
	// headers after IPv4) before the transport header.
	MaxIPv6Headers = 8
)

// EtherTypes.
const (
	etherTypeIPv4          = 0x0800
	etherTypeIPv6          = 0x86dd
	etherTypeVLAN          = 0x8100 // 802.1Q C-tag
	etherTypeQinQ          = 0x88a8 // 802.1ad S-tag
	etherTypeQinQOld       = 0x9100 // pre-802.1ad S-tag
	etherTypeMPLSUnicast   = 0x8847
	etherTypeMPLSMulticast = 0x8848
	etherTypePPPoESession  = 0x8864
)

// PPP protocol numbers.
const (
	pppIPv4 = 0x0021
	pppIPv6 = 0x0057
)

// BSD address families of the loopback link types. IPv6 has a different
// number on each BSD.
const (
	afInet         = 2
	afInet6NetBSD  = 24 // also OpenBSD
	afInet6FreeBSD = 28
	afInet6Darwin  = 30
)

// IPv6 extension header numbers.
const (
	ip6HopByHop = 0
	ip6Routing  = 43
	ip6Fragment = 44
	ip6DestOpts = 60
)

// Parse returns the key of the given kind for frame, a packet captured on a
// link of type lt.
//
// Parse applies the package's parsing rules (see the package documentation):
// it walks link headers, VLAN tags, MPLS labels and PPPoE to the outermost IP
// header and reads only the headers the kind needs. It fails with one of the
// package's sentinel errors, unwrapped; it never panics, does not allocate,
// and neither modifies nor retains frame.
func Parse(frame []byte, lt LinkType, kind KeyKind) (Key, error) {
	var k Key
	err := k.Decode(frame, lt, kind)
	return k, err
}

// Decode sets *k to the key Parse returns for the same arguments, and
// returns Parse's error (k is then the zero Key). It decodes in place,
// without the copy of the 40-byte key Parse returns by value: the
// per-packet path, with HashKey.
func (k *Key) Decode(frame []byte, lt LinkType, kind KeyKind) error {
	if !kind.IsValid() {
		*k = Key{}
		return ErrBadKind
	}
	// The parsers fill in this one Key through a pointer rather than
	// return keys up the call chain, which would copy 40 bytes per level.
	*k = Key{kind: kind}
	if err := k.parse(frame, lt); err != nil {
		*k = Key{}
		return err
	}
	return nil
}

// parse parses frame into k, whose kind is set.
func (k *Key) parse(frame []byte, lt LinkType) error {
	switch lt {
	case LinkEthernet:
		if len(frame) < 14 {
			return ErrTruncated
		}
		return k.parseEtherType(frame[14:], binary.BigEndian.Uint16(frame[12:14]))
	case LinkLinuxSLL:
		if len(frame) < 16 {
			return ErrTruncated
		}
		return k.parseEtherType(frame[16:], binary.BigEndian.Uint16(frame[14:16]))
	case LinkLinuxSLL2:
		if len(frame) < 20 {
			return ErrTruncated
		}
		return k.parseEtherType(frame[20:], binary.BigEndian.Uint16(frame[0:2]))
	case LinkRaw:
		return k.parseIP(frame, ErrBadHeader)
	case LinkIPv4:
		return k.parseIPv4(frame)
	case LinkIPv6:
		return k.parseIPv6(frame)
	case LinkNull:
		if len(frame) < 4 {
			return ErrTruncated
		}
		// The family is in the byte order of the host that captured the
		// frame, which the file does not record. The valid families are
		// small numbers, so at most one byte order yields one of them.
		family := binary.LittleEndian.Uint32(frame[:4])
		if !isLoopbackIP(family) {
			family = binary.BigEndian.Uint32(frame[:4])
		}
		return k.parseFamily(frame[4:], family)
	case LinkLoop:
		if len(frame) < 4 {
			return ErrTruncated
		}
		return k.parseFamily(frame[4:], binary.BigEndian.Uint32(frame[:4]))
	}
	return ErrUnsupportedLink
}

func isLoopbackIP(family uint32) bool {
	switch family {
	case afInet, afInet6NetBSD, afInet6FreeBSD, afInet6Darwin:
		return true
	}
	return false
}

func (k *Key) parseFamily(b []byte, family uint32) error {
	switch family {
	case afInet:
		return k.parseIPv4(b)
	case afInet6NetBSD, afInet6FreeBSD, afInet6Darwin:
		return k.parseIPv6(b)
	}
	return ErrNotIP
}

// parseEtherType parses b, the payload of a link header whose EtherType is
// etype, walking VLAN tags, MPLS labels and PPPoE session headers.
func (k *Key) parseEtherType(b []byte, etype uint16) error {
	for walked := 0; ; walked++ {
		switch etype {
		case etherTypeIPv4:
			return k.parseIPv4(b)
		case etherTypeIPv6:
			return k.parseIPv6(b)
		}
		if walked == MaxLinkHeaders {
			return ErrTooManyHeaders
		}
		switch etype {
		case etherTypeVLAN, etherTypeQinQ, etherTypeQinQOld:
			// Tag control information, then the next EtherType.
			if len(b) < 4 {
				return ErrTruncated
			}
			etype = binary.BigEndian.Uint16(b[2:4])
			b = b[4:]
		case etherTypeMPLSUnicast, etherTypeMPLSMulticast:
			// 4-byte label stack entries up to the one with the
			// bottom-of-stack bit. Nothing names the payload: guess
			// it from the IP version nibble, as routers doing ECMP
			// hashing do; anything else (a pseudowire control
			// word, ...) is not IP.
			for {
				if len(b) < 4 {
					return ErrTruncated
				}
				bottom := b[2]&1 != 0
				b = b[4:]
				if bottom {
					return k.parseIP(b, ErrNotIP)
				}
				walked++
				if walked == MaxLinkHeaders {
					return ErrTooManyHeaders
				}
			}
		case etherTypePPPoESession:
			// Version/type, code and session ID (the receiver does
			// not check them, nor do we), the payload length, then
			// the PPP protocol field, 2 bytes or 1 when compressed
			// (odd first byte). The length bounds the payload, as
			// the IP length does: bytes past it are link padding.
			if len(b) < 7 {
				return ErrTruncated
			}
			if end := 6 + int(binary.BigEndian.Uint16(b[4:6])); end < len(b) {
				b = b[:end]
			}
			if len(b) < 7 {
				return ErrTruncated
			}
			proto := uint16(b[6])
			b = b[7:]
			if proto&1 == 0 {
				if len(b) < 1 {
					return ErrTruncated
				}
				proto = proto<<8 | uint16(b[0])
				b = b[1:]
			}
			switch proto {
			case pppIPv4:
				etype = etherTypeIPv4
			case pppIPv6:
				etype = etherTypeIPv6
			default:
				return ErrNotIP
			}
		default:
			return ErrNotIP
		}
	}
}

// parseIP parses an IP packet whose version is only known from its first
// nibble; other versions fail with errOther.
func (k *Key) parseIP(b []byte, errOther error) error {
	if len(b) < 1 {
		return ErrTruncated
	}
	switch b[0] >> 4 {
	case 4:
		return k.parseIPv4(b)
	case 6:
		return k.parseIPv6(b)
	}
	return errOther
}

func (k *Key) parseIPv4(b []byte) error {
	if len(b) < 1 {
		return ErrTruncated
	}
	if b[0]>>4 != 4 {
		return ErrBadHeader
	}
	hlen := int(b[0]&0x0f) * 4
	if hlen < 20 {
		return ErrBadHeader
	}
	if len(b) < hlen {
		return ErrTruncated
	}
	// A total length beyond the captured bytes is the snap length at
	// work; one shorter than the header is corrupt, except 0, which TSO
	// captures show for segments longer than 64 KiB.
	total := int(binary.BigEndian.Uint16(b[2:4]))
	if total != 0 {
		if total < hlen {
			return ErrBadHeader
		}
		if total < len(b) {
			b = b[:total] // drop link-layer padding
		}
	}
	switch k.kind {
	case KeySrc:
		copy(k.src[:4], b[12:16])
		return nil
	case KeyDst:
		copy(k.dst[:4], b[16:20])
		return nil
	case KeyPair:
		copy(k.src[:4], b[12:16])
		copy(k.dst[:4], b[16:20])
		return nil
	}
	copy(k.src[:4], b[12:16])
	copy(k.dst[:4], b[16:20])
	k.proto = b[9]
	if binary.BigEndian.Uint16(b[6:8])&0x1fff != 0 {
		return nil // non-first fragment: the ports are in the first
	}
	return k.withTransport(b[hlen:], b[9], false)
}

func (k *Key) parseIPv6(b []byte) error {
	if len(b) < 1 {
		return ErrTruncated
	}
	if b[0]>>4 != 6 {
		return ErrBadHeader
	}
	if len(b) < 40 {
		return ErrTruncated
	}
	k.flags = flagV6
	switch k.kind {
	case KeySrc:
		k.src = [16]byte(b[8:24])
		return nil
	case KeyDst:
		k.dst = [16]byte(b[24:40])
		return nil
	}
	k.src = [16]byte(b[8:24])
	k.dst = [16]byte(b[24:40])
	if k.kind == KeyPair {
		return nil
	}
	// A payload length of 0 is a jumbogram or a GSO capture: the captured
	// bytes are all there is to go by.
	if plen := int(binary.BigEndian.Uint16(b[4:6])); plen != 0 && 40+plen < len(b) {
		b = b[:40+plen]
	}
	return k.withTransport(b[40:], b[6], true)
}

// withTransport completes a 5-tuple key from b, the payload of the IP header,
// whose protocol (IPv4) or next header (IPv6) is next. It walks IPsec AH
// headers and, after IPv6, the IPv6 extension headers, then reads the ports
// of protocols that have them.
func (k *Key) withTransport(b []byte, next uint8, v6 bool) error {
	for walked := 0; ; walked++ {
		hlen := 0
		switch {
		case next == protoAH:
			// Length in 4-byte words, minus 2; at least SPI and
			// sequence number follow the first word.
			if len(b) < 2 {
				return ErrTruncated
			}
			hlen = (int(b[1]) + 2) * 4
			if hlen < 12 {
				return ErrBadHeader
			}
		case v6 && (next == ip6HopByHop || next == ip6Routing || next == ip6DestOpts):
			// Length in 8-byte units, not counting the first.
			if len(b) < 2 {
				return ErrTruncated
			}
			hlen = (int(b[1]) + 1) * 8
		case v6 && next == ip6Fragment:
			hlen = 8
			if len(b) < hlen {
				return ErrTruncated
			}
			if binary.BigEndian.Uint16(b[2:4])&0xfff8 != 0 {
				// A non-first fragment: its protocol is the
				// fragment header's next header, its ports are in
				// the first fragment.
				k.proto = b[0]
				return nil
			}
		default:
			k.proto = next
			if !hasPorts(next) {
				return nil
			}
			if len(b) < 4 {
				return ErrTruncated
			}
			k.sport = binary.BigEndian.Uint16(b[0:2])
			k.dport = binary.BigEndian.Uint16(b[2:4])
			k.flags |= flagPorts
			return nil
		}
		if walked == MaxIPv6Headers {
			return ErrTooManyHeaders
		}
		if len(b) < hlen {
			return ErrTruncated
		}
		next = b[0]
		b = b[hlen:]
	}
}

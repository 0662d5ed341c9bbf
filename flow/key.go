package flow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
)

// KeyKind selects the fields of a packet that make up its flow key.
// The zero KeyKind is invalid.
type KeyKind uint8

// Key kinds, in the order of the fields they add.
const (
	KeySrc    KeyKind = iota + 1 // source address
	KeyDst                       // destination address
	KeyPair                      // source and destination addresses
	Key5Tuple                    // protocol, addresses and ports
)

var kindNames = [...]string{KeySrc: "src", KeyDst: "dst", KeyPair: "pair", Key5Tuple: "5tuple"}

// ParseKeyKind returns the KeyKind named s: "src", "dst", "pair" or "5tuple",
// the spellings [KeyKind.String] produces and the CLI's --key flag takes.
// Any other string is an error wrapping [ErrBadKind].
func ParseKeyKind(s string) (KeyKind, error) {
	for k, name := range kindNames {
		if k != 0 && name == s {
			return KeyKind(k), nil
		}
	}
	return 0, fmt.Errorf("%w %q: valid kinds are src, dst, pair, 5tuple", ErrBadKind, s)
}

// IsValid reports whether k is one of the defined kinds.
func (k KeyKind) IsValid() bool { return k >= KeySrc && k <= Key5Tuple }

// String returns the name ParseKeyKind accepts, or "KeyKind(N)" for an
// invalid kind.
func (k KeyKind) String() string {
	if !k.IsValid() {
		return "KeyKind(" + strconv.Itoa(int(k)) + ")"
	}
	return kindNames[k]
}

// MarshalText implements [encoding.TextMarshaler]. An invalid kind is an
// error.
func (k KeyKind) MarshalText() ([]byte, error) {
	if !k.IsValid() {
		return nil, fmt.Errorf("%w: %d", ErrBadKind, uint8(k))
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler] with ParseKeyKind, so a
// KeyKind can be bound to a flag with [flag.TextVar].
func (k *KeyKind) UnmarshalText(text []byte) error {
	kind, err := ParseKeyKind(string(text))
	if err != nil {
		return err
	}
	*k = kind
	return nil
}

// IP protocol numbers the package names or reads ports from.
const (
	protoICMP    = 1
	protoTCP     = 6
	protoUDP     = 17
	protoAH      = 51
	protoICMPv6  = 58
	protoSCTP    = 132
	protoUDPLite = 136
)

// hasPorts reports whether the transport protocol proto starts with a 16-bit
// source port and a 16-bit destination port.
func hasPorts(proto uint8) bool {
	switch proto {
	case protoTCP, protoUDP, protoSCTP, protoUDPLite:
		return true
	}
	return false
}

// Key flag bits.
const (
	flagV6     = 1 << 0 // addresses are IPv6 (16 bytes) rather than IPv4 (the first 4 bytes)
	flagPorts  = 1 << 1 // sport and dport were read from the transport header
	flagPrefix = 1 << 2 // addresses are networks of prefix length bits (Mask.Apply)
	flagSeg    = 1 << 3 // the key was taken inside a VXLAN or Geneve segment, vni (DecodeDecap)
)

// MaxSegment is the largest segment identifier: VNIs are 24 bits.
const MaxSegment = 1<<24 - 1

// Key is the flow key of a packet: the fields its [KeyKind] selects, and
// zero in every other field, so that all packets of a flow give equal keys.
//
// A key holds hosts, or networks: a key [Mask.Apply] masked holds the
// networks of its addresses, with their prefix length ([Key.Bits]), and
// prints them in CIDR form. A network key never equals a host key, nor one
// of another length.
//
// A key taken from inside a VXLAN or Geneve tunnel ([Key.DecodeDecap])
// also holds the tunnel's 24-bit VNI, its segment ([Key.Segment]): the same
// addresses in two segments are two keys. A key without a segment has
// exactly the bytes it had before segments existed, and the four bytes of
// the segment zero.
//
// Key is a comparable value of fixed size (44 bytes) holding no pointers,
// like [netip.Addr]: compare keys with ==, use them as map keys, copy them
// into rings. The zero Key is invalid. Make keys with [Parse] or [MakeKey].
type Key struct {
	src   [16]byte // IPv4 addresses use the first 4 bytes
	dst   [16]byte
	sport uint16
	dport uint16
	proto uint8
	kind  KeyKind
	flags uint8
	bits  uint8  // prefix length of the addresses, with flagPrefix; 0 otherwise
	seg   uint32 // VNI, at most MaxSegment, with flagSeg; 0 otherwise
}

// MakeKey returns the key of kind with the given fields: the key of a
// flow record that names its fields rather than carrying the packet
// (collect's NetFlow, IPFIX and sFlow flow records), and of tests and
// synthetic traffic. Fields the kind does not hold are ignored, so
// MakeKey(KeySrc, a, b, 6, 1, 2) == MakeKey(KeySrc, a, netip.Addr{}, 0, 0, 0).
// A 5-tuple key keeps the ports only when proto carries ports (TCP, UDP,
// SCTP, UDP-Lite), as Parse does. An IPv4-mapped IPv6 address stays IPv6 and
// zones are dropped.
//
// MakeKey returns the invalid zero Key when kind is invalid, when an address
// the kind holds is invalid, or when the two addresses of a pair or 5-tuple
// differ in family.
func MakeKey(kind KeyKind, src, dst netip.Addr, proto uint8, sport, dport uint16) Key {
	var k Key
	switch kind {
	case KeySrc:
		if !src.IsValid() {
			return Key{}
		}
		k.setSrc(src)
	case KeyDst:
		if !dst.IsValid() {
			return Key{}
		}
		k.setDst(dst)
	case KeyPair, Key5Tuple:
		if !src.IsValid() || !dst.IsValid() || src.Is6() != dst.Is6() {
			return Key{}
		}
		k.setSrc(src)
		k.setDst(dst)
		if kind == Key5Tuple {
			k.proto = proto
			if hasPorts(proto) {
				k.sport, k.dport = sport, dport
				k.flags |= flagPorts
			}
		}
	default:
		return Key{}
	}
	k.kind = kind
	return k
}

func (k *Key) setSrc(a netip.Addr) {
	if a.Is4() {
		a4 := a.As4()
		copy(k.src[:], a4[:])
	} else {
		k.src = a.As16()
		k.flags |= flagV6
	}
}

func (k *Key) setDst(a netip.Addr) {
	if a.Is4() {
		a4 := a.As4()
		copy(k.dst[:], a4[:])
	} else {
		k.dst = a.As16()
		k.flags |= flagV6
	}
}

// Segment returns the VXLAN or Geneve VNI of the tunnel k was taken
// inside ([Key.DecodeDecap]), and ok true; 0 and false for a key without
// a segment.
func (k Key) Segment() (vni uint32, ok bool) { return k.seg, k.flags&flagSeg != 0 }

// WithSegment returns k in the segment vni, as DecodeDecap keys a packet
// inside a VXLAN or Geneve tunnel of that VNI, for tests and synthetic
// traffic. It returns the zero Key when k is the zero Key or vni is more
// than MaxSegment (24 bits).
func (k Key) WithSegment(vni uint32) Key {
	if !k.IsValid() || vni > MaxSegment {
		return Key{}
	}
	k.flags |= flagSeg
	k.seg = vni
	return k
}

// IsValid reports whether k is a key made by Parse or MakeKey, rather than
// the zero Key.
func (k Key) IsValid() bool { return k.kind != 0 }

// Kind returns the kind of k; it is 0 for the zero Key.
func (k Key) Kind() KeyKind { return k.kind }

// Is6 reports whether the addresses of k are IPv6 addresses.
func (k Key) Is6() bool { return k.flags&flagV6 != 0 }

func (k Key) addr(b *[16]byte) netip.Addr {
	if k.Is6() {
		return netip.AddrFrom16(*b)
	}
	return netip.AddrFrom4([4]byte(b[:4]))
}

// Src returns the source address, or the invalid Addr when the kind of k
// holds none (KeyDst, or the zero Key). For a network key it is the
// network's address (see SrcPrefix).
func (k Key) Src() netip.Addr {
	if k.kind == KeyDst || !k.IsValid() {
		return netip.Addr{}
	}
	return k.addr(&k.src)
}

// Dst returns the destination address, or the invalid Addr when the kind of
// k holds none (KeySrc, or the zero Key).
func (k Key) Dst() netip.Addr {
	if k.kind == KeySrc || !k.IsValid() {
		return netip.Addr{}
	}
	return k.addr(&k.dst)
}

// Bits returns the prefix length of the addresses of a network key (one
// [Mask.Apply] masked), or -1 for a host key and the zero Key.
func (k Key) Bits() int {
	if k.flags&flagPrefix == 0 {
		return -1
	}
	return int(k.bits)
}

// prefix returns a as the prefix of k: of k's length for a network key,
// the whole address for a host key.
func (k Key) prefix(a netip.Addr) netip.Prefix {
	if !a.IsValid() {
		return netip.Prefix{}
	}
	bits := a.BitLen()
	if k.flags&flagPrefix != 0 {
		bits = int(k.bits)
	}
	return netip.PrefixFrom(a, bits)
}

// SrcPrefix returns the source network of a network key, or the source
// address as a prefix of its full length (/32, /128) for a host key; the
// invalid Prefix when the kind of k holds no source.
func (k Key) SrcPrefix() netip.Prefix { return k.prefix(k.Src()) }

// DstPrefix returns the destination network of a network key, or the
// destination address as a prefix of its full length for a host key; the
// invalid Prefix when the kind of k holds no destination.
func (k Key) DstPrefix() netip.Prefix { return k.prefix(k.Dst()) }

// AppendSrc appends the text form of the source: the address of a host
// key ("10.1.2.3"), the network of a network key in CIDR form
// ("10.1.2.0/24", "2001:db8:1:2::/64"). It appends nothing when the kind
// of k holds no source. It does not allocate beyond growing b.
func (k Key) AppendSrc(b []byte) []byte {
	if k.kind == KeyDst || !k.IsValid() {
		return b
	}
	return k.appendAddr(b, &k.src)
}

// AppendDst appends the text form of the destination, as AppendSrc does
// for the source.
func (k Key) AppendDst(b []byte) []byte {
	if k.kind == KeySrc || !k.IsValid() {
		return b
	}
	return k.appendAddr(b, &k.dst)
}

func (k *Key) appendAddr(b []byte, a *[16]byte) []byte {
	b = k.addr(a).AppendTo(b)
	if k.flags&flagPrefix != 0 {
		b = append(b, '/')
		b = strconv.AppendUint(b, uint64(k.bits), 10)
	}
	return b
}

// appendAddrPort appends the text form of an address and its port:
// 10.0.0.1:80, [2001:db8::1]:80, and for networks 10.0.0.0/24:80,
// [2001:db8::/64]:80.
func (k *Key) appendAddrPort(b []byte, a *[16]byte, port uint16) []byte {
	if k.Is6() {
		b = append(b, '[')
		b = k.appendAddr(b, a)
		b = append(b, ']')
	} else {
		b = k.appendAddr(b, a)
	}
	b = append(b, ':')
	return strconv.AppendUint(b, uint64(port), 10)
}

// Proto returns the IP protocol number of a 5-tuple key: the upper-layer
// protocol after any IPv6 extension headers and IPsec AH, or the protocol of
// the fragment for a non-first fragment. It is 0 for other kinds.
func (k Key) Proto() uint8 { return k.proto }

// HasPorts reports whether k holds transport ports. It is false for keys of
// kinds other than Key5Tuple, for protocols without ports and for non-first
// fragments, whose ports are in the first fragment only.
func (k Key) HasPorts() bool { return k.flags&flagPorts != 0 }

// SrcPort returns the source port, or 0 when !k.HasPorts().
func (k Key) SrcPort() uint16 { return k.sport }

// DstPort returns the destination port, or 0 when !k.HasPorts().
func (k Key) DstPort() uint16 { return k.dport }

// String returns the text form of k (see [Key.AppendText]).
func (k Key) String() string {
	var buf [128]byte // the longest form, an SCTP 5-tuple of IPv6 networks in segment 16777215, is 123 bytes
	b, _ := k.AppendText(buf[:0])
	return string(b)
}

// AppendText implements [encoding.TextAppender]. The text form lists the
// fields of the kind, IPv6 addresses in RFC 5952 form, networks in CIDR
// form:
//
//	src, dst   10.0.0.1
//	           10.0.0.0/24               (a network key)
//	pair       10.0.0.1 > 10.0.0.2
//	5tuple     tcp 10.0.0.1:1234 > 10.0.0.2:80
//	           udp [2001:db8::1]:53 > [2001:db8::2]:5353
//	           udp [2001:db8::/64]:53 > [2001:db8:1::/64]:5353
//	           icmp 10.0.0.1 > 10.0.0.2  (no ports)
//	           gre 10.0.0.1 > 10.0.0.2
//	           200 10.0.0.1 > 10.0.0.2   (protocol without a name)
//	any kind   vni 100 10.0.0.1          (a key with a segment, Key.Segment)
//	           vni 100 tcp 10.0.0.1:1234 > 10.0.0.2:80
//
// Protocols are written by name ([ProtoName]) where IANA gives them one,
// others as their number. A 5-tuple without ports (a protocol without ports, or a
// non-first fragment) omits them. A key with a segment starts with "vni N ".
// The zero Key is "invalid Key". The form is stable: reports and tests may
// depend on it.
func (k Key) AppendText(b []byte) ([]byte, error) {
	if k.flags&flagSeg != 0 && k.kind != 0 {
		b = append(b, "vni "...)
		b = strconv.AppendUint(b, uint64(k.seg), 10)
		b = append(b, ' ')
	}
	switch k.kind {
	case KeySrc:
		return k.appendAddr(b, &k.src), nil
	case KeyDst:
		return k.appendAddr(b, &k.dst), nil
	case KeyPair:
		b = k.appendAddr(b, &k.src)
		b = append(b, " > "...)
		return k.appendAddr(b, &k.dst), nil
	case Key5Tuple:
		b = appendProto(b, k.proto)
		b = append(b, ' ')
		if !k.HasPorts() {
			b = k.appendAddr(b, &k.src)
			b = append(b, " > "...)
			return k.appendAddr(b, &k.dst), nil
		}
		b = k.appendAddrPort(b, &k.src, k.sport)
		b = append(b, " > "...)
		return k.appendAddrPort(b, &k.dst, k.dport), nil
	}
	return append(b, "invalid Key"...), nil
}

func appendProto(b []byte, proto uint8) []byte {
	if name := ProtoName(proto); name != "" {
		return append(b, name...)
	}
	return strconv.AppendUint(b, uint64(proto), 10)
}

// KeySize is the length in bytes of a Key's binary form.
const KeySize = 44

// KeySizeNoSegment is the length of the binary form before segments
// existed: the first 40 bytes of today's, which UnmarshalBinary still reads
// (as a key without a segment).
const KeySizeNoSegment = 40

// ErrBadKey: a binary key (Key.UnmarshalBinary) is not the encoding of a key
// Parse or MakeKey could return.
var ErrBadKey = errors.New("flow: invalid binary key")

// AppendBinary implements [encoding.BinaryAppender]. The binary form is
// KeySize bytes, the layout the XDP program in bpf/ writes into its ring
// buffers, so that a key built in the kernel crosses to user space without
// translation:
//
//	offset  size  field
//	0       16    source address (IPv4: the first 4 bytes, the rest zero)
//	16      16    destination address (likewise)
//	32      2     source port, network byte order
//	34      2     destination port, network byte order
//	36      1     IP protocol (5-tuple keys)
//	37      1     KeyKind
//	38      1     flags: bit 0 IPv6 addresses, bit 1 ports present,
//	              bit 2 addresses are networks (Mask.Apply)
//	39      1     prefix length of the networks (bit 2), else zero
//	40      4     segment: the VXLAN/Geneve VNI, a big-endian uint32 of
//	              at most 2^24-1 (byte 40 is zero), with flags bit 3
//	              (0x08) set; all four bytes zero without a segment
//
// Fields the kind does not hold are zero, as are the host bits of networks.
// The zero Key encodes as 44 zero bytes, which UnmarshalBinary rejects.
// Byte 39 and bit 2 came later, and bytes 40-43 and bit 3 later still: the
// first 40 bytes of a key without a segment are its encoding before them.
func (k Key) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, k.src[:]...)
	b = append(b, k.dst[:]...)
	b = binary.BigEndian.AppendUint16(b, k.sport)
	b = binary.BigEndian.AppendUint16(b, k.dport)
	b = append(b, k.proto, byte(k.kind), k.flags, k.bits)
	return binary.BigEndian.AppendUint32(b, k.seg), nil
}

// MarshalBinary implements [encoding.BinaryMarshaler] (see AppendBinary).
func (k Key) MarshalBinary() ([]byte, error) {
	return k.AppendBinary(make([]byte, 0, KeySize))
}

// UnmarshalBinary implements [encoding.BinaryUnmarshaler]. It accepts exactly
// the encodings of valid keys (see AppendBinary): a kind, only the fields of
// that kind, IPv4 addresses padded with zeros, ports only in a 5-tuple flagged
// as having them and of a protocol that has them, a prefix length only for
// networks, at most the address length, with no host bit set. Anything else,
// which a correct kernel program never writes, fails with ErrBadKey,
// unwrapped, and leaves k unchanged. It does not allocate. It also reads the
// 40-byte form of KeySizeNoSegment bytes, as written before segments: a key
// without a segment.
func (k *Key) UnmarshalBinary(b []byte) error {
	if len(b) != KeySize && len(b) != KeySizeNoSegment {
		return ErrBadKey
	}
	n := Key{
		src:   [16]byte(b[0:16]),
		dst:   [16]byte(b[16:32]),
		sport: binary.BigEndian.Uint16(b[32:34]),
		dport: binary.BigEndian.Uint16(b[34:36]),
		proto: b[36],
		kind:  KeyKind(b[37]),
		flags: b[38],
		bits:  b[39],
	}
	if len(b) == KeySize {
		n.seg = binary.BigEndian.Uint32(b[40:44])
	}
	if !n.kind.IsValid() || n.flags&^(flagV6|flagPorts|flagPrefix|flagSeg) != 0 {
		return ErrBadKey
	}
	if n.seg > MaxSegment || (n.flags&flagSeg == 0 && n.seg != 0) || (len(b) == KeySizeNoSegment && n.flags&flagSeg != 0) {
		return ErrBadKey
	}
	if n.flags&flagPrefix == 0 && n.bits != 0 {
		return ErrBadKey
	}
	if n.flags&flagPrefix != 0 {
		// A network: its addresses masked to its length, which fits the
		// family (Mask.Apply leaves a masked key as it is).
		masked := n
		m := Mask{v4: n.bits, v6: n.bits, on: true}
		masked.flags &^= flagPrefix
		if n.bits > 128 || (n.flags&flagV6 == 0 && n.bits > 32) {
			return ErrBadKey
		}
		m.apply(&masked)
		if masked.src != n.src || masked.dst != n.dst {
			return ErrBadKey
		}
	}
	var zero [16]byte
	if n.flags&flagV6 == 0 && ([12]byte(n.src[4:]) != [12]byte{} || [12]byte(n.dst[4:]) != [12]byte{}) {
		return ErrBadKey
	}
	if (n.kind == KeyDst && n.src != zero) || (n.kind == KeySrc && n.dst != zero) {
		return ErrBadKey
	}
	if n.kind != Key5Tuple && (n.proto != 0 || n.flags&flagPorts != 0) {
		return ErrBadKey
	}
	if n.flags&flagPorts != 0 && !hasPorts(n.proto) {
		return ErrBadKey
	}
	if n.flags&flagPorts == 0 && (n.sport != 0 || n.dport != 0) {
		return ErrBadKey
	}
	*k = n
	return nil
}

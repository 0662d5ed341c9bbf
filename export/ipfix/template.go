package ipfix

import (
	"encoding/binary"

	"github.com/flowdedup/flowdedup/flow"
)

// IANA Information Element identifiers (https://www.iana.org/assignments/ipfix)
// of the fields a record exports (docs/architecture.md#export).
const (
	ieProtocolIdentifier          = 4   // unsigned8
	ieSourceTransportPort         = 7   // unsigned16
	ieSourceIPv4Address           = 8   // ipv4Address
	ieSourceIPv4PrefixLength      = 9   // unsigned8
	ieDestinationTransportPort    = 11  // unsigned16
	ieDestinationIPv4Address      = 12  // ipv4Address
	ieDestinationIPv4PrefixLength = 13  // unsigned8
	ieSourceIPv6Address           = 27  // ipv6Address
	ieDestinationIPv6Address      = 28  // ipv6Address
	ieSourceIPv6PrefixLength      = 29  // unsigned8
	ieDestinationIPv6PrefixLength = 30  // unsigned8
	ieFlowStartMilliseconds       = 152 // dateTimeMilliseconds
	ieFlowEndMilliseconds         = 153 // dateTimeMilliseconds
	ieLayer2SegmentID             = 351 // unsigned64
)

// segmentVXLAN is the type of a layer2SegmentId (IE 351), its most
// significant byte, for a VXLAN VNI: IANA's description of the element
// gives 0x00 reserved, 0x01 VxLAN, 0x02 NVGRE, the segment identifier (a
// 24-bit VNI) in the three least significant bytes. Geneve has no type of
// its own there, and a key does not say which of VXLAN and Geneve its
// segment came through (flow.Key.Segment: the same VNI in either is the
// same segment), so every segment goes out as a VxLAN one.
const segmentVXLAN = 0x01 << 56

// Set IDs of RFC 7011 section 3.3.2; data sets use their template's ID.
const (
	setIDTemplate    = 2
	firstTemplateID  = 256
	headerLen        = 16 // message header
	setHeaderLen     = 4
	templateHdrLen   = 4 // template record header: ID and field count
	fieldSpecLen     = 4 // element ID and length, no enterprise number
	ipfixVersion     = 10
	maxMessageLength = 65535 // the message header's 16-bit length
)

// layout says which fields a template's data records hold. Every template
// ends with flowStartMilliseconds and flowEndMilliseconds.
type layout uint8

const (
	hasSrc   layout = 1 << iota // source address
	hasDst                      // destination address
	hasProto                    // protocolIdentifier
	hasPorts                    // sourceTransportPort and destinationTransportPort
	isV6                        // addresses are IPv6
	isNet                       // addresses are networks: each followed by its prefix length
	hasSeg                      // layer2SegmentId: the key's segment (VNI)
)

// A template is one of the fixed templates of the exporter: one per key
// kind and address family, and for 5-tuples one more per family for keys
// without ports (ICMP, other portless protocols, non-first fragments), so
// that a collector can tell "no port" from port 0; and all of them again
// for keys by network (--prefix), whose addresses are each followed by
// their prefix length (sourceIPv4PrefixLength and the like); and all of
// those again for keys with a segment (flow.Key.Segment, inside VXLAN or
// Geneve), with layer2SegmentId after the key's fields.
type template struct {
	id     uint16
	layout layout
	recLen int    // bytes of one data record
	set    []byte // the template set announcing it, ready to send
}

// templateIndex returns the index in templates of the template for keys of
// kind with the given family, ports, networks and segment, or -1 for an
// invalid kind.
func templateIndex(kind flow.KeyKind, v6, ports, net, seg bool) int {
	if !kind.IsValid() {
		return -1
	}
	i := int(kind-flow.KeySrc) * 2 // src 0-1, dst 2-3, pair 4-5, 5tuple 6-7
	if kind == flow.Key5Tuple && !ports {
		i += 2 // 8-9
	}
	if v6 {
		i++
	}
	if net {
		i += numTemplates / 4 // 10-19: the same, by network
	}
	if seg {
		i += numTemplates / 2 // 20-39: the same, with a segment
	}
	return i
}

// keyTemplate returns the index in templates of the template of k, which
// must be valid.
func keyTemplate(k *flow.Key) int {
	_, seg := k.Segment()
	return templateIndex(k.Kind(), k.Is6(), k.HasPorts(), k.Bits() >= 0, seg)
}

// numTemplates is the number of fixed templates: src, dst, pair, 5-tuple
// and portless 5-tuple, each for IPv4 and IPv6, each of hosts and of
// networks, each without and with a segment.
const numTemplates = 40

// templates holds the fixed templates, indexed by templateIndex. Their IDs
// are 256 + index, the same in every run, so a collector's view of an
// exporter does not change across restarts (and the host templates kept
// theirs, 256-265, when the network ones came, and those without a
// segment theirs, 256-275, when the segment ones came: 276-295).
var templates = func() [numTemplates]template {
	var ts [numTemplates]template
	for kind := flow.KeySrc; kind <= flow.Key5Tuple; kind++ {
		for _, v6 := range []bool{false, true} {
			for _, ports := range []bool{true, false} {
				for _, net := range []bool{false, true} {
					for _, seg := range []bool{false, true} {
						i := templateIndex(kind, v6, ports, net, seg)
						ts[i] = makeTemplate(uint16(firstTemplateID+i), layoutOf(kind, v6, ports, net, seg))
					}
				}
			}
		}
	}
	return ts
}()

// layoutOf returns the layout of the records of keys of kind with the
// given family, ports, networks and segment.
func layoutOf(kind flow.KeyKind, v6, ports, net, seg bool) layout {
	var l layout
	switch kind {
	case flow.KeySrc:
		l = hasSrc
	case flow.KeyDst:
		l = hasDst
	case flow.KeyPair:
		l = hasSrc | hasDst
	case flow.Key5Tuple:
		l = hasSrc | hasDst | hasProto
		if ports {
			l |= hasPorts
		}
	}
	if v6 {
		l |= isV6
	}
	if net {
		l |= isNet
	}
	if seg {
		l |= hasSeg
	}
	return l
}

type fieldSpec struct{ id, length uint16 }

// fields lists the template's elements in data record order.
func (l layout) fields() []fieldSpec {
	var fs []fieldSpec
	addr := uint16(4)
	srcID, dstID := uint16(ieSourceIPv4Address), uint16(ieDestinationIPv4Address)
	srcLenID, dstLenID := uint16(ieSourceIPv4PrefixLength), uint16(ieDestinationIPv4PrefixLength)
	if l&isV6 != 0 {
		addr = 16
		srcID, dstID = ieSourceIPv6Address, ieDestinationIPv6Address
		srcLenID, dstLenID = ieSourceIPv6PrefixLength, ieDestinationIPv6PrefixLength
	}
	if l&hasSrc != 0 {
		fs = append(fs, fieldSpec{srcID, addr})
		if l&isNet != 0 {
			fs = append(fs, fieldSpec{srcLenID, 1})
		}
	}
	if l&hasDst != 0 {
		fs = append(fs, fieldSpec{dstID, addr})
		if l&isNet != 0 {
			fs = append(fs, fieldSpec{dstLenID, 1})
		}
	}
	if l&hasProto != 0 {
		fs = append(fs, fieldSpec{ieProtocolIdentifier, 1})
	}
	if l&hasPorts != 0 {
		fs = append(fs, fieldSpec{ieSourceTransportPort, 2}, fieldSpec{ieDestinationTransportPort, 2})
	}
	if l&hasSeg != 0 {
		fs = append(fs, fieldSpec{ieLayer2SegmentID, 8})
	}
	// A record says when a flow was first seen; it has no end of its
	// own, and collectors that find none show an invalid date (nfdump:
	// 1970-01-01 and a huge duration). The end is the start: a flow of
	// duration 0, as the first packet alone is.
	return append(fs, fieldSpec{ieFlowStartMilliseconds, 8}, fieldSpec{ieFlowEndMilliseconds, 8})
}

func makeTemplate(id uint16, l layout) template {
	fs := l.fields()
	t := template{id: id, layout: l}
	n := setHeaderLen + templateHdrLen + fieldSpecLen*len(fs)
	b := make([]byte, 0, n)
	b = binary.BigEndian.AppendUint16(b, setIDTemplate)
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	b = binary.BigEndian.AppendUint16(b, id)
	b = binary.BigEndian.AppendUint16(b, uint16(len(fs)))
	for _, f := range fs {
		b = binary.BigEndian.AppendUint16(b, f.id)
		b = binary.BigEndian.AppendUint16(b, f.length)
		t.recLen += int(f.length)
	}
	t.set = b
	return t
}

// appendRecord appends the data record of key k first seen at ms
// (milliseconds since the Unix epoch) in the layout l, its end time equal
// to its start. k must be a key of
// the template's kind, family and ports.
//
// The fields are copied from the key's binary form (flow.Key.AppendBinary),
// whose layout flow documents as stable: addresses at 0 and 16 (IPv4 in
// their first 4 bytes; networks with their host bits zero), the ports at 32
// in network byte order, the protocol at 36, a network's prefix length at
// 39. That is what IPFIX sends, so a record is a few copies. A key's
// segment goes out as a VxLAN layer2SegmentId (segmentVXLAN | VNI).
func (l layout) appendRecord(b []byte, k *flow.Key, ms uint64) []byte {
	var kb [flow.KeySize]byte
	k.AppendBinary(kb[:0])
	alen := 4
	if l&isV6 != 0 {
		alen = 16
	}
	if l&hasSrc != 0 {
		b = append(b, kb[0:alen]...)
		if l&isNet != 0 {
			b = append(b, kb[39])
		}
	}
	if l&hasDst != 0 {
		b = append(b, kb[16:16+alen]...)
		if l&isNet != 0 {
			b = append(b, kb[39])
		}
	}
	if l&hasProto != 0 {
		b = append(b, kb[36])
	}
	if l&hasPorts != 0 {
		b = append(b, kb[32:36]...)
	}
	if l&hasSeg != 0 {
		vni, _ := k.Segment()
		b = binary.BigEndian.AppendUint64(b, segmentVXLAN|uint64(vni))
	}
	b = binary.BigEndian.AppendUint64(b, ms)
	return binary.BigEndian.AppendUint64(b, ms) // flowEndMilliseconds
}

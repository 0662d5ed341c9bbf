package flow

import (
	"encoding/binary"
)

// EtherTypes and protocols of tunnels.
const (
	etherTypeTEB       = 0x6558 // transparent Ethernet bridging
	etherTypeERSPAN    = 0x88be // ERSPAN type I and II
	etherTypeERSPAN3   = 0x22eb // ERSPAN type III
	protoIPIP          = 4
	protoIPv6          = 41
	protoGRE           = 47
	greFlagChecksum    = 0x8000
	greFlagRouting     = 0x4000
	greFlagKey         = 0x2000
	greFlagSeq         = 0x1000
	greVersionMask     = 0x0007
	gtpuMsgTPDU        = 0xff
	vxlanFlagI         = 0x08
	erspanIIVersion    = 1
	erspanIIIVersion   = 2
	erspanFrameEther   = 0
	erspanFrameIP      = 2
	erspanIIHeaderLen  = 8
	erspanIIIHeaderLen = 12
)

// DecodeDecap sets *k to the key of frame's innermost IP header reached
// through the tunnels d lists (see the package documentation, Tunnels), with
// the VNI of a VXLAN or Geneve tunnel crossed as its segment. With d nil or
// listing no tunnel it is exactly Decode. It fails with one of the package's
// sentinel errors, unwrapped (k is then the zero Key); it never panics, does
// not allocate, and neither modifies nor retains frame.
func (k *Key) DecodeDecap(frame []byte, lt LinkType, kind KeyKind, d *Decap) error {
	if d == nil || d.Tunnels == 0 {
		return k.Decode(frame, lt, kind)
	}
	_, err := k.decodeDecap(frame, lt, kind, d)
	return err
}

// ParseDecapFrame returns the key DecodeDecap sets, and its error.
func ParseDecapFrame(frame []byte, lt LinkType, kind KeyKind, d *Decap) (Key, error) {
	var k Key
	err := k.DecodeDecap(frame, lt, kind, d)
	return k, err
}

// decapWalk is the state of one DecodeDecap: the tunnels gone through, and
// the last VNI crossed.
type decapWalk struct {
	d      *Decap
	levels int
	seg    uint32
	hasSeg bool
}

// decodeDecap is DecodeDecap for a d listing tunnels; it also returns the
// number of tunnels recognised (0: the frame was decoded as Decode does).
func (k *Key) decodeDecap(frame []byte, lt LinkType, kind KeyKind, d *Decap) (int, error) {
	if !kind.IsValid() {
		*k = Key{}
		return 0, ErrBadKind
	}
	*k = Key{kind: kind}
	w := decapWalk{d: d}
	b, v, err := linkIP(frame, lt)
	// Each pass reads one IP header once: ipPayload finds its payload,
	// tunnel looks into it, and a header holding no tunnel is keyed from
	// what ipPayload found (keyIP). The loop ends within MaxDecapLevels+1
	// passes: each one that goes on entered a tunnel (w.enter).
loop:
	for err == nil {
		proto, p, ext, ok := ipPayload(b, v)
		if !ok {
			// No payload to look into: parseIPv4 or parseIPv6 says
			// why, or keys it (a non-first fragment).
			if v == 4 {
				err = k.parseIPv4(b)
			} else {
				err = k.parseIPv6(b)
			}
			break
		}
		switch proto {
		case protoIPIP, protoIPv6, protoGRE, protoUDP:
		default:
			// No protocol tunnel looks into: key it without the call.
			err = k.keyIP(b, v, proto, p, ext)
			break loop
		}
		var inner []byte
		var iv uint8
		var found bool
		inner, iv, found, err = w.tunnel(proto, p)
		if err != nil {
			break
		}
		if !found {
			err = k.keyIP(b, v, proto, p, ext)
			break
		}
		b, v = inner, iv
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

// linkIP returns the outermost IP packet of frame, from its version byte,
// and its version (4 or 6), walking the link headers as parse does. What it
// returns is handed to parseIPv4 or parseIPv6, which check it; it fails with
// the errors parse fails with before the IP header.
func linkIP(frame []byte, lt LinkType) ([]byte, uint8, error) {
	switch lt {
	case LinkEthernet:
		// etherIP, written out: the call costs the common case a level.
		if len(frame) < 14 {
			return nil, 0, ErrTruncated
		}
		return etherTypeIP(frame[14:], binary.BigEndian.Uint16(frame[12:14]))
	case LinkLinuxSLL:
		if len(frame) < 16 {
			return nil, 0, ErrTruncated
		}
		return etherTypeIP(frame[16:], binary.BigEndian.Uint16(frame[14:16]))
	case LinkLinuxSLL2:
		if len(frame) < 20 {
			return nil, 0, ErrTruncated
		}
		return etherTypeIP(frame[20:], binary.BigEndian.Uint16(frame[0:2]))
	case LinkRaw:
		return nibbleIP(frame, ErrBadHeader)
	case LinkIPv4:
		return frame, 4, nil
	case LinkIPv6:
		return frame, 6, nil
	case LinkNull, LinkLoop:
		if len(frame) < 4 {
			return nil, 0, ErrTruncated
		}
		family := binary.BigEndian.Uint32(frame[:4])
		if lt == LinkNull {
			// As parse: the capturing host's byte order, little-endian
			// first.
			if le := binary.LittleEndian.Uint32(frame[:4]); isLoopbackIP(le) {
				family = le
			}
		}
		switch family {
		case afInet:
			return frame[4:], 4, nil
		case afInet6NetBSD, afInet6FreeBSD, afInet6Darwin:
			return frame[4:], 6, nil
		}
		return nil, 0, ErrNotIP
	}
	return nil, 0, ErrUnsupportedLink
}

// etherIP returns the IP packet of an Ethernet frame (see etherTypeIP).
func etherIP(b []byte) ([]byte, uint8, error) {
	if len(b) < 14 {
		return nil, 0, ErrTruncated
	}
	return etherTypeIP(b[14:], binary.BigEndian.Uint16(b[12:14]))
}

// nibbleIP returns b as an IP packet of the version its first nibble
// names; other versions fail with errOther.
func nibbleIP(b []byte, errOther error) ([]byte, uint8, error) {
	if len(b) < 1 {
		return nil, 0, ErrTruncated
	}
	switch v := b[0] >> 4; v {
	case 4, 6:
		return b, v, nil
	}
	return nil, 0, errOther
}

// etherTypeIP returns the IP packet in b, the payload of a link header of
// EtherType etype, walking VLAN tags, MPLS labels and PPPoE session headers
// as parseEtherType does.
func etherTypeIP(b []byte, etype uint16) ([]byte, uint8, error) {
	for walked := 0; ; walked++ {
		switch etype {
		case etherTypeIPv4:
			return b, 4, nil
		case etherTypeIPv6:
			return b, 6, nil
		}
		if walked == MaxLinkHeaders {
			return nil, 0, ErrTooManyHeaders
		}
		switch etype {
		case etherTypeVLAN, etherTypeQinQ, etherTypeQinQOld:
			if len(b) < 4 {
				return nil, 0, ErrTruncated
			}
			etype = binary.BigEndian.Uint16(b[2:4])
			b = b[4:]
		case etherTypeMPLSUnicast, etherTypeMPLSMulticast:
			for {
				if len(b) < 4 {
					return nil, 0, ErrTruncated
				}
				bottom := b[2]&1 != 0
				b = b[4:]
				if bottom {
					return nibbleIP(b, ErrNotIP)
				}
				walked++
				if walked == MaxLinkHeaders {
					return nil, 0, ErrTooManyHeaders
				}
			}
		case etherTypePPPoESession:
			if len(b) < 7 {
				return nil, 0, ErrTruncated
			}
			if end := 6 + int(binary.BigEndian.Uint16(b[4:6])); end < len(b) {
				b = b[:end]
			}
			if len(b) < 7 {
				return nil, 0, ErrTruncated
			}
			proto := uint16(b[6])
			b = b[7:]
			if proto&1 == 0 {
				if len(b) < 1 {
					return nil, 0, ErrTruncated
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
				return nil, 0, ErrNotIP
			}
		default:
			return nil, 0, ErrNotIP
		}
	}
}

// ipPayload returns the upper-layer protocol and payload of the IP packet
// b of version v (cut to its length field, as parseIPv4 and parseIPv6 cut
// it) and the number of IPv6 extension headers it walked, and ok false when
// b is no packet whose payload can hold a tunnel: an invalid or cut header
// (parseIPv4 or parseIPv6 then says why), a non-first fragment, an IPv6
// extension header chain cut short or longer than MaxIPv6Headers.
func ipPayload(b []byte, v uint8) (proto uint8, payload []byte, ext int, ok bool) {
	if v == 4 {
		if len(b) < 20 || b[0]>>4 != 4 {
			return 0, nil, 0, false
		}
		hlen := int(b[0]&0x0f) * 4
		if hlen < 20 || len(b) < hlen {
			return 0, nil, 0, false
		}
		if total := int(binary.BigEndian.Uint16(b[2:4])); total != 0 {
			if total < hlen {
				return 0, nil, 0, false
			}
			if total < len(b) {
				b = b[:total]
			}
		}
		if binary.BigEndian.Uint16(b[6:8])&0x1fff != 0 {
			return 0, nil, 0, false
		}
		return b[9], b[hlen:], 0, true
	}
	if len(b) < 40 || b[0]>>4 != 6 {
		return 0, nil, 0, false
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
				return 0, nil, 0, false
			}
			hlen = (int(p[1]) + 1) * 8
		case ip6Fragment:
			hlen = 8
			if len(p) < hlen || binary.BigEndian.Uint16(p[2:4])&0xfff8 != 0 {
				return 0, nil, 0, false
			}
		default:
			return next, p, walked, true
		}
		if walked == MaxIPv6Headers || len(p) < hlen {
			return 0, nil, 0, false
		}
		next = p[0]
		p = p[hlen:]
	}
}

// tunnel returns the inner IP packet (and its version) of a listed tunnel
// in p, the payload of protocol proto of an IP packet (ipPayload), and ok
// true; ok false when p holds none, and the packet holding it is the one to
// key.
func (w *decapWalk) tunnel(proto uint8, p []byte) (inner []byte, iv uint8, ok bool, err error) {
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

// keyIP keys the IP packet b of version v from what ipPayload found in
// it (its protocol, payload and IPv6 extension headers walked), without
// reading its header again: it sets what parseIPv4 or parseIPv6 would set
// and fails as they would. ipPayload has checked everything they check
// before the transport header, and that b is no non-first fragment.
func (k *Key) keyIP(b []byte, v uint8, proto uint8, p []byte, ext int) error {
	if v == 4 {
		switch k.kind {
		case KeySrc:
			copy(k.src[:4], b[12:16])
			return nil
		case KeyDst:
			copy(k.dst[:4], b[16:20])
			return nil
		}
		copy(k.src[:4], b[12:16])
		copy(k.dst[:4], b[16:20])
		if k.kind == KeyPair {
			return nil
		}
		k.proto = proto
		return k.withTransport(p, proto, false)
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
	if proto == protoAH && ext > 0 {
		// withTransport bounds AH and extension headers together, counted
		// from the IPv6 header: let it walk the chain from there.
		return k.parseIPv6(b)
	}
	// withTransport would walk the ext extension headers ipPayload walked
	// and reach p with the same count; past them it counts only AH headers,
	// and there are none here, or ext is 0.
	return k.withTransport(p, proto, true)
}

// enter counts one more tunnel, or fails when there were MaxDecapLevels.
func (w *decapWalk) enter() error {
	if w.levels == MaxDecapLevels {
		return ErrTunnelTooDeep
	}
	w.levels++
	return nil
}

// vni is the 24-bit VNI of a VXLAN or Geneve header, bytes 4-6.
func vni(b []byte) uint32 { return uint32(b[4])<<16 | uint32(b[5])<<8 | uint32(b[6]) }

// gre decapsulates a GRE packet b (GRE and ERSPAN).
func (w *decapWalk) gre(b []byte) ([]byte, uint8, bool, error) {
	if len(b) < 4 {
		return nil, 0, true, ErrTunnelTruncated
	}
	flags, ptype := binary.BigEndian.Uint16(b[0:2]), binary.BigEndian.Uint16(b[2:4])
	if flags&greVersionMask != 0 {
		return nil, 0, true, ErrTunnelUnknown // version 1 is PPTP's enhanced GRE
	}
	if flags&greFlagRouting != 0 {
		return nil, 0, true, ErrTunnelBadHeader
	}
	hlen := 4
	for _, f := range [...]uint16{greFlagChecksum, greFlagKey, greFlagSeq} {
		if flags&f != 0 {
			hlen += 4
		}
	}
	if len(b) < hlen {
		return nil, 0, true, ErrTunnelTruncated
	}
	p := b[hlen:]
	var kind Tunnels
	switch ptype {
	case etherTypeIPv4, etherTypeIPv6, etherTypeMPLSUnicast, etherTypeTEB:
		kind = TunnelGRE
	case etherTypeERSPAN, etherTypeERSPAN3:
		kind = TunnelERSPAN
	default:
		return nil, 0, true, ErrTunnelUnknown
	}
	if w.d.Tunnels&kind == 0 {
		return nil, 0, false, nil // not decapsulated: the packet holding it is keyed
	}
	var inner []byte
	var v uint8
	var err error
	switch ptype {
	case etherTypeIPv4:
		inner, v = p, 4
	case etherTypeIPv6:
		inner, v = p, 6
	case etherTypeMPLSUnicast:
		inner, v, err = etherTypeIP(p, etherTypeMPLSUnicast)
	case etherTypeTEB:
		inner, v, err = etherIP(p)
	case etherTypeERSPAN:
		if flags&greFlagSeq == 0 {
			// Type I: no ERSPAN header, the mirrored frame at once.
			inner, v, err = etherIP(p)
			break
		}
		if len(p) < erspanIIHeaderLen {
			return nil, 0, true, ErrTunnelTruncated
		}
		if p[0]>>4 != erspanIIVersion {
			return nil, 0, true, ErrTunnelBadHeader
		}
		inner, v, err = etherIP(p[erspanIIHeaderLen:])
	case etherTypeERSPAN3:
		if len(p) < erspanIIIHeaderLen {
			return nil, 0, true, ErrTunnelTruncated
		}
		if p[0]>>4 != erspanIIIVersion {
			return nil, 0, true, ErrTunnelBadHeader
		}
		hl := erspanIIIHeaderLen
		if p[11]&1 != 0 {
			hl += 8 // the platform-specific subheader
		}
		if len(p) < hl {
			return nil, 0, true, ErrTunnelTruncated
		}
		switch (p[10] >> 2) & 0x1f {
		case erspanFrameEther:
			inner, v, err = etherIP(p[hl:])
		case erspanFrameIP:
			inner, v, err = nibbleIP(p[hl:], ErrTunnelUnknown)
		default:
			return nil, 0, true, ErrTunnelUnknown
		}
	}
	return inner, v, true, err
}

// vxlan decapsulates a VXLAN header and the frame after it.
func (w *decapWalk) vxlan(b []byte) ([]byte, uint8, error) {
	if len(b) < 8 {
		return nil, 0, ErrTunnelTruncated
	}
	if b[0]&vxlanFlagI == 0 {
		return nil, 0, ErrTunnelBadHeader
	}
	w.seg, w.hasSeg = vni(b), true
	return etherIP(b[8:])
}

// geneve decapsulates a Geneve header, its options and the packet after.
func (w *decapWalk) geneve(b []byte) ([]byte, uint8, error) {
	if len(b) < 8 {
		return nil, 0, ErrTunnelTruncated
	}
	if b[0]>>6 != 0 {
		return nil, 0, ErrTunnelBadHeader
	}
	hlen := 8 + int(b[0]&0x3f)*4
	if len(b) < hlen {
		return nil, 0, ErrTunnelTruncated
	}
	var p []byte
	var v uint8
	var err error
	switch binary.BigEndian.Uint16(b[2:4]) {
	case etherTypeTEB:
		p, v, err = etherIP(b[hlen:])
	case etherTypeIPv4:
		p, v = b[hlen:], 4
	case etherTypeIPv6:
		p, v = b[hlen:], 6
	default:
		return nil, 0, ErrTunnelUnknown
	}
	w.seg, w.hasSeg = vni(b), true
	return p, v, err
}

// gtpu decapsulates a GTP-U T-PDU: its header, optional fields and
// extension headers, then the IP packet.
func gtpu(b []byte) ([]byte, uint8, error) {
	if len(b) < 8 {
		return nil, 0, ErrTunnelTruncated
	}
	if b[0]>>5 != 1 || b[0]&0x10 == 0 {
		return nil, 0, ErrTunnelBadHeader
	}
	if b[1] != gtpuMsgTPDU {
		return nil, 0, ErrTunnelNotData
	}
	off := 8
	if b[0]&0x07 != 0 {
		if len(b) < 12 {
			return nil, 0, ErrTunnelTruncated
		}
		off = 12
		next := b[11]
		for n := 0; b[0]&0x04 != 0 && next != 0; n++ {
			if n == MaxGTPUExtHeaders {
				return nil, 0, ErrTooManyHeaders
			}
			if len(b) <= off {
				return nil, 0, ErrTunnelTruncated
			}
			l := int(b[off]) * 4
			if l == 0 {
				return nil, 0, ErrTunnelBadHeader
			}
			if len(b) < off+l {
				return nil, 0, ErrTunnelTruncated
			}
			next = b[off+l-1]
			off += l
		}
	}
	return nibbleIP(b[off:], ErrTunnelUnknown)
}

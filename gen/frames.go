package gen

import "encoding/binary"

// Ethernet and IP numbers the generator writes.
const (
	etherTypeIPv4 = 0x0800
	etherTypeARP  = 0x0806
	etherTypeVLAN = 0x8100
	etherTypeQinQ = 0x88a8
	etherTypeIPv6 = 0x86dd

	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58
)

// frameCap bounds every frame: Ethernet with two tags (22), IPv6 (40), TCP
// (20) and the largest payload (32).
const frameCap = 128

// payloadText fills payloads: printable, so that no dissector mistakes it
// for a header it would decode an address from.
const payloadText = "flowdedup synthetic payload. flowdedup synthetic payload."

// flowFrame writes the next frame of flow f into buf, advances f's
// sequence number and returns the frame. fragment writes a non-first IPv4
// fragment instead of a UDP datagram; forceV4 writes an IPv4 header even for
// an IPv6 flow (for malformed frames).
func (g *generator) flowFrame(buf []byte, f *flowSpec, fragment, forceV4 bool) []byte {
	r := &g.hdrRand
	c, s := g.hosts(f.pair)
	v6 := f.v6 && !forceV4
	etype := uint16(etherTypeIPv4)
	if v6 {
		etype = etherTypeIPv6
	}
	n := g.ether(buf, c, gatewayMAC, etype)
	ipStart := n

	ipHdr := 20
	if v6 {
		ipHdr = 40
	}
	t := buf[ipStart+ipHdr:]
	proto := f.proto
	if forceV4 && proto == protoICMPv6 {
		proto = protoICMP
	}
	var tlen int
	switch {
	case fragment:
		tlen = 8 + r.IntN(25)
		copy(t[:tlen], payloadText)
	case proto == protoTCP:
		plen := r.IntN(25)
		binary.BigEndian.PutUint16(t[0:], f.sport)
		binary.BigEndian.PutUint16(t[2:], f.dport)
		binary.BigEndian.PutUint32(t[4:], f.seq)
		binary.BigEndian.PutUint32(t[8:], uint32(keyed(g.key, uint64(f.sport)<<32|uint64(f.pair))))
		t[12] = 5 << 4
		t[13] = 0x10 // ACK
		if plen > 0 {
			t[13] |= 0x08 // PSH
		}
		binary.BigEndian.PutUint16(t[14:], 64240)
		clear(t[16:20])
		copy(t[20:20+plen], payloadText)
		tlen = 20 + plen
		f.seq += uint32(plen)
	case proto == protoUDP:
		plen := 4 + r.IntN(29)
		tlen = 8 + plen
		binary.BigEndian.PutUint16(t[0:], f.sport)
		binary.BigEndian.PutUint16(t[2:], f.dport)
		binary.BigEndian.PutUint16(t[4:], uint16(tlen))
		clear(t[6:8])
		copy(t[8:tlen], payloadText)
	default: // ICMP or ICMPv6 echo request
		tlen = 8 + 16
		t[0] = 8
		if proto == protoICMPv6 {
			t[0] = 128
		}
		t[1] = 0
		clear(t[2:4])
		binary.BigEndian.PutUint16(t[4:], f.sport)
		binary.BigEndian.PutUint16(t[6:], uint16(f.seq))
		copy(t[8:tlen], payloadText)
		f.seq++
	}
	t = t[:tlen]

	h := buf[ipStart : ipStart+ipHdr]
	if v6 {
		h[0] = 0x60
		label := uint32(keyed(g.key^0xf10, uint64(f.sport)<<32|uint64(f.pair))) & 0xfffff
		h[1] = byte(label >> 16)
		binary.BigEndian.PutUint16(h[2:], uint16(label))
		binary.BigEndian.PutUint16(h[4:], uint16(tlen))
		h[6] = proto
		h[7] = 64
		g.addr6(h[8:24], clientPrefix6, c)
		g.addr6(h[24:40], serverPrefix6, s)
	} else {
		h[0] = 0x45
		h[1] = 0
		binary.BigEndian.PutUint16(h[2:], uint16(ipHdr+tlen))
		binary.BigEndian.PutUint16(h[4:], uint16(r.Uint64()))
		switch {
		case fragment:
			binary.BigEndian.PutUint16(h[6:], 1480/8) // offset 1480, last fragment
		case proto == protoTCP:
			binary.BigEndian.PutUint16(h[6:], 0x4000) // don't fragment
		default:
			binary.BigEndian.PutUint16(h[6:], 0)
		}
		h[8] = 64
		h[9] = proto
		binary.BigEndian.PutUint32(h[12:], clientNet4|g.host4(c, 24))
		binary.BigEndian.PutUint32(h[16:], serverNet4|g.host4(s, 20))
		setIPv4Checksum(h)
	}

	if !fragment {
		var cs uint32
		switch proto {
		case protoTCP, protoUDP, protoICMPv6:
			cs = pseudoHeaderSum(h, proto, tlen, v6)
		}
		sum := checksum(t, cs)
		switch proto {
		case protoTCP:
			binary.BigEndian.PutUint16(t[16:], sum)
		case protoUDP:
			if sum == 0 {
				sum = 0xffff // 0 means "no checksum"
			}
			binary.BigEndian.PutUint16(t[6:], sum)
		default:
			binary.BigEndian.PutUint16(t[2:], sum)
		}
	}
	return buf[:ipStart+ipHdr+tlen]
}

// malformedFrame writes one of the three kinds of malformed frame into buf,
// about a flow picked uniformly, and counts it.
func (g *generator) malformedFrame(buf []byte) []byte {
	r := &g.malRand
	f := g.flows[r.IntN(len(g.flows))] // a copy: f's own sequence stays
	switch r.IntN(3) {
	case 0: // cut inside the IP header, before the source address
		frame := g.flowFrame(buf, &f, false, false)
		l2 := len(frame) - g.ipAndTransportLen(frame)
		cut := 1 + r.IntN(11) // IPv4: the source address starts at byte 12
		if f.v6 {
			cut = 1 + r.IntN(7) // IPv6: at byte 8
		}
		g.st.Truncated++
		return frame[:l2+cut]
	case 1: // version 5 in an IPv4 EtherType
		frame := g.flowFrame(buf, &f, false, true)
		h := frame[len(frame)-g.ipAndTransportLen(frame):]
		h[0] = 0x55
		setIPv4Checksum(h[:20])
		g.st.BadVersion++
		return frame
	default: // ARP who-has for the gateway
		c, _ := g.hosts(f.pair)
		n := g.ether(buf, c, broadcastMAC, etherTypeARP)
		a := buf[n : n+28]
		binary.BigEndian.PutUint16(a[0:], 1) // Ethernet
		binary.BigEndian.PutUint16(a[2:], etherTypeIPv4)
		a[4], a[5] = 6, 4
		binary.BigEndian.PutUint16(a[6:], 1) // request
		g.clientMAC(a[8:14], c)
		binary.BigEndian.PutUint32(a[14:], clientNet4|g.host4(c, 24))
		clear(a[18:24])
		binary.BigEndian.PutUint32(a[24:], gatewayAddr4)
		g.st.NotIP++
		return buf[:n+28]
	}
}

// ipAndTransportLen returns the length of the IP packet at the end of a
// frame flowFrame wrote, from its IP length field.
func (g *generator) ipAndTransportLen(frame []byte) int {
	n := 14
	for {
		switch binary.BigEndian.Uint16(frame[n-2:]) {
		case etherTypeVLAN, etherTypeQinQ:
			n += 4
			continue
		case etherTypeIPv6:
			return 40 + int(binary.BigEndian.Uint16(frame[n+4:]))
		}
		return int(binary.BigEndian.Uint16(frame[n+2:]))
	}
}

// Addresses. The host parts come from host4 and addr6.
const (
	clientNet4   = 10 << 24         // 10.0.0.0/8
	serverNet4   = 172<<24 | 16<<16 // 172.16.0.0/12
	gatewayAddr4 = 10<<24 | 1       // 10.0.0.1, what ARP asks for
)

var (
	clientPrefix6 = [8]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0x0c} // 2001:db8:0:c::/64
	serverPrefix6 = [8]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0x05} // 2001:db8:0:5::/64
	gatewayMAC    = [6]byte{0x02, 0, 0, 0, 0, 0x01}
	broadcastMAC  = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

// host4 returns the host part of host number i in a network of hostBits,
// neither all zeros nor all ones.
func (g *generator) host4(i uint32, hostBits uint) uint32 {
	return 1 + uint32(permuteIndex(uint64(i), 1<<hostBits-2, g.key^uint64(hostBits)))
}

func (g *generator) addr6(dst []byte, prefix [8]byte, i uint32) {
	copy(dst[:8], prefix[:])
	// Interface ID 0 is the subnet-router anycast address. Input 0 never
	// occurs, so the one input that scrambles to 0 can take its image.
	iid := scramble(uint64(i)+1, 64, g.key^0x6666)
	if iid == 0 {
		iid = scramble(0, 64, g.key^0x6666)
	}
	binary.BigEndian.PutUint64(dst[8:], iid)
}

func (g *generator) clientMAC(dst []byte, c uint32) {
	dst[0], dst[1] = 0x02, 0x00 // locally administered
	binary.BigEndian.PutUint32(dst[2:], c)
}

// ether writes the Ethernet header of a frame from client c, with its VLAN
// tags when the config asks for them, and returns its length.
func (g *generator) ether(buf []byte, c uint32, dst [6]byte, etype uint16) int {
	copy(buf[0:6], dst[:])
	g.clientMAC(buf[6:12], c)
	n := 12
	if g.cfg.VLAN {
		h := keyed(g.key^0x71a9, uint64(c))
		if h%4 == 0 { // QinQ: a service tag outside the customer tag
			binary.BigEndian.PutUint16(buf[n:], etherTypeQinQ)
			binary.BigEndian.PutUint16(buf[n+2:], uint16(10+(h>>8)%3))
			n += 4
		}
		binary.BigEndian.PutUint16(buf[n:], etherTypeVLAN)
		binary.BigEndian.PutUint16(buf[n+2:], uint16(100+c%4))
		n += 4
	}
	binary.BigEndian.PutUint16(buf[n:], etype)
	return n + 2
}

// checksum returns the Internet checksum (RFC 1071) of b, starting from the
// partial sum initial.
func checksum(b []byte, initial uint32) uint16 {
	sum := uint64(initial)
	for len(b) >= 2 {
		sum += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint64(b[0]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// pseudoHeaderSum is the partial sum of the pseudo-header of a transport
// segment of length tlen under the IP header h.
func pseudoHeaderSum(h []byte, proto uint8, tlen int, v6 bool) uint32 {
	addrs := h[12:20]
	if v6 {
		addrs = h[8:40]
	}
	var sum uint32
	for i := 0; i < len(addrs); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(addrs[i:]))
	}
	return sum + uint32(proto) + uint32(tlen)
}

func setIPv4Checksum(h []byte) {
	clear(h[10:12])
	binary.BigEndian.PutUint16(h[10:], checksum(h, 0))
}

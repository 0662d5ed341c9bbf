package gen

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Limits of a Config.
const (
	// MaxFlows bounds Config.Flows, and so the generator's memory (about
	// 30 bytes per flow).
	MaxFlows = 1 << 22
	// MinSnapLen is the smallest non-zero snap length: the longest header
	// stack the generator writes (Ethernet, two VLAN tags, IPv6) plus the
	// four port bytes a 5-tuple key needs, so that a snap length never
	// turns a good frame into a malformed one.
	MinSnapLen = 14 + 8 + 40 + 4
	// MaxSnapLen is the snap length written when Config.SnapLen is 0, as
	// tcpdump does; no frame the generator writes comes near it.
	MaxSnapLen = 262144
)

// Formats Write can produce.
const (
	FormatPcap   = "pcap"   // libpcap format, nanosecond timestamps
	FormatPcapNG = "pcapng" // pcapng, one Ethernet interface, nanosecond timestamps
)

// DefaultStart is the time of the first packet when Config.Start is zero:
// fixed, so that outputs are reproducible, and on a minute boundary, so that
// windows line up with the capture.
var DefaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ErrConfig matches, under errors.Is, every error Config.Validate returns.
var ErrConfig = errors.New("gen: invalid config")

// ConfigError is the error Config.Validate returns: a setting Write cannot
// honour exactly.
type ConfigError struct {
	Problem string // e.g. "ipv6 1.5: want a fraction in [0, 1]"
}

func (e *ConfigError) Error() string { return ErrConfig.Error() + ": " + e.Problem }

// Is reports whether target is ErrConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// Config describes a synthetic capture. The zero value of every field but
// Packets and Flows is a sensible default.
type Config struct {
	Packets int // frames to write, malformed ones included; at least 1
	Flows   int // distinct flows the well-formed frames carry; 1 to MaxFlows

	// Zipf is the exponent s of the flows' popularity law,
	// P(rank k) ∝ k^-s; 0 makes every flow equally popular.
	Zipf float64
	// IPv6 is the fraction of the flows that are IPv6, in [0, 1].
	IPv6 float64
	// VLAN puts every frame behind an 802.1Q tag, or an 802.1ad QinQ stack
	// for about one client in four.
	VLAN bool

	Start    time.Time     // time of the first packet; zero means DefaultStart
	Duration time.Duration // the packets' timestamps spread over [Start, Start+Duration]

	Seed   uint64
	Format string // FormatPcap (also when empty) or FormatPcapNG
	Gzip   bool   // compress the whole file with gzip

	// Malformed is the fraction of frames, in [0, 1], deliberately broken
	// (see the package documentation for the kinds).
	Malformed float64
	// Fragments is the fraction, in [0, 1], of IPv4 UDP packets written as
	// non-first fragments, whose keys have no ports.
	Fragments float64
	// SnapLen cuts frames longer than it, as a capture's snap length does,
	// keeping their original length; 0 cuts nothing and records
	// MaxSnapLen. Otherwise it is at least MinSnapLen.
	SnapLen int
}

// Stats describes what Write wrote. The distinct-key counts are those
// flow.Parse finds over the frames it keys, the malformed ones excluded.
type Stats struct {
	Packets   int // frames written
	Flows     int // distinct flows carried, always Config.Flows
	IPv6Flows int // of which IPv6

	Malformed  int // Truncated + BadVersion + NotIP
	Truncated  int // cut inside the IP header
	BadVersion int // IP header of a version other than 4 or 6
	NotIP      int // ARP
	Fragments  int // IPv4 non-first fragments (keyed, not malformed)

	Sources      int // distinct source addresses
	Destinations int // distinct destination addresses
	Pairs        int // distinct (source, destination) pairs
	FiveTuples   int // distinct 5-tuple keys: Flows, plus one per pair with a fragment
}

// malformedCount is the number of malformed frames c asks for.
func (c *Config) malformedCount() int {
	return int(math.Round(c.Malformed * float64(c.Packets)))
}

func (c *Config) start() time.Time {
	if c.Start.IsZero() {
		return DefaultStart
	}
	return c.Start
}

// Validate reports whether Write can honour c exactly. Its errors are
// *ConfigError values.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return &ConfigError{fmt.Sprintf(format, args...)}
	}
	fraction := func(name string, v float64) error {
		if !(v >= 0 && v <= 1) { // also rejects NaN
			return bad("%s %v: want a fraction in [0, 1]", name, v)
		}
		return nil
	}
	switch {
	case c.Packets < 1:
		return bad("packets %d: want at least 1", c.Packets)
	case c.Flows < 1 || c.Flows > MaxFlows:
		return bad("flows %d: want 1 to %d", c.Flows, MaxFlows)
	case !(c.Zipf >= 0) || math.IsInf(c.Zipf, 1):
		return bad("zipf exponent %v: want 0 (uniform) or a finite s > 0", c.Zipf)
	case c.Duration < 0:
		return bad("duration %v: want at least 0", c.Duration)
	case c.Format != "" && c.Format != FormatPcap && c.Format != FormatPcapNG:
		return bad("format %q: want %s or %s", c.Format, FormatPcap, FormatPcapNG)
	case c.SnapLen != 0 && (c.SnapLen < MinSnapLen || c.SnapLen > MaxSnapLen):
		return bad("snap length %d: want 0 (no limit) or %d to %d; a shorter one would cut frames inside the headers a key needs",
			c.SnapLen, MinSnapLen, MaxSnapLen)
	}
	for _, err := range []error{fraction("ipv6", c.IPv6), fraction("malformed", c.Malformed), fraction("fragments", c.Fragments)} {
		if err != nil {
			return err
		}
	}
	if keyed := c.Packets - c.malformedCount(); c.Flows > keyed {
		return bad("flows %d exceed the %d well-formed packets (%d packets, %d malformed): every flow needs one",
			c.Flows, keyed, c.Packets, c.Packets-keyed)
	}
	start := c.start()
	if start.Before(time.Unix(0, 0)) {
		return bad("start %v: captures cannot hold times before 1970", start)
	}
	// pcap holds unsigned 32-bit seconds, pcapng 64-bit nanoseconds.
	last := start.Add(c.Duration)
	if c.Format != FormatPcapNG && last.Unix() > math.MaxUint32 {
		return bad("timestamps up to %v do not fit pcap's 32-bit seconds; use pcapng", last)
	}
	if last.UnixNano() < start.UnixNano() { // UnixNano overflows past 2262
		return bad("timestamps up to %v do not fit 64-bit nanoseconds", last)
	}
	return nil
}

// Write writes the capture cfg describes to w and reports what it wrote. It
// neither closes w nor reads anything but cfg: the same cfg gives the same
// bytes. On a write error the output is incomplete.
func Write(w io.Writer, cfg Config) (Stats, error) {
	if err := cfg.Validate(); err != nil {
		return Stats{}, err
	}
	var zw *gzip.Writer
	if cfg.Gzip {
		zw = gzip.NewWriter(w)
		w = zw
	}
	snap := cfg.SnapLen
	if snap == 0 {
		snap = MaxSnapLen
	}
	var (
		out   packetWriter
		flush func() error
	)
	if cfg.Format == FormatPcapNG {
		ng, err := pcapgo.NewNgWriterInterface(w, pcapgo.NgInterface{
			Name:                "gen0",
			LinkType:            layers.LinkTypeEthernet,
			SnapLength:          uint32(snap),
			TimestampResolution: 9,
		}, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "flowdedup gen"}})
		if err != nil {
			return Stats{}, err
		}
		out, flush = ng, ng.Flush
	} else {
		bw := bufio.NewWriterSize(w, 64<<10)
		pw := pcapgo.NewWriterNanos(bw)
		if err := pw.WriteFileHeader(uint32(snap), layers.LinkTypeEthernet); err != nil {
			return Stats{}, err
		}
		out, flush = pw, bw.Flush
	}

	g := newGenerator(&cfg)
	st, err := g.run(out, snap)
	if err == nil {
		err = flush()
	}
	if zw != nil {
		if cerr := zw.Close(); err == nil {
			err = cerr
		}
	}
	return st, err
}

// packetWriter is what Write needs of pcapgo's two writers.
type packetWriter interface {
	WritePacket(ci gopacket.CaptureInfo, data []byte) error
}

// Independent random streams, one per purpose, so that the flow table does
// not depend on how many packets are drawn from it, nor the packet sequence
// on the timestamps.
const (
	streamFlows = iota + 1
	streamPackets
	streamMalformed
	streamClock
	streamHeaders
)

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

// flowSpec is one flow. Its addresses follow from its pair; its ports and
// protocol are fixed when the table is built.
type flowSpec struct {
	pair  uint32
	seq   uint32 // next TCP sequence number, or ICMP echo sequence number
	sport uint16 // ICMP: the echo identifier
	dport uint16
	proto uint8 // protoTCP, protoUDP or protoICMP (protoICMPv6 when v6)
	v6    bool
}

// generator holds the flow table and the random streams of one Write.
type generator struct {
	cfg   *Config
	start time.Time

	clients, servers, pairs uint32
	key                     uint64 // keys the host and pair bijections
	flows                   []flowSpec
	popular                 *alias // nil: uniform popularity

	flowRand, pktRand, malRand, clockRand, hdrRand stream

	sources, destinations, pairKeys, fragKeys bitset
	st                                        Stats
}

func newGenerator(cfg *Config) *generator {
	g := &generator{cfg: cfg, start: cfg.start()}
	g.flowRand.seed(cfg.Seed, streamFlows)
	g.pktRand.seed(cfg.Seed, streamPackets)
	g.malRand.seed(cfg.Seed, streamMalformed)
	g.clockRand.seed(cfg.Seed, streamClock)
	g.hdrRand.seed(cfg.Seed, streamHeaders)
	g.key = g.flowRand.next()

	f := uint32(cfg.Flows)
	g.pairs = ceilDiv(f, 3)
	g.clients = ceilDiv(g.pairs, 4)
	g.servers = max(ceilDiv(g.pairs, 10), ceilDiv(g.pairs, g.clients))
	g.sources = newBitset(2 * int(g.clients))
	g.destinations = newBitset(2 * int(g.servers))
	g.pairKeys = newBitset(2 * int(g.pairs))
	g.fragKeys = newBitset(int(g.pairs))
	g.buildFlows()
	if cfg.Zipf > 0 {
		g.popular = newZipfAlias(cfg.Flows, cfg.Zipf)
	}
	return g
}

// Service ports the flows go to: ones whose Wireshark dissectors take the
// text payload without declaring the packet malformed (DNS, NTP, SSH and
// OpenVPN would), so that a dissection of the file flags only the frames
// meant to be malformed.
var (
	tcpServices = [...]uint16{443, 80, 25, 993, 3306, 5432, 8080, 8443}
	udpServices = [...]uint16{443, 514, 5060, 8125}
)

const (
	ephemeralLow   = 32768
	ephemeralPorts = 28232 // 32768-60999, Linux's default range
)

func (g *generator) buildFlows() {
	r := &g.flowRand
	n := g.cfg.Flows
	v6 := selector{left: n, want: int(math.Round(g.cfg.IPv6 * float64(n)))}
	g.flows = make([]flowSpec, n)
	for i := range g.flows {
		p := uint32(i) % g.pairs
		j := uint32(i) / g.pairs // the flow's slot in its pair, 0 to 2
		f := flowSpec{pair: p, v6: v6.take(r), seq: uint32(r.next())}
		switch {
		case j == 0 && mix(g.key^0x1c3b, uint64(p))%10 == 0:
			f.proto = protoICMP
			if f.v6 {
				f.proto = protoICMPv6
			}
			f.sport = uint16(r.next())
			f.seq &= 0xffff
		case r.below(10) < 7:
			f.proto = protoTCP
			f.dport = tcpServices[r.below(len(tcpServices))]
		default:
			f.proto = protoUDP
			f.dport = udpServices[r.below(len(udpServices))]
		}
		if f.proto == protoTCP || f.proto == protoUDP {
			// Distinct slots of a pair get distinct source ports.
			off := uint32(mix(g.key^0x5be1, uint64(p)) % ephemeralPorts)
			f.sport = uint16(ephemeralLow + (off+j)%ephemeralPorts)
		}
		g.flows[i] = f

		fam := b2u(f.v6)
		c, s := g.hosts(p)
		g.sources.set(2*int(c) + fam)
		g.destinations.set(2*int(s) + fam)
		g.pairKeys.set(2*int(p) + fam)
		if f.v6 {
			g.st.IPv6Flows++
		}
	}
	// Popularity ranks go to flows at random: rank k is flows[k-1].
	for i := n - 1; i > 0; i-- {
		j := r.below(i + 1)
		g.flows[i], g.flows[j] = g.flows[j], g.flows[i]
	}
}

// hosts returns the client and server of pair p. Pair p = q*clients + c
// joins client c to server (q + off(c)) mod servers; since
// q < ceil(pairs/clients) <= servers, no two pairs join the same hosts.
func (g *generator) hosts(p uint32) (client, server uint32) {
	c, q := p%g.clients, p/g.clients
	off := uint32(mix(g.key^0x7e57, uint64(c)) % uint64(g.servers))
	return c, (q + off) % g.servers
}

func (g *generator) run(out packetWriter, snap int) (Stats, error) {
	cfg := g.cfg
	var buf [frameCap]byte
	mal := selector{left: cfg.Packets, want: cfg.malformedCount()}
	intro := selector{left: cfg.Packets - mal.want, want: cfg.Flows}
	clock := newClock(cfg.Packets, cfg.Duration)
	introduced := 0
	for range cfg.Packets {
		ts := g.start.Add(clock.next(&g.clockRand))
		// A malformed frame is a runt: nothing more was on the wire.
		var frame []byte
		if mal.take(&g.malRand) {
			frame = g.malformedFrame(buf[:])
		} else {
			var f *flowSpec
			fragment := false
			if intro.take(&g.pktRand) {
				f = &g.flows[permuteIndex(uint64(introduced), uint64(cfg.Flows), g.key^0x1d7f)]
				introduced++
			} else {
				f = &g.flows[g.drawFlow()]
				fragment = !f.v6 && f.proto == protoUDP && cfg.Fragments > 0 &&
					g.pktRand.float64() < cfg.Fragments
				if fragment {
					g.st.Fragments++
					g.fragKeys.set(int(f.pair))
				}
			}
			frame = g.flowFrame(buf[:], f, fragment, false)
		}
		wire := len(frame)
		if len(frame) > snap {
			frame = frame[:snap]
		}
		ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(frame), Length: wire}
		if err := out.WritePacket(ci, frame); err != nil {
			return g.st, err
		}
		g.st.Packets++
	}
	g.st.Flows = cfg.Flows
	g.st.Malformed = g.st.Truncated + g.st.BadVersion + g.st.NotIP
	g.st.Sources = g.sources.count()
	g.st.Destinations = g.destinations.count()
	g.st.Pairs = g.pairKeys.count()
	g.st.FiveTuples = cfg.Flows + g.fragKeys.count()
	return g.st, nil
}

func (g *generator) drawFlow() int {
	if g.popular != nil {
		return g.popular.draw(&g.pktRand)
	}
	return g.pktRand.below(len(g.flows))
}

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
		tlen = 8 + r.below(25)
		copy(t[:tlen], payloadText)
	case proto == protoTCP:
		plen := r.below(25)
		binary.BigEndian.PutUint16(t[0:], f.sport)
		binary.BigEndian.PutUint16(t[2:], f.dport)
		binary.BigEndian.PutUint32(t[4:], f.seq)
		binary.BigEndian.PutUint32(t[8:], uint32(mix(g.key, uint64(f.sport)<<32|uint64(f.pair))))
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
		plen := 4 + r.below(29)
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
		label := uint32(mix(g.key^0xf10, uint64(f.sport)<<32|uint64(f.pair))) & 0xfffff
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
		binary.BigEndian.PutUint16(h[4:], uint16(r.next()))
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
	f := g.flows[r.below(len(g.flows))] // a copy: f's own sequence stays
	switch r.below(3) {
	case 0: // cut inside the IP header, before the source address
		frame := g.flowFrame(buf, &f, false, false)
		l2 := len(frame) - g.ipAndTransportLen(frame)
		cut := 1 + r.below(11) // IPv4: the source address starts at byte 12
		if f.v6 {
			cut = 1 + r.below(7) // IPv6: at byte 8
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
		h := mix(g.key^0x71a9, uint64(c))
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

// clock yields the offsets of n packet timestamps from the start: the first
// is 0, the others the order statistics of n-1 uniform points over d,
// produced in increasing order by drawing each one as the minimum of the
// points still to come.
type clock struct {
	left int     // points still to draw
	t    float64 // the last point, as a fraction of d
	d    time.Duration
	last time.Duration
	done bool
}

func newClock(n int, d time.Duration) clock { return clock{left: n - 1, d: d} }

func (c *clock) next(r *stream) time.Duration {
	if !c.done {
		c.done = true
		return 0
	}
	// The minimum of k uniforms on [t, 1] is t + (1-t)(1 - U^(1/k)).
	u := 1 - r.float64() // in (0, 1]
	c.t += (1 - c.t) * -math.Expm1(math.Log(u)/float64(c.left))
	c.left--
	off := min(time.Duration(c.t*float64(c.d)), c.d)
	c.last = max(c.last, off) // rounding must never step back
	return c.last
}

// selector answers take exactly want times out of left calls, each subset
// of calls equally likely (selection sampling, Knuth's Algorithm S).
type selector struct{ left, want int }

func (s *selector) take(r *stream) bool {
	if s.left <= 0 {
		return false
	}
	yes := r.below(s.left) < s.want
	s.left--
	if yes {
		s.want--
	}
	return yes
}

// stream is a seeded PCG generator with the few draws the generator needs,
// written here rather than taken from math/rand/v2's Rand so that outputs
// stay the same across Go releases (only the PCG source's sequence is
// specified).
type stream struct{ pcg rand.PCG }

func (s *stream) seed(seed, id uint64) { s.pcg.Seed(seed, id) }

func (s *stream) next() uint64 { return s.pcg.Uint64() }

// below returns a uniform int in [0, n), n > 0, by Lemire's multiply-shift
// with rejection.
func (s *stream) below(n int) int {
	hi, lo := bits.Mul64(s.next(), uint64(n))
	if lo < uint64(n) {
		thresh := -uint64(n) % uint64(n)
		for lo < thresh {
			hi, lo = bits.Mul64(s.next(), uint64(n))
		}
	}
	return int(hi)
}

// float64 returns a uniform float64 in [0, 1).
func (s *stream) float64() float64 { return float64(s.next()>>11) * 0x1p-53 }

// mix hashes x under key (the splitmix64 finaliser): for choices that must
// be a function of a host or pair rather than drawn in sequence.
func mix(key, x uint64) uint64 {
	z := x + key + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// scramble is a keyed bijection on w-bit values: xor with a key, multiply
// by an odd constant and xor-shift are each invertible modulo 2^w.
func scramble(x uint64, w uint, key uint64) uint64 {
	mask := uint64(1)<<w - 1 // all ones for w = 64: the shift gives 0
	for round := range uint64(3) {
		x = (x ^ mix(key, round)) & mask
		x = x * 0xd6e8feb86659fd93 & mask
		x ^= x >> ((w + 1) / 2)
	}
	return x
}

// permuteIndex maps i in [0, n) to [0, n) by a keyed bijection: scramble
// over the smallest power of two holding n, walking the cycle until it
// lands back in range (cycle walking; under two steps on average).
func permuteIndex(i, n, key uint64) uint64 {
	w := uint(bits.Len64(n - 1))
	if w == 0 {
		return 0
	}
	for {
		i = scramble(i, w, key)
		if i < n {
			return i
		}
	}
}

// bitset is a fixed-size set of small integers.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) set(i int) { b[i/64] |= 1 << (i % 64) }

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// alias samples an index in [0, n) from a fixed distribution in O(1) by
// Walker's alias method (Vose's construction): index i is kept with
// probability prob[i], else replaced by alias[i].
type alias struct {
	prob  []float64
	alias []uint32
}

// newZipfAlias returns the alias table of ranks 1..n, as indices 0..n-1,
// with P(rank k) ∝ k^-s.
func newZipfAlias(n int, s float64) *alias {
	w := make([]float64, n)
	var total float64
	for i := range w {
		w[i] = math.Exp(-s * math.Log(float64(i+1)))
		total += w[i]
	}
	return newAlias(w, total)
}

// newAlias builds the table of weights w, whose sum is total; it reuses w.
func newAlias(w []float64, total float64) *alias {
	n := len(w)
	a := &alias{prob: w, alias: make([]uint32, n)}
	// Scale to mean 1, then pair each under-full index with an over-full
	// one that tops it up. work holds the under-full indices from the
	// front and the over-full ones from the back.
	work := make([]uint32, n)
	small, large := 0, n
	for i := range w {
		w[i] *= float64(n) / total
		if w[i] < 1 {
			work[small] = uint32(i)
			small++
		} else {
			large--
			work[large] = uint32(i)
		}
	}
	for small > 0 && large < n {
		small--
		l, g := work[small], work[large]
		a.alias[l] = g // prob[l] already holds l's share
		w[g] -= 1 - w[l]
		if w[g] < 1 {
			large++
			work[small] = g
			small++
		}
	}
	// Whatever is left is full up to rounding.
	for _, i := range work[:small] {
		w[i] = 1
	}
	for _, i := range work[large:] {
		w[i] = 1
	}
	return a
}

func (a *alias) draw(r *stream) int {
	i := r.below(len(a.prob))
	if r.float64() < a.prob[i] {
		return i
	}
	return int(a.alias[i])
}

func ceilDiv(a, b uint32) uint32 { return (a + b - 1) / b }

func b2u(b bool) int {
	if b {
		return 1
	}
	return 0
}

package gen

import (
	"bufio"
	"compress/gzip"
	"io"
	"math"
	"math/bits"
	"strconv"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/flowdedup/flowdedup/mix"
)

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
	// The format writers write through cut, which CutShort uses to end the
	// file inside the last record.
	cut := &cutWriter{w: w, limit: -1}
	w = cut
	snap := cfg.SnapLen
	if snap == 0 {
		snap = MaxSnapLen
	}
	var (
		out   packetWriter
		flush func() error
	)
	if cfg.Format == FormatPcapNG {
		intf := pcapgo.NgInterface{
			Name:                "gen0",
			LinkType:            layers.LinkTypeEthernet,
			SnapLength:          uint32(snap),
			TimestampResolution: 9,
		}
		ng, err := pcapgo.NewNgWriterInterface(w, intf, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "flowdedup gen"}})
		if err != nil {
			return Stats{}, err
		}
		for i := 1; i < cfg.Interfaces; i++ {
			intf.Name = "gen" + strconv.Itoa(i)
			if _, err := ng.AddInterface(intf); err != nil {
				return Stats{}, err
			}
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
	if err == nil && cfg.CutShort {
		err = g.cutShort(out, flush, cut)
	}
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

// cutShort writes the last packet again as a record cut after its header
// and half of its data (Config.CutShort): everything before it is flushed
// through cut whole, then cut lets only that much of the record through.
func (g *generator) cutShort(out packetWriter, flush func() error, cut *cutWriter) error {
	if err := flush(); err != nil {
		return err
	}
	hdr := 16 // pcap record header
	if g.cfg.Format == FormatPcapNG {
		hdr = 28 // enhanced packet block up to its data
	}
	cut.limit = cut.n + int64(hdr+len(g.last)/2)
	ci := g.lastCI
	return out.WritePacket(ci, g.last)
}

// cutWriter passes bytes to w up to limit (-1: all of them) and drops the
// rest, as a disk that filled up or a killed writer would.
type cutWriter struct {
	w     io.Writer
	n     int64 // bytes passed to w
	limit int64
}

func (c *cutWriter) Write(p []byte) (int, error) {
	q := p
	if c.limit >= 0 {
		q = p[:min(int64(len(p)), max(c.limit-c.n, 0))]
	}
	n, err := c.w.Write(q)
	c.n += int64(n)
	if err != nil {
		return n, err
	}
	return len(p), nil
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
	streamJitter
	streamInterfaces
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
	popular                 *mix.Alias // nil: uniform popularity

	flowRand, pktRand, malRand, clockRand, hdrRand mix.PCG
	jitterRand, ifaceRand                          mix.PCG
	skew                                           []time.Duration // by interface: how far its clock is behind

	sources, destinations, pairKeys, fragKeys bitset
	st                                        Stats

	// The last packet written, for CutShort; last is a slice of run's
	// frame buffer.
	last   []byte
	lastCI gopacket.CaptureInfo
}

func newGenerator(cfg *Config) *generator {
	g := &generator{cfg: cfg, start: cfg.start()}
	g.flowRand = mix.NewPCG(cfg.Seed, streamFlows)
	g.pktRand = mix.NewPCG(cfg.Seed, streamPackets)
	g.malRand = mix.NewPCG(cfg.Seed, streamMalformed)
	g.clockRand = mix.NewPCG(cfg.Seed, streamClock)
	g.hdrRand = mix.NewPCG(cfg.Seed, streamHeaders)
	g.jitterRand = mix.NewPCG(cfg.Seed, streamJitter)
	g.ifaceRand = mix.NewPCG(cfg.Seed, streamInterfaces)
	g.key = g.flowRand.Uint64()
	if n := cfg.Interfaces; n > 1 {
		g.skew = make([]time.Duration, n)
		for i := range g.skew {
			// skew*i/(n-1) <= skew: the quotient fits.
			hi, lo := bits.Mul64(uint64(cfg.InterfaceSkew), uint64(i))
			q, _ := bits.Div64(hi, lo, uint64(n-1))
			g.skew[i] = time.Duration(q)
		}
	}

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
		g.popular = mix.NewZipfTable(cfg.Flows, cfg.Zipf)
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
		f := flowSpec{pair: p, v6: v6.take(r), seq: uint32(r.Uint64())}
		switch {
		case j == 0 && keyed(g.key^0x1c3b, uint64(p))%10 == 0:
			f.proto = protoICMP
			if f.v6 {
				f.proto = protoICMPv6
			}
			f.sport = uint16(r.Uint64())
			f.seq &= 0xffff
		case r.IntN(10) < 7:
			f.proto = protoTCP
			f.dport = tcpServices[r.IntN(len(tcpServices))]
		default:
			f.proto = protoUDP
			f.dport = udpServices[r.IntN(len(udpServices))]
		}
		if f.proto == protoTCP || f.proto == protoUDP {
			// Distinct slots of a pair get distinct source ports.
			off := uint32(keyed(g.key^0x5be1, uint64(p)) % ephemeralPorts)
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
		j := r.IntN(i + 1)
		g.flows[i], g.flows[j] = g.flows[j], g.flows[i]
	}
}

// hosts returns the client and server of pair p. Pair p = q*clients + c
// joins client c to server (q + off(c)) mod servers; since
// q < ceil(pairs/clients) <= servers, no two pairs join the same hosts.
func (g *generator) hosts(p uint32) (client, server uint32) {
	c, q := p%g.clients, p/g.clients
	off := uint32(keyed(g.key^0x7e57, uint64(c)) % uint64(g.servers))
	return c, (q + off) % g.servers
}

func (g *generator) run(out packetWriter, snap int) (Stats, error) {
	cfg := g.cfg
	buf := make([]byte, frameCap) // kept after the loop for CutShort
	mal := selector{left: cfg.Packets, want: cfg.malformedCount()}
	intro := selector{left: cfg.Packets - mal.want, want: cfg.Flows}
	clock := newClock(cfg.Packets, cfg.Duration)
	introduced := 0
	var prev time.Time
	for i := range cfg.Packets {
		ts := g.start.Add(clock.next(&g.clockRand))
		iface := 0
		if cfg.Jitter > 0 {
			ts = ts.Add(-time.Duration(g.jitterRand.Uint64N(uint64(cfg.Jitter) + 1)))
		}
		if g.skew != nil {
			iface = g.ifaceRand.IntN(len(g.skew))
			ts = ts.Add(-g.skew[iface])
		}
		if i > 0 && ts.Before(prev) {
			g.st.Backward++
		}
		prev = ts
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
					g.pktRand.Float64() < cfg.Fragments
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
		ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(frame), Length: wire, InterfaceIndex: iface}
		if err := out.WritePacket(ci, frame); err != nil {
			return g.st, err
		}
		g.st.Packets++
		g.last, g.lastCI = frame, ci
	}
	g.st.Flows = cfg.Flows
	g.st.Malformed = g.st.Truncated + g.st.BadVersion + g.st.NotIP
	g.st.Sources = g.sources.count()
	g.st.Destinations = g.destinations.count()
	g.st.Pairs = g.pairKeys.count()
	g.st.FiveTuples = cfg.Flows + g.fragKeys.count()
	if cfg.Scanner > 0 || cfg.Victim > 0 {
		if err := g.attack(out, buf, snap, g.lastCI); err != nil {
			return g.st, err
		}
	}
	return g.st, nil
}

func (g *generator) drawFlow() int {
	if g.popular != nil {
		return g.popular.Draw(&g.pktRand)
	}
	return g.pktRand.IntN(len(g.flows))
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

func ceilDiv(a, b uint32) uint32 { return (a + b - 1) / b }

func b2u(b bool) int {
	if b {
		return 1
	}
	return 0
}

package gen

import (
	"encoding/binary"

	"github.com/gopacket/gopacket"
)

// MaxAttackHosts bounds Config.Scanner and Config.Victim: the hosts of
// one /11, less its network and broadcast addresses.
const MaxAttackHosts = 1<<21 - 2

// The hosts of the scanner and the victim (Config.Scanner, Config.Victim),
// in documentation and shared address space apart from the flows' own
// (10.0.0.0/8 clients, 172.16.0.0/12 servers), so that their counts are
// theirs alone.
const (
	ScannerAddr4 = 203<<24 | 113<<8 | 66 // 203.0.113.66
	VictimAddr4  = 203<<24 | 113<<8 | 80 // 203.0.113.80
	scanNet4     = 100<<24 | 64<<16      // 100.64.0.0/11: the scanner's targets
	floodNet4    = 100<<24 | 96<<16      // 100.96.0.0/11: the flood's sources
)

// attack writes the scanner's and the victim's packets (Config.Scanner,
// Config.Victim) after the flows', all at the time of the last packet so
// that time never goes back: the scanner's TCP SYN to port 22 of each of
// Scanner hosts of 100.64.0.0/11, then a TCP SYN to port 80 of the
// victim from each of Victim hosts of 100.96.0.0/11. Which hosts, and
// their source ports, follow from Seed.
func (g *generator) attack(out packetWriter, buf []byte, snap int, ts gopacket.CaptureInfo) error {
	for side, k := range [2]int{g.cfg.Scanner, g.cfg.Victim} {
		for i := range k {
			host := 1 + uint32(permuteIndex(uint64(i), 1<<21-2, g.key^0xa77ac4^uint64(side)))
			src, dst, dport := uint32(ScannerAddr4), scanNet4|host, uint16(22)
			if side == 1 {
				src, dst, dport = floodNet4|host, VictimAddr4, 80
			}
			sport := uint16(ephemeralLow + keyed(g.key^0x5c4e, uint64(side)<<32|uint64(i))%ephemeralPorts)
			frame := g.synFrame(buf, src, dst, sport, dport)
			wire := len(frame)
			if len(frame) > snap {
				frame = frame[:snap]
			}
			ci := ts
			ci.CaptureLength, ci.Length, ci.InterfaceIndex = len(frame), wire, 0
			if err := out.WritePacket(ci, frame); err != nil {
				return err
			}
			g.st.Packets++
			g.last, g.lastCI = frame, ci
		}
	}
	// The scanner is one source to Scanner destinations, the victim one
	// destination from Victim sources: each packet is a pair and a
	// 5-tuple of its own.
	k := g.cfg.Scanner + g.cfg.Victim
	g.st.Pairs += k
	g.st.FiveTuples += k
	g.st.Destinations += g.cfg.Scanner
	g.st.Sources += g.cfg.Victim
	if g.cfg.Scanner > 0 {
		g.st.Sources++
	}
	if g.cfg.Victim > 0 {
		g.st.Destinations++
	}
	return nil
}

// synFrame writes an untagged Ethernet, IPv4, TCP SYN frame into buf.
func (g *generator) synFrame(buf []byte, src, dst uint32, sport, dport uint16) []byte {
	copy(buf[0:6], gatewayMAC[:])
	buf[6], buf[7] = 0x02, 0x00
	binary.BigEndian.PutUint32(buf[8:], src)
	binary.BigEndian.PutUint16(buf[12:], etherTypeIPv4)
	h := buf[14:34]
	h[0], h[1] = 0x45, 0
	binary.BigEndian.PutUint16(h[2:], 40)
	binary.BigEndian.PutUint16(h[4:], uint16(g.hdrRand.Uint64()))
	binary.BigEndian.PutUint16(h[6:], 0x4000)
	h[8], h[9] = 64, protoTCP
	binary.BigEndian.PutUint32(h[12:], src)
	binary.BigEndian.PutUint32(h[16:], dst)
	setIPv4Checksum(h)
	t := buf[34:54]
	binary.BigEndian.PutUint16(t[0:], sport)
	binary.BigEndian.PutUint16(t[2:], dport)
	binary.BigEndian.PutUint32(t[4:], uint32(g.hdrRand.Uint64()))
	clear(t[8:12])
	t[12], t[13] = 5<<4, 0x02 // SYN
	binary.BigEndian.PutUint16(t[14:], 64240)
	clear(t[16:20])
	binary.BigEndian.PutUint16(t[16:], checksum(t, pseudoHeaderSum(h, protoTCP, 20, false)))
	return buf[:54]
}

package collecttest

import (
	"math/rand/v2"
	"net/netip"
	"time"
)

// Flows returns n flows drawn from seed: TCP, UDP and ICMP between
// addresses of 10.0.0.0/16 and 2001:db8::/48 (one in five IPv6), each
// starting in the minute before end and ending at end.
func Flows(n int, seed uint64, end time.Time) []Flow {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	flows := make([]Flow, n)
	for i := range flows {
		f := &flows[i]
		if rng.IntN(5) == 0 {
			var a, b [16]byte
			copy(a[:], []byte{0x20, 0x01, 0x0d, 0xb8})
			copy(b[:], a[:])
			a[15], a[14] = byte(rng.Uint32()), byte(rng.Uint32())
			b[15], b[14] = byte(rng.Uint32()), byte(rng.Uint32())
			f.Src, f.Dst = netip.AddrFrom16(a), netip.AddrFrom16(b)
		} else {
			f.Src = netip.AddrFrom4([4]byte{10, 0, byte(rng.Uint32()), byte(rng.Uint32())})
			f.Dst = netip.AddrFrom4([4]byte{10, 0, byte(rng.Uint32()), byte(rng.Uint32())})
		}
		switch rng.IntN(3) {
		case 0:
			f.Proto = 6
		case 1:
			f.Proto = 17
		default:
			f.Proto = 1
			if f.Src.Is6() {
				f.Proto = 58
			}
		}
		if f.Proto == 6 || f.Proto == 17 {
			f.SrcPort, f.DstPort = uint16(1024+rng.IntN(60000)), uint16(1+rng.IntN(1023))
		}
		f.Start = end.Add(-time.Duration(rng.Int64N(int64(time.Minute)))).Truncate(time.Millisecond)
		f.End = end
		f.Packets = uint32(1 + rng.IntN(100))
		f.Bytes = f.Packets * uint32(60+rng.IntN(1400))
	}
	return flows
}

package ipfix_test

import (
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// base is the first packet time of the project's test captures,
// 2026-01-01T00:00:00Z.
var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// portlessKey returns a 5-tuple key without ports of a protocol that has
// them, as flow.Parse keys a non-first fragment; MakeKey cannot make one.
func portlessKey(src, dst netip.Addr, proto uint8) flow.Key {
	var b [flow.KeySize]byte
	if src.Is4() {
		s, d := src.As4(), dst.As4()
		copy(b[0:], s[:])
		copy(b[16:], d[:])
	} else {
		s, d := src.As16(), dst.As16()
		copy(b[0:], s[:])
		copy(b[16:], d[:])
		b[38] = 1 // IPv6
	}
	b[36], b[37] = proto, byte(flow.Key5Tuple)
	var k flow.Key
	if err := k.UnmarshalBinary(b[:]); err != nil {
		panic(err)
	}
	return k
}

// edgeAddrs are addresses worth one record each: the extremes, and an
// IPv4-mapped IPv6 address (which stays IPv6).
var edgeAddrs = []netip.Addr{
	netip.MustParseAddr("0.0.0.0"),
	netip.MustParseAddr("255.255.255.255"),
	netip.MustParseAddr("::"),
	netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
	netip.MustParseAddr("::ffff:192.0.2.1"),
}

func randAddr(rng *rand.Rand, v6 bool) netip.Addr {
	if rng.IntN(50) == 0 {
		for {
			if a := edgeAddrs[rng.IntN(len(edgeAddrs))]; a.Is6() == v6 {
				return a
			}
		}
	}
	if v6 {
		var b [16]byte
		b[0], b[1], b[2], b[3] = 0x20, 0x01, 0x0d, 0xb8
		for i := 4; i < 16; i++ {
			b[i] = byte(rng.Uint32())
		}
		return netip.AddrFrom16(b)
	}
	return netip.AddrFrom4([4]byte{10, byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())})
}

func randPort(rng *rand.Rand) uint16 {
	switch rng.IntN(20) {
	case 0:
		return 0
	case 1:
		return 65535
	}
	return uint16(rng.Uint32())
}

// randKey returns a key of kind: IPv4 or IPv6 (a quarter), and for
// 5-tuples TCP, UDP and SCTP with ports, ICMP or ICMPv6, GRE, and UDP
// non-first fragments without ports.
func randKey(rng *rand.Rand, kind flow.KeyKind) flow.Key {
	v6 := rng.IntN(4) == 0
	src, dst := randAddr(rng, v6), randAddr(rng, v6)
	if kind != flow.Key5Tuple {
		return flow.MakeKey(kind, src, dst, 0, 0, 0)
	}
	switch rng.IntN(8) {
	case 0, 1, 2:
		return flow.MakeKey(kind, src, dst, 6, randPort(rng), randPort(rng))
	case 3, 4:
		return flow.MakeKey(kind, src, dst, 17, randPort(rng), randPort(rng))
	case 5:
		return flow.MakeKey(kind, src, dst, 132, randPort(rng), randPort(rng))
	case 6:
		proto := uint8(1)
		if v6 {
			proto = 58
		}
		if rng.IntN(3) == 0 {
			proto = 47 // GRE
		}
		return flow.MakeKey(kind, src, dst, proto, 0, 0)
	default:
		return portlessKey(src, dst, 17)
	}
}

// randRecords returns n records of kind spread over windows of a minute
// from base, their times with every precision: whole seconds, milliseconds,
// microseconds, nanoseconds, and the last nanosecond of a millisecond (which
// must be truncated, not rounded).
func randRecords(rng *rand.Rand, kind flow.KeyKind, n, windows int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		w := int64(i * windows / max(n, 1))
		start := base.UnixNano() + w*int64(time.Minute)
		off := rng.Int64N(int64(time.Minute))
		switch rng.IntN(5) {
		case 0:
			off -= off % int64(time.Second)
		case 1:
			off -= off % int64(time.Millisecond)
		case 2:
			off -= off % int64(time.Microsecond)
		case 3:
			off = off - off%int64(time.Millisecond) + int64(time.Millisecond) - 1
		}
		recs[i] = record.Record{
			Key:         randKey(rng, kind),
			TimeNs:      start + off,
			WindowNs:    start,
			WindowEndNs: start + int64(time.Minute),
			Worker:      rng.IntN(4),
		}
	}
	return recs
}

// fakeClock is the exporter's clock in tests that control time.
type fakeClock struct{ t time.Time }

func newFakeClock() *fakeClock { return &fakeClock{t: base.Add(90 * 24 * time.Hour)} }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

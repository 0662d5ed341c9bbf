package flow

import "testing"

// reportRate adds a per-second rate of the operations b.Loop ran.
func reportRate(b *testing.B, n int, unit string) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(n)/s, unit)
	}
}

func BenchmarkParse(b *testing.B) {
	frames := []struct {
		name  string
		lt    LinkType
		kind  KeyKind
		frame []byte
	}{
		{"eth-ipv4-tcp/5tuple", LinkEthernet, Key5Tuple, ether(etherTypeIPv4, tcp4IP)},
		{"eth-ipv4-tcp/src", LinkEthernet, KeySrc, ether(etherTypeIPv4, tcp4IP)},
		{"vlan-ipv6-udp/5tuple", LinkEthernet, Key5Tuple, ether(etherTypeVLAN, vlan(100, etherTypeIPv6), udp6IP)},
		{"vlan-ipv6-udp/pair", LinkEthernet, KeyPair, ether(etherTypeVLAN, vlan(100, etherTypeIPv6), udp6IP)},
		{"qinq-mpls-ipv6-hbh-tcp/5tuple", LinkEthernet, Key5Tuple, ether(etherTypeQinQ, vlan(1, etherTypeVLAN), vlan(2, etherTypeMPLSUnicast), mplsStack(2),
			ip6{src: "2001:db8::1", dst: "2001:db8::2", next: ip6HopByHop}.packet(cat(opts6(protoTCP, 0), tcp(1, 2))))},
	}
	for _, f := range frames {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(f.frame)))
			n := 0
			for b.Loop() {
				sinkKey, sinkErr = Parse(f.frame, f.lt, f.kind)
				n++
			}
			if sinkErr != nil {
				b.Fatal(sinkErr)
			}
			reportRate(b, n, "pkts/s")
		})
	}
}

func BenchmarkHash(b *testing.B) {
	for _, c := range []struct {
		name string
		k    Key
	}{
		{"ipv4-src", project(tcp4, KeySrc)},
		{"ipv4-5tuple", tcp4},
		{"ipv6-src", project(tcp6, KeySrc)},
		{"ipv6-5tuple", tcp6},
		{"ipv4-src-net", masked(project(tcp4, KeySrc))},
		{"ipv4-5tuple-net", masked(tcp4)},
		{"ipv6-src-net", masked(project(tcp6, KeySrc))},
		{"ipv6-5tuple-net", masked(tcp6)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				sinkHash = c.k.Hash(0x9e3779b97f4a7c15)
				n++
			}
			reportRate(b, n, "keys/s")
		})
	}
}

func BenchmarkShardOf(b *testing.B) {
	b.ReportAllocs()
	h := uint64(1)
	for b.Loop() {
		h += uint64(ShardOf(h, 12)) + 0x9e3779b97f4a7c15
	}
	sinkHash = h
}

// masked is k masked to /24 (IPv4) or /64 (IPv6).
func masked(k Key) Key {
	mustMask(24, 64).Apply(&k)
	return k
}

// BenchmarkMaskApply: the cost --prefix adds to each packet, and with the
// zero Mask (--prefix off) the one branch it costs.
func BenchmarkMaskApply(b *testing.B) {
	for _, c := range []struct {
		name string
		m    Mask
		k    Key
	}{
		{"off", Mask{}, tcp4},
		{"ipv4", mustMask(24, 64), tcp4},
		{"ipv6", mustMask(24, 64), tcp6},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				k := c.k
				c.m.Apply(&k)
				sinkKey = k
			}
		})
	}
}

// BenchmarkDecap: what --decap costs per tunnel kind (src keys, --decap
// all, the first frame of each capture of scripts/mkdecap.py), and with
// --decap none on a plain frame, which must be BenchmarkParse's cost.
func BenchmarkDecap(b *testing.B) {
	plain := ether(etherTypeIPv4, tcp4IP)
	cases := []struct {
		name  string
		frame []byte
		d     *Decap
	}{
		{"none/eth-ipv4-tcp", plain, &Decap{}},
		{"all/eth-ipv4-tcp", plain, &decapAll},
	}
	for _, c := range []struct{ name, file string }{
		{"gre-ipv4", "gre"}, {"erspan-i", "erspan"}, {"vxlan", "vxlan"}, {"geneve", "geneve"},
		{"gtpu", "gtpu"}, {"ipip-4in4", "ipip"}, {"nested-vxlan-in-gre", "nested"},
	} {
		frames := readPcap(b, "testdata/decap/"+c.file+".pcap")
		cases = append(cases, struct {
			name  string
			frame []byte
			d     *Decap
		}{"all/" + c.name, frames[0], &decapAll})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var k Key
			var err error
			n := 0
			for b.Loop() {
				err = k.DecodeDecap(c.frame, LinkEthernet, KeySrc, c.d)
				n++
			}
			if err != nil {
				b.Fatal(err)
			}
			sinkKey = k
			reportRate(b, n, "pkts/s")
		})
	}
}

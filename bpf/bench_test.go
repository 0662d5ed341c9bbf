//go:build linux && !(mips || mips64 || ppc64 || s390x)

package bpf_test

import (
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// BenchmarkXDP measures the program in the kernel (BPF_PROG_TEST_RUN with
// repeat): ns/op and ns/pkt are the kernel's time per run, without the
// syscall, and pkts/s its inverse, on one CPU. Each case runs with one
// window and with hourly windows, where every frame reads the clock and
// is counted in its window too. The /prefix cases key by network (24,64),
// beside the same frame keyed by host.
func BenchmarkXDP(b *testing.B) {
	v6ext := cat(eth(etIPv6), ip6(pHop, a6, b6, 0), ext6(pDst, 0), ext6(pRoute, 1), ext6(pFrag, 0),
		frag6(pTCP, 0, true), tcp(443, 50000))
	prefix, err := flow.ParseMask("24,64")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		kind   flow.KeyKind
		prefix flow.Mask
		frame  []byte
		want   bpf.Counters // per run
	}{
		{"hit/5tuple/ipv4-tcp", flow.Key5Tuple, flow.Mask{}, tcp4(a4, b4, 1234, 80), hit},
		{"hit/src/ipv4-tcp", flow.KeySrc, flow.Mask{}, tcp4(a4, b4, 1234, 80), hit},
		{"hit/src/ipv4-tcp/prefix", flow.KeySrc, prefix, tcp4(a4, b4, 1234, 80), hit},
		{"hit/src/ipv6-udp", flow.KeySrc, flow.Mask{}, udp6(a6, b6, 1234, 53), hit},
		{"hit/src/ipv6-udp/prefix", flow.KeySrc, prefix, udp6(a6, b6, 1234, 53), hit},
		{"hit/5tuple/ipv6-4ext-tcp", flow.Key5Tuple, flow.Mask{}, v6ext, hit},
		{"notip/arp", flow.Key5Tuple, flow.Mask{}, cat(eth(etARP), make([]byte, 28)), bpf.Counters{Packets: 1, Errors: [bpf.NumErrs]uint64{1: 1}}},
	} {
		for _, window := range []time.Duration{0, time.Hour} {
			name := c.name
			if window > 0 {
				name += "/1h-windows"
			}
			benchmarkXDP(b, name, bpf.Config{Kind: c.kind, Prefix: c.prefix, Seed: 1, Window: window, RingBytes: 1 << 16}, c.frame, c.want)
		}
	}
}

func benchmarkXDP(b *testing.B, name string, cfg bpf.Config, frame []byte, want bpf.Counters) {
	b.Run(name, func(b *testing.B) {
		h := newHarness(b, cfg)
		testutil.PinThread(b)
		h.mustRun(frame) // the key is in the prefilter from now on
		h.drain(nil)
		h.delta()
		b.ReportAllocs()
		b.ResetTimer()
		ret, per, err := h.o.Program.Benchmark(frame, b.N, b.ResetTimer)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if ret != xdpPass {
			b.Fatalf("returned %d", ret)
		}
		// Every run took the path the name says (the kernel may run
		// the program more than b.N times).
		d := h.delta()
		runs := d.Packets
		if runs < uint64(b.N) || d.Keyed != want.Keyed*runs || d.PrefilterHits != want.PrefilterHits*runs || d.Errors != [bpf.NumErrs]uint64{want.Errors[0] * runs, want.Errors[1] * runs} {
			b.Fatalf("%d runs: counters moved by %+v, want %+v per run", b.N, d, want)
		}
		ns := float64(per.Nanoseconds())
		b.ReportMetric(ns, "ns/op")
		b.ReportMetric(ns, "ns/pkt")
		if ns > 0 {
			b.ReportMetric(1e9/ns, "pkts/s")
		}
	})
}

// BenchmarkXDPDecap measures the decapsulating program (Config.Decap every
// tunnel kind) on a prefilter hit, key src, one window: a frame of each
// tunnel kind, and untunnelled frames, whose cost beside BenchmarkXDP's is
// what decapsulation costs traffic it does not concern.
func BenchmarkXDPDecap(b *testing.B) {
	byName := make(map[string]tunnelCase)
	for _, c := range tunnelCases() {
		byName[c.name] = c
	}
	for _, c := range []struct{ name, tcase string }{
		{"gre", "gre ipv4 in ipv4"},
		{"gre-ckS", "gre ipv6 in ipv4 with checksum, key, sequence"},
		{"erspan2", "erspan type ii"},
		{"erspan3", "erspan type iii"},
		{"vxlan", "vxlan 4789"},
		{"geneve-opts", "geneve ipv6 with options"},
		{"gtpu", "gtp-u t-pdu"},
		{"gtpu-2ext", "gtp-u t-pdu with 2 extension headers"},
		{"ipip", "ipv4 in ipv4"},
		{"6in6", "ipv6 in ipv6"},
		{"4-levels", "4 levels"},
	} {
		tc, ok := byName[c.tcase]
		if !ok {
			b.Fatalf("no tunnel case %q", c.tcase)
		}
		benchmarkXDP(b, "hit/src/"+c.name, bpf.Config{Kind: flow.KeySrc, Seed: 1, RingBytes: 1 << 16,
			Decap: decapOf(flow.TunnelsAll, false)}, tc.frame, hit)
	}
	for _, c := range []struct {
		name  string
		kind  flow.KeyKind
		frame []byte
	}{
		{"hit/5tuple/ipv4-tcp", flow.Key5Tuple, tcp4(a4, b4, 1234, 80)},
		{"hit/src/ipv4-tcp", flow.KeySrc, tcp4(a4, b4, 1234, 80)},
		{"hit/src/ipv6-udp", flow.KeySrc, udp6(a6, b6, 1234, 53)},
	} {
		benchmarkXDP(b, c.name+"/untunnelled", bpf.Config{Kind: c.kind, Seed: 1, RingBytes: 1 << 16,
			Decap: decapOf(flow.TunnelsAll, false)}, c.frame, hit)
	}
}

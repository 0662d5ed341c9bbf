//go:build linux && !(mips || mips64 || ppc64 || s390x)

package bpf_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/flow"
)

// minRunLen is the shortest input BPF_PROG_TEST_RUN accepts for XDP (an
// Ethernet header); shorter frames cannot be run. The kernel gives XDP
// programs no shorter frames either.
const minRunLen = 14

// maxRunLen bounds the frames the tests run: BPF_PROG_TEST_RUN puts an XDP
// program's input in one page with headroom and tailroom (3520 bytes on
// x86-64 with 4 KiB pages) unless the program handles fragments, which this
// one does not.
const maxRunLen = 3000

// parityHarnesses loads one program per key kind, prefilter off.
func parityHarnesses(tb testing.TB) map[flow.KeyKind]*harness {
	hs := make(map[flow.KeyKind]*harness)
	for _, k := range kinds {
		hs[k] = newHarness(tb, bpf.Config{Kind: k, PrefilterBytes: -1, RingBytes: 1 << 20})
	}
	return hs
}

// prefixSets are the masks the prefix parity tests load, one per kind in
// each set: the common /24 and /64, lengths that cut a byte or a word, the
// extremes (/0, whole addresses).
var prefixSets = [][4]string{
	{"24,64", "17,100", "0,0", "32,128"},
	{"1,127", "31,65", "8,63", "24,64"},
}

// prefixHarnesses loads one program per key kind, prefilter off, each
// masking keys by the mask of set that its kind's place names.
func prefixHarnesses(tb testing.TB, set [4]string) map[flow.KeyKind]*harness {
	hs := make(map[flow.KeyKind]*harness)
	for i, k := range kinds {
		m, err := flow.ParseMask(set[i])
		if err != nil {
			tb.Fatal(err)
		}
		hs[k] = newHarness(tb, bpf.Config{Kind: k, Prefix: m, PrefilterBytes: -1, RingBytes: 1 << 20})
	}
	return hs
}

// result is what a parser made of a frame: a key, or an error class.
type result struct {
	key flow.Key
	err int // index in bpf.Errs, -1 for a key
}

func (r result) String() string {
	switch {
	case r.err >= 0:
		return "error " + bpf.Reasons[r.err]
	case r.err == -1:
		return "key " + r.key.String()
	}
	return "no consistent result"
}

// parity runs the program (of kind) on frame and compares what it did
// with flow.Parse, or flow.ParseDecapFrame with the program's Decap, and
// the program's Mask applied after it: "" when they
// agree, else a description of the difference. Besides the result, it
// checks that the counters moved as the result says and that an event's
// time is now.
func (h *harness) parity(frame []byte, kind flow.KeyKind) string {
	h.tb.Helper()
	k, err := flow.ParseDecapFrame(frame, flow.LinkEthernet, kind, &h.decap) // flow.Parse without tunnels
	h.mask.Apply(&k)
	want := result{key: k, err: -1}
	if err != nil {
		want.err = errIndex(err)
		if want.err < 0 {
			h.tb.Fatalf("flow.Parse returned %v, which the program cannot count", err)
		}
	}
	before := time.Now().UnixNano()
	if err := h.run(frame); err != nil {
		return fmt.Sprintf("running the program: %v", err)
	}
	after := time.Now().UnixNano()
	evs := h.drain(nil)
	d := h.delta()

	got := result{err: -2}
	var problems []string
	switch {
	case d.Packets != 1:
		problems = append(problems, fmt.Sprintf("packets counter moved by %d", d.Packets))
	case d.Keyed == 1:
		got.err = -1
		if len(evs) != 1 {
			problems = append(problems, fmt.Sprintf("keyed, but %d events", len(evs)))
		} else {
			got.key = evs[0].key
			// The clock offset was synced at load; allow for a
			// step of the wall clock since.
			if t := evs[0].timeNs; t < before-int64(time.Second) || t > after+int64(time.Second) {
				problems = append(problems, fmt.Sprintf("event time %v, not between %v and %v", time.Unix(0, t), time.Unix(0, before), time.Unix(0, after)))
			}
		}
		if d.Emitted != 1 || d.PrefilterHits != 0 || d.RingFull != 0 || d.Errors != [bpf.NumErrs]uint64{} {
			problems = append(problems, fmt.Sprintf("counters moved by %+v", d))
		}
	default:
		got.err = -2
		for i, n := range d.Errors {
			if n == 1 && got.err == -2 {
				got.err = i
			} else if n != 0 {
				got.err = -3
			}
		}
		if got.err < 0 || d.Keyed != 0 || d.Emitted != 0 || len(evs) != 0 {
			problems = append(problems, fmt.Sprintf("counters moved by %+v, %d events", d, len(evs)))
			got = result{err: -2}
		}
	}
	if len(problems) == 0 && got == want {
		return ""
	}
	if got != want {
		problems = append([]string{fmt.Sprintf("kernel: %v, flow.Parse: %v", got, want)}, problems...)
	}
	return fmt.Sprintf("%v key (prefix %q, decap %v) of frame %x: %s", kind, h.mask, h.decap, frame, strings.Join(problems, "; "))
}

// parityAll checks frame with every kind, and counts a failure per frame;
// it stops the test after 20 failures.
type parityRun struct {
	tb       testing.TB
	hs       map[flow.KeyKind]*harness
	frames   int
	keyed    [5]int // by kind: frames flow.Parse keyed
	fails    int
	classes  [bpf.NumErrs]int // 5-tuple errors by class
	tooShort int
}

func (p *parityRun) check(frame []byte) {
	p.tb.Helper()
	if len(frame) < minRunLen || len(frame) > maxRunLen {
		p.tooShort++
		return
	}
	p.frames++
	for _, k := range kinds {
		if msg := p.hs[k].parity(frame, k); msg != "" {
			p.tb.Error(msg)
			if p.fails++; p.fails >= 20 {
				p.tb.Fatal("too many mismatches")
			}
		}
		if _, err := flow.ParseDecapFrame(frame, flow.LinkEthernet, k, &p.hs[k].decap); err == nil {
			p.keyed[k]++
		} else if k == flow.Key5Tuple {
			p.classes[errIndex(err)]++
		}
	}
}

// TestParityCaptures runs every frame of every capture in testdata/pcaps
// through the program of each key kind and flow.Parse.
func TestParityCaptures(t *testing.T) {
	hs := parityHarnesses(t)
	caps, skipped := loadCaptures(t)
	p := &parityRun{tb: t, hs: hs}
	for _, c := range caps {
		before := p.frames
		for _, f := range c.frames {
			p.check(f)
		}
		t.Logf("%s: %d frames checked", c.name, p.frames-before)
	}
	if p.frames == 0 {
		t.Fatal("no frame checked")
	}
	if p.tooShort != 0 {
		t.Errorf("%d capture frames were too short or too long to run", p.tooShort)
	}
	t.Logf("%d frames of %d captures (%d non-Ethernet frames skipped), 4 key kinds: keyed src %d dst %d pair %d 5tuple %d; 5-tuple errors by class %v",
		p.frames, len(caps), skipped, p.keyed[flow.KeySrc], p.keyed[flow.KeyDst], p.keyed[flow.KeyPair], p.keyed[flow.Key5Tuple], p.classes)
	for _, h := range hs {
		checkInvariants(t, h.o)
	}
}

// TestParityPrefix: with Config.Prefix, the program's keys are flow.Parse's
// masked by flow.Mask.Apply, for every frame of the captures and every
// crafted frame, every kind, and masks of many lengths.
func TestParityPrefix(t *testing.T) {
	caps, _ := loadCaptures(t)
	for _, set := range prefixSets {
		p := &parityRun{tb: t, hs: prefixHarnesses(t, set)}
		for _, c := range caps {
			for _, f := range c.frames {
				p.check(f)
			}
		}
		for _, c := range crafted() {
			p.check(c.frame)
		}
		if p.keyed[flow.KeySrc] == 0 || p.keyed[flow.Key5Tuple] == 0 {
			t.Fatalf("prefixes %v: no frame keyed", set)
		}
		t.Logf("prefixes %v: %d frames, keyed src %d dst %d pair %d 5tuple %d", set, p.frames,
			p.keyed[flow.KeySrc], p.keyed[flow.KeyDst], p.keyed[flow.KeyPair], p.keyed[flow.Key5Tuple])
		for _, h := range p.hs {
			checkInvariants(t, h.o)
		}
	}
}

// TestParityTruncated cuts sampled capture frames, and every crafted frame,
// at every length from 14 bytes past the end of their headers.
func TestParityTruncated(t *testing.T) {
	hs := parityHarnesses(t)
	caps, _ := loadCaptures(t)
	p := &parityRun{tb: t, hs: hs}
	const perCapture, cutTo = 30, 128
	sampled := 0
	for _, c := range caps {
		step := max(1, len(c.frames)/perCapture)
		for i := 0; i < len(c.frames); i += step {
			f := c.frames[i]
			sampled++
			for n := minRunLen; n <= min(len(f), cutTo); n++ {
				p.check(f[:n])
			}
		}
	}
	captureCuts := p.frames
	for _, c := range crafted() {
		for n := minRunLen; n <= len(c.frame); n++ {
			p.check(c.frame[:n])
		}
	}
	t.Logf("%d cuts of %d sampled capture frames, %d cuts of %d crafted frames; 5-tuple errors by class %v",
		captureCuts, sampled, p.frames-captureCuts, len(crafted()), p.classes)
	for _, h := range hs {
		checkInvariants(t, h.o)
	}
}

// craftedFrame is a hand-made frame; want5 is what flow.Parse returns for
// its 5-tuple key (checked, so that the case tests what its name says).
type craftedFrame struct {
	name  string
	frame []byte
	want5 error
}

func crafted() []craftedFrame {
	tcpP := tcp(1234, 80)
	v4tcp := func(mods ...func([]byte)) []byte { return cat(ip4(pTCP, a4, b4, 20, mods...), tcpP) }
	v6tcp := cat(ip6(pTCP, a6, b6, 20), tcpP)
	ihl := func(n byte) func([]byte) { return func(h []byte) { h[0] = h[0]&0xf0 | n } }
	ver := func(v byte) func([]byte) { return func(h []byte) { h[0] = v<<4 | h[0]&0x0f } }
	total := func(n uint16) func([]byte) { return func(h []byte) { h[2], h[3] = byte(n>>8), byte(n) } }
	fragOff := func(off uint16, more bool) func([]byte) {
		return func(h []byte) {
			v := off & 0x1fff
			if more {
				v |= 0x2000
			}
			h[6], h[7] = byte(v>>8), byte(v)
		}
	}
	vlans := func(n int, last uint16) []byte {
		b := eth(etVLAN)
		for i := range n {
			next := uint16(etVLAN)
			if i == n-1 {
				next = last
			}
			b = append(b, vlan(uint16(i+1), next)...)
		}
		return b
	}
	labels := func(n int, bottomAt int) []byte {
		var b []byte
		for i := range n {
			b = append(b, mpls(uint32(100+i), i == bottomAt)...)
		}
		return b
	}
	exts := func(n int, last uint8) []byte {
		// n extension headers (hop-by-hop first, then destination
		// options and routing headers alternately) ending with last.
		var b []byte
		for i := range n {
			next := uint8(pDst)
			if i%2 == 1 {
				next = pRoute
			}
			if i == n-1 {
				next = last
			}
			b = append(b, ext6(next, uint8(i%3))...)
		}
		return b
	}
	ipv4opts := cat(ip4(pUDP, a4, b4, 40+12, ihl(15)), make([]byte, 40), udp(53, 53, 4))

	return []craftedFrame{
		{"ipv4 tcp", cat(eth(etIPv4), v4tcp()), nil},
		{"ipv4 ihl 4", cat(eth(etIPv4), v4tcp(ihl(4))), flow.ErrBadHeader},
		{"ipv4 ihl 0", cat(eth(etIPv4), v4tcp(ihl(0))), flow.ErrBadHeader},
		{"ipv4 ihl 15 with options", cat(eth(etIPv4), ipv4opts), nil},
		{"ipv4 ihl 15 frame ends in options", cat(eth(etIPv4), ipv4opts[:50]), flow.ErrTruncated},
		{"ipv4 total < header", cat(eth(etIPv4), v4tcp(total(19))), flow.ErrBadHeader},
		{"ipv4 total = header", cat(eth(etIPv4), v4tcp(total(20))), flow.ErrTruncated},
		{"ipv4 total 0 (TSO)", cat(eth(etIPv4), v4tcp(total(0))), nil},
		{"ipv4 total cuts the tcp header", cat(eth(etIPv4), v4tcp(total(22))), flow.ErrTruncated},
		{"ipv4 total ends at the ports", cat(eth(etIPv4), v4tcp(total(24))), nil},
		{"ipv4 with padding past total", cat(eth(etIPv4), v4tcp(total(40)), make([]byte, 20)), nil},
		{"ipv4 version 6 on ethertype ipv4", cat(eth(etIPv4), v4tcp(ver(6))), flow.ErrBadHeader},
		{"ipv4 version 5", cat(eth(etIPv4), v4tcp(ver(5))), flow.ErrBadHeader},
		{"ipv6 version 4 on ethertype ipv6", cat(eth(etIPv6), v4tcp()), flow.ErrBadHeader},
		{"ipv4 non-first fragment", cat(eth(etIPv4), v4tcp(fragOff(100, false))), nil},
		{"ipv4 non-first fragment, no transport bytes", cat(eth(etIPv4), ip4(pUDP, a4, b4, 0, fragOff(7, true))), nil},
		{"ipv4 first fragment", cat(eth(etIPv4), v4tcp(fragOff(0, true))), nil},
		{"ipv4 last fragment, offset 0x1000", cat(eth(etIPv4), v4tcp(fragOff(0x1000, false))), nil},
		{"ipv4 icmp", cat(eth(etIPv4), ip4(pICMP, a4, b4, 8), make([]byte, 8)), nil},
		{"ipv4 sctp", cat(eth(etIPv4), ip4(pSCTP, a4, b4, 12), udp(9, 10, 4)), nil},
		{"ipv4 udp-lite", cat(eth(etIPv4), ip4(pUDPLit, a4, b4, 8), udp(11, 12, 0)), nil},
		{"ipv4 hop-by-hop number (not an extension after ipv4)", cat(eth(etIPv4), ip4(pHop, a4, b4, 8), make([]byte, 8)), nil},
		{"ipv4 ah tcp", cat(eth(etIPv4), ip4(pAH, a4, b4, 16+20), ah(pTCP, 2), tcpP), nil},
		{"ipv4 ah length 0", cat(eth(etIPv4), ip4(pAH, a4, b4, 8+20), ah(pTCP, 0), tcpP), flow.ErrBadHeader},
		{"ipv4 ah truncated", cat(eth(etIPv4), ip4(pAH, a4, b4, 40), ah(pTCP, 8)[:20]), flow.ErrTruncated},
		{"ipv4 9 ah", cat(eth(etIPv4), ip4(pAH, a4, b4, 9*12+20), ah(pAH, 1), ah(pAH, 1), ah(pAH, 1), ah(pAH, 1), ah(pAH, 1), ah(pAH, 1), ah(pAH, 1), ah(pAH, 1), ah(pTCP, 1), tcpP), flow.ErrTooManyHeaders},
		{"ipv4 8 ah", cat(eth(etIPv4), ip4(pAH, a4, b4, 8*12+20), ah(pAH, 1), ah(pAH, 1), ah(pAH, 1), ah(pAH, 1), ah(pAH, 1), ah(pAH, 1), ah(pAH, 1), ah(pTCP, 1), tcpP), nil},
		{"ipv4 non-first fragment of ah", cat(eth(etIPv4), ip4(pAH, a4, b4, 4, fragOff(3, false)), make([]byte, 4)), nil},
		{"ipv6 tcp", cat(eth(etIPv6), v6tcp), nil},
		{"ipv6 too short", cat(eth(etIPv6), v6tcp[:39]), flow.ErrTruncated},
		{"ipv6 payload length 0 (jumbo/GSO)", cat(eth(etIPv6), ip6(pTCP, a6, b6, 0), tcpP), nil},
		{"ipv6 payload length cuts the ports", cat(eth(etIPv6), ip6(pTCP, a6, b6, 3), tcpP), flow.ErrTruncated},
		{"ipv6 payload length cuts an extension header", cat(eth(etIPv6), ip6(pHop, a6, b6, 8), ext6(pTCP, 1), tcpP), flow.ErrTruncated},
		{"ipv6 8 extension headers", cat(eth(etIPv6), ip6(pHop, a6, b6, 0), exts(8, pTCP), tcpP), nil},
		{"ipv6 9 extension headers", cat(eth(etIPv6), ip6(pHop, a6, b6, 0), exts(9, pTCP), tcpP), flow.ErrTooManyHeaders},
		{"ipv6 8 extension headers then a non-first fragment", cat(eth(etIPv6), ip6(pHop, a6, b6, 0), exts(8, pFrag), frag6(pUDP, 10, false)), nil},
		{"ipv6 8 extension headers then a first fragment", cat(eth(etIPv6), ip6(pHop, a6, b6, 0), exts(8, pFrag), frag6(pUDP, 0, true), udp(1, 2, 0)), flow.ErrTooManyHeaders},
		{"ipv6 fragment header truncated", cat(eth(etIPv6), ip6(pFrag, a6, b6, 0), frag6(pUDP, 0, true)[:7]), flow.ErrTruncated},
		{"ipv6 first fragment udp", cat(eth(etIPv6), ip6(pFrag, a6, b6, 0), frag6(pUDP, 0, true), udp(5, 6, 8)), nil},
		{"ipv6 non-first fragment", cat(eth(etIPv6), ip6(pFrag, a6, b6, 0), frag6(pTCP, 185, true), tcpP), nil},
		{"ipv6 last fragment, offset 0x1000", cat(eth(etIPv6), ip6(pFrag, a6, b6, 0), frag6(pTCP, 0x1000, false), tcpP), nil},
		{"ipv6 2 KiB hop-by-hop", cat(eth(etIPv6), ip6(pHop, a6, b6, 0), ext6(pTCP, 255), tcpP), nil},
		{"ipv6 2 KiB hop-by-hop, truncated", cat(eth(etIPv6), ip6(pHop, a6, b6, 0), ext6(pTCP, 255)[:2000]), flow.ErrTruncated},
		{"ipv6 ah", cat(eth(etIPv6), ip6(pDst, a6, b6, 0), ext6(pAH, 0), ah(pUDP, 4), udp(7, 8, 0)), nil},
		{"ipv6 ah length 0", cat(eth(etIPv6), ip6(pAH, a6, b6, 0), ah(pUDP, 0), udp(7, 8, 0)), flow.ErrBadHeader},
		{"ipv6 icmp6", cat(eth(etIPv6), ip6(pICMP6, a6, b6, 8), make([]byte, 8)), nil},
		{"ipv6 zero addresses", cat(eth(etIPv6), ip6(pUDP, zr6, zr6, 8), udp(0, 0, 0)), nil},
		{"ethernet only, ipv4", eth(etIPv4), flow.ErrTruncated},
		{"ethernet only, ipv6", eth(etIPv6), flow.ErrTruncated},
		{"arp", cat(eth(etARP), make([]byte, 28)), flow.ErrNotIP},
		{"lldp", cat(eth(etLLDP), make([]byte, 30)), flow.ErrNotIP},
		{"pppoe discovery", cat(eth(etPPPoED), make([]byte, 30)), flow.ErrNotIP},
		{"802.3 length field", cat(eth(60), make([]byte, 46)), flow.ErrNotIP},
		{"vlan ipv4", cat(eth(etVLAN), vlan(5, etIPv4), v4tcp()), nil},
		{"qinq ipv6", cat(eth(etQinQ), vlan(5, etVLAN), vlan(6, etIPv6), v6tcp), nil},
		{"0x9100 ipv4", cat(eth(etQinQ91), vlan(5, etIPv4), v4tcp()), nil},
		{"vlan arp", cat(eth(etVLAN), vlan(5, etARP), make([]byte, 28)), flow.ErrNotIP},
		{"vlan truncated", cat(eth(etVLAN), vlan(5, etIPv4)[:3]), flow.ErrTruncated},
		{"16 vlan tags", cat(vlans(16, etIPv4), v4tcp()), nil},
		{"17 vlan tags", cat(vlans(17, etIPv4), v4tcp()), flow.ErrTooManyHeaders},
		{"mpls ipv4", cat(eth(etMPLS), labels(1, 0), v4tcp()), nil},
		{"mpls multicast ipv6", cat(eth(etMPLSMC), labels(2, 1), v6tcp), nil},
		{"mpls pseudowire control word", cat(eth(etMPLS), labels(1, 0), make([]byte, 4), eth(etIPv4), v4tcp()), flow.ErrNotIP},
		{"mpls payload version 5", cat(eth(etMPLS), labels(1, 0), v4tcp(ver(5))), flow.ErrNotIP},
		{"mpls empty payload", cat(eth(etMPLS), labels(1, 0)), flow.ErrTruncated},
		{"mpls stack truncated", cat(eth(etMPLS), labels(3, -1)), flow.ErrTruncated},
		{"16 mpls labels, the last at the bottom", cat(eth(etMPLS), labels(16, 15), v4tcp()), nil},
		{"16 mpls labels without bottom", cat(eth(etMPLS), labels(16, -1), v4tcp()), flow.ErrTooManyHeaders},
		{"vlan then 15 mpls labels", cat(eth(etVLAN), vlan(1, etMPLS), labels(15, 14), v4tcp()), nil},
		{"vlan then 16 mpls labels", cat(eth(etVLAN), vlan(1, etMPLS), labels(16, 15), v4tcp()), flow.ErrTooManyHeaders},
		{"15 vlan tags then mpls", cat(vlans(15, etMPLS), labels(1, 0), v4tcp()), nil},
		{"16 vlan tags then mpls", cat(vlans(16, etMPLS), labels(1, 0), v4tcp()), flow.ErrTooManyHeaders},
		{"pppoe ipv4", cat(eth(etPPPoE), pppoe(2+40, 0x0021), v4tcp()), nil},
		{"pppoe ipv6", cat(eth(etPPPoE), pppoe(2+60, 0x0057), v6tcp), nil},
		{"pppoe compressed protocol", cat(eth(etPPPoE), pppoe(1+40, 0x21), v4tcp()), nil},
		{"pppoe lcp", cat(eth(etPPPoE), pppoe(2+10, 0xc021), make([]byte, 10)), flow.ErrNotIP},
		{"pppoe payload length cuts the ip header", cat(eth(etPPPoE), pppoe(12, 0x0021), v4tcp()), flow.ErrTruncated},
		{"pppoe payload length cuts the ports", cat(eth(etPPPoE), pppoe(2+22, 0x0021), v4tcp()), flow.ErrTruncated},
		{"pppoe payload length ends at the ports", cat(eth(etPPPoE), pppoe(2+24, 0x0021), v4tcp()), nil},
		{"pppoe payload length 0", cat(eth(etPPPoE), pppoe(0, 0x0021), v4tcp()), flow.ErrTruncated},
		{"pppoe payload length 1", cat(eth(etPPPoE), pppoe(1, 0x0021), v4tcp()), flow.ErrTruncated},
		{"pppoe payload length 1, compressed", cat(eth(etPPPoE), pppoe(1, 0x21), v4tcp()), flow.ErrTruncated},
		{"pppoe payload length past the frame", cat(eth(etPPPoE), pppoe(1000, 0x0021), v4tcp()), nil},
		{"pppoe then ipv4 total shorter still", cat(eth(etPPPoE), pppoe(2+40, 0x0021), v4tcp(total(22))), flow.ErrTruncated},
		{"vlan pppoe ipv6", cat(eth(etVLAN), vlan(7, etPPPoE), pppoe(2+60, 0x0057), v6tcp), nil},
		{"15 vlan tags then pppoe", cat(vlans(15, etPPPoE), pppoe(2+40, 0x0021), v4tcp()), nil},
		{"16 vlan tags then pppoe", cat(vlans(16, etPPPoE), pppoe(2+40, 0x0021), v4tcp()), flow.ErrTooManyHeaders},
	}
}

// TestParityCrafted checks hand-made frames, well and badly formed.
func TestParityCrafted(t *testing.T) {
	hs := parityHarnesses(t)
	p := &parityRun{tb: t, hs: hs}
	for _, c := range crafted() {
		if _, err := flow.Parse(c.frame, flow.LinkEthernet, flow.Key5Tuple); err != c.want5 {
			t.Errorf("%s: flow.Parse: %v, the case expects %v", c.name, err, c.want5)
		}
		before := p.fails
		p.check(c.frame)
		if p.fails != before {
			t.Errorf("(case %q)", c.name)
		}
	}
	t.Logf("%d crafted frames, 4 key kinds; 5-tuple errors by class %v", p.frames, p.classes)
	if p.tooShort != 0 {
		t.Errorf("%d crafted frames too short or too long to run", p.tooShort)
	}
	for _, h := range hs {
		checkInvariants(t, h.o)
	}
}

// TestRunShortFrame records what the kernel does with frames shorter than
// an Ethernet header: BPF_PROG_TEST_RUN rejects them (EINVAL), so the
// program's own check for them (ErrTruncated, as flow.Parse) cannot be run.
func TestRunShortFrame(t *testing.T) {
	h := newHarness(t, bpf.Config{Kind: flow.KeySrc, PrefilterBytes: -1})
	err := h.run(make([]byte, minRunLen-1))
	if !errors.Is(err, syscall.EINVAL) {
		t.Errorf("running on 13 bytes: %v, want EINVAL", err)
	}
	if d := h.delta(); d.Packets != 0 {
		t.Errorf("counters moved by %+v", d)
	}
}

// FuzzParity feeds the program of each key kind and flow.Parse the same
// frames, with and without a prefix mask: they must agree. Frames shorter
// than an Ethernet header or longer than maxRunLen cannot be run and are
// ignored.
func FuzzParity(f *testing.F) {
	hs := parityHarnesses(f)
	masked := prefixHarnesses(f, prefixSets[0])
	caps, _ := loadCaptures(f)
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, c := range caps {
		for range 8 {
			f.Add(c.frames[rnd.IntN(len(c.frames))])
		}
	}
	for _, c := range crafted() {
		f.Add(c.frame)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < minRunLen || len(frame) > maxRunLen {
			return
		}
		for _, k := range kinds {
			for _, h := range []*harness{hs[k], masked[k]} {
				h.tb = t
				if msg := h.parity(frame, k); msg != "" {
					t.Fatal(msg)
				}
			}
		}
	})
}

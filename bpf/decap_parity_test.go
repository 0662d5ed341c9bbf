//go:build linux && !(mips || mips64 || ppc64 || s390x)

package bpf_test

import (
	"math/rand/v2"
	"testing"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/flow"
)

// The decapsulating program against flow.Key.DecodeDecap, on the same
// frames and the same flow.Decap: they must agree on every key and every
// error class.

// decapHarnessesOf loads one program per key kind with d, prefilter off,
// and with prefix mask m.
func decapHarnessesOf(tb testing.TB, d flow.Decap, m flow.Mask) map[flow.KeyKind]*harness {
	hs := make(map[flow.KeyKind]*harness)
	for _, k := range kinds {
		hs[k] = newHarness(tb, bpf.Config{Kind: k, Prefix: m, PrefilterBytes: -1, RingBytes: 1 << 20, Decap: d})
	}
	return hs
}

// parityDecaps are the Decaps the parity tests load: every tunnel with
// and without segments, each kind alone, and other ports.
func parityDecaps() []flow.Decap {
	ds := []flow.Decap{decapOf(flow.TunnelsAll, false), decapOf(flow.TunnelsAll, true)}
	for _, t := range []flow.Tunnels{flow.TunnelGRE, flow.TunnelERSPAN, flow.TunnelVXLAN, flow.TunnelGeneve, flow.TunnelGTPU, flow.TunnelIPIP} {
		ds = append(ds, decapOf(t, false))
	}
	d, err := flow.ParseDecap("all,vxlan=4790,geneve=6082,gtpu=2153")
	if err != nil {
		panic(err)
	}
	return append(ds, d)
}

// decapFrames are the frames the parity tests check: the tunnel cases and
// the decap captures of flow/testdata/decap (made by scripts/mkdecap.py
// with scapy); and plain, 1 in 40 frames of the plain captures (which
// TestParityCaptures checks in full without decapsulation), so that each
// run stays short enough to repeat.
func decapFrames(tb testing.TB) (tunnels, plain [][]byte) {
	for _, c := range tunnelCases() {
		tunnels = append(tunnels, c.frame)
	}
	caps, _ := loadCapturesOf(tb, "../flow/testdata/decap/*.pcap")
	for _, c := range caps {
		tunnels = append(tunnels, c.frames...)
	}
	caps, _ = loadCaptures(tb)
	for _, c := range caps {
		for i := 0; i < len(c.frames); i += 40 {
			plain = append(plain, c.frames[i])
		}
	}
	return tunnels, plain
}

// publicTunnelFrames are the Ethernet frames of testdata/tunnels: captures
// of real tunnels made by other people (ERSPAN, GRE, GTP-U, Geneve, VXLAN;
// its README says whose).
func publicTunnelFrames(tb testing.TB) (frames [][]byte) {
	caps, _ := loadCapturesOf(tb, "../testdata/tunnels/*.pcap")
	for _, c := range caps {
		frames = append(frames, c.frames...)
	}
	return frames
}

// TestParityDecap: every tunnel case, frame of the decap captures and
// frame of the real tunnel captures, for each Decap of parityDecaps and
// each key kind; and the sample of plain frames with every tunnel.
func TestParityDecap(t *testing.T) {
	tunnels, plain := decapFrames(t)
	tunnels = append(tunnels, publicTunnelFrames(t)...)
	for i, d := range parityDecaps() {
		p := &parityRun{tb: t, hs: decapHarnessesOf(t, d, flow.Mask{})}
		for _, f := range tunnels {
			p.check(f)
		}
		if i == 0 {
			for _, f := range plain {
				p.check(f)
			}
		}
		t.Logf("decap %v: %d frames, keyed src %d 5tuple %d; 5-tuple errors by class %v", d, p.frames,
			p.keyed[flow.KeySrc], p.keyed[flow.Key5Tuple], p.classes)
		if p.tooShort != 0 {
			t.Errorf("%d frames too short or too long to run", p.tooShort)
		}
		for _, h := range p.hs {
			checkInvariants(t, h.o)
		}
	}
}

// TestParityDecapTruncated: every cut of every tunnel case and decap
// capture frame, with every tunnel and segments.
func TestParityDecapTruncated(t *testing.T) {
	tunnels, _ := decapFrames(t)
	p := &parityRun{tb: t, hs: decapHarnessesOf(t, decapOf(flow.TunnelsAll, false), flow.Mask{})}
	for _, f := range tunnels {
		for n := minRunLen; n <= len(f); n++ {
			p.check(f[:n])
		}
	}
	t.Logf("%d cuts of %d tunnel frames; 5-tuple errors by class %v", p.frames, len(tunnels), p.classes)
	for _, h := range p.hs {
		checkInvariants(t, h.o)
	}
}

// TestParityDecapPrefix: decapsulated keys masked to their networks, as
// flow.Mask.Apply masks DecodeDecap's.
func TestParityDecapPrefix(t *testing.T) {
	m, err := flow.ParseMask("17,100")
	if err != nil {
		t.Fatal(err)
	}
	tunnels, _ := decapFrames(t)
	p := &parityRun{tb: t, hs: decapHarnessesOf(t, decapOf(flow.TunnelsAll, false), m)}
	for _, f := range tunnels {
		p.check(f)
	}
	for _, h := range p.hs {
		checkInvariants(t, h.o)
	}
}

// TestDecapSegments: keys from inside VXLAN and Geneve carry the VNI as
// their segment (the VNIs the cases wrote), and through a tunnel after
// it; two tenants' equal addresses are two keys; with NoSegment none.
func TestDecapSegments(t *testing.T) {
	on := decapHarnesses(t, decapOf(flow.TunnelsAll, false))
	off := decapHarnesses(t, decapOf(flow.TunnelsAll, true))
	vx := func(vni uint32, inner []byte) []byte {
		return over4(pUDP, udpOver(4789, cat(vxlan(0x08, vni), eth(etIPv4), inner)))
	}
	gn := func(vni uint32) []byte {
		return over6(pUDP, udpOver(6081, cat(geneve(0, 1, etIPv6, vni, make([]byte, 4)), inner6())))
	}
	greInVX := vx(0xfffffe, cat(ip4(pGRE, b4, a4, 4+len(inner6())), gre(0, etIPv6), inner6()))
	for _, c := range []struct {
		name  string
		frame []byte
		want  innerKey
		vni   uint32
	}{
		{"vxlan vni 1", vx(1, inner4()), want4, 1},
		{"vxlan vni 2", vx(2, inner4()), want4, 2},
		{"vxlan vni 0", vx(0, inner4()), want4, 0},
		{"vxlan vni 2^24-1", vx(0xffffff, inner4()), want4, 0xffffff},
		{"geneve vni 0x123456", gn(0x123456), want6, 0x123456},
		{"gre inside vxlan", greInVX, want6, 0xfffffe},
	} {
		for _, kind := range kinds {
			got, err := on[kind].outcome(c.frame)
			want := result{key: c.want.key(kind).WithSegment(c.vni), err: -1}
			if err != nil || got != want {
				t.Errorf("%s, %v key: %v %v, want %v", c.name, kind, got, err, want)
			}
			if vni, ok := got.key.Segment(); !ok || vni != c.vni {
				t.Errorf("%s, %v key: segment %d %v, want %d", c.name, kind, vni, ok, c.vni)
			}
			got, err = off[kind].outcome(c.frame)
			if want := (result{key: c.want.key(kind), err: -1}); err != nil || got != want {
				t.Errorf("%s, %v key, no segments: %v %v, want %v", c.name, kind, got, err, want)
			}
		}
	}
	// Two tenants, one address: two keys, both emitted past a prefilter.
	h := newHarness(t, bpf.Config{Kind: flow.KeySrc, Seed: 9, RingBytes: 1 << 16, Decap: decapOf(flow.TunnelsAll, false)})
	for range 3 {
		h.mustRun(vx(1, inner4()))
		h.mustRun(vx(2, inner4()))
	}
	evs := h.drain(nil)
	if d := h.delta(); len(evs) != 2 || d.Emitted != 2 || d.PrefilterHits != 4 {
		t.Errorf("two tenants of one address, 3 frames each: %d events, counters %+v; want 2 emitted, 4 prefilter hits", len(evs), d)
	} else if evs[0].key == evs[1].key {
		t.Errorf("both tenants gave %v", evs[0].key)
	}
}

// FuzzParityDecap is FuzzParity with every tunnel decapsulated, segments
// on, seeded with the tunnel cases, the decap captures and plain frames.
func FuzzParityDecap(f *testing.F) {
	hs := decapHarnessesOf(f, decapOf(flow.TunnelsAll, false), flow.Mask{})
	tunnels, plain := decapFrames(f)
	for _, fr := range tunnels {
		f.Add(fr)
	}
	rnd := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		f.Add(plain[rnd.IntN(len(plain))])
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < minRunLen || len(frame) > maxRunLen {
			return
		}
		for _, k := range kinds {
			hs[k].tb = t
			if msg := hs[k].parity(frame, k); msg != "" {
				t.Fatal(msg)
			}
		}
	})
}

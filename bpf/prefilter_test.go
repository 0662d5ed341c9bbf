//go:build linux && !(mips || mips64 || ppc64 || s390x)

package bpf_test

import (
	"encoding/binary"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// expect runs frame and checks the counters moved by want and that the
// events read are the keys in keys, all on CPU cpu.
func (h *harness) expect(what string, frame []byte, cpu int, want bpf.Counters, keys ...flow.Key) []event {
	h.tb.Helper()
	h.mustRun(frame)
	return h.expectMoved(what, cpu, want, keys...)
}

func (h *harness) expectMoved(what string, cpu int, want bpf.Counters, keys ...flow.Key) []event {
	h.tb.Helper()
	evs := h.drain(nil)
	if d := h.delta(); d != want {
		h.tb.Errorf("%s: counters moved by %+v, want %+v", what, d, want)
	}
	if len(evs) != len(keys) {
		h.tb.Errorf("%s: %d events, want %d", what, len(evs), len(keys))
		return evs
	}
	for i, e := range evs {
		if e.key != keys[i] || e.cpu != cpu {
			h.tb.Errorf("%s: event %d: key %v on CPU %d, want %v on CPU %d", what, i, e.key, e.cpu, keys[i], cpu)
		}
	}
	return evs
}

func key5(tb testing.TB, frame []byte) flow.Key {
	tb.Helper()
	k, err := flow.Parse(frame, flow.LinkEthernet, flow.Key5Tuple)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

var (
	emitted = bpf.Counters{Packets: 1, Keyed: 1, Emitted: 1}
	hit     = bpf.Counters{Packets: 1, Keyed: 1, PrefilterHits: 1}
	full    = bpf.Counters{Packets: 1, Keyed: 1, RingFull: 1}
)

// TestPrefilter: a key is emitted once, other keys are emitted, and a
// frame that gives no key is not looked up.
func TestPrefilter(t *testing.T) {
	h := newHarness(t, bpf.Config{Kind: flow.Key5Tuple, Seed: 42, RingBytes: 1 << 16})
	cpu := testutil.PinThread(t)
	f1 := tcp4(a4, b4, 1234, 80)
	f2 := tcp4(a4, b4, 1235, 80)
	f1ttl := cat(f1[:22], []byte{1}, f1[23:]) // another TTL: the same key
	k1, k2 := key5(t, f1), key5(t, f2)

	h.expect("first frame", f1, cpu, emitted, k1)
	h.expect("same frame", f1, cpu, hit)
	h.expect("same key", f1ttl, cpu, hit)
	h.expect("other key", f2, cpu, emitted, k2)
	h.expect("other key again", f2, cpu, hit)
	h.expect("arp", cat(eth(etARP), make([]byte, 28)), cpu, bpf.Counters{Packets: 1, Errors: [bpf.NumErrs]uint64{1: 1}})
	h.expect("first frame again", f1, cpu, hit)

	// The same key on another CPU is that CPU's first sight of it.
	if other := (cpu + 1) % len(h.o.Rings); other != cpu {
		var set unix.CPUSet
		set.Set(other)
		if err := unix.SchedSetaffinity(0, &set); err == nil { // PinThread's cleanup undoes it
			h.expect("first frame on another CPU", f1, other, emitted, k1)
			h.expect("first frame on another CPU again", f1, other, hit)
		}
	}
	checkInvariants(t, h.o)
}

// TestPrefilterPrefix: with Config.Prefix the prefilter sees networks: the
// first host of a /24 (or a /64) is emitted as its network, the other
// hosts of it are prefilter hits, and another network is emitted.
func TestPrefilterPrefix(t *testing.T) {
	m, err := flow.ParseMask("24,64")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, bpf.Config{Kind: flow.KeySrc, Prefix: m, Seed: 42, RingBytes: 1 << 16})
	cpu := testutil.PinThread(t)
	network := func(frame []byte) flow.Key {
		k, err := flow.Parse(frame, flow.LinkEthernet, flow.KeySrc)
		if err != nil {
			t.Fatal(err)
		}
		m.Apply(&k)
		return k
	}
	host := func(net byte, i int) []byte { return udp4([4]byte{198, 51, net, byte(i)}, b4, 1000, 53) }
	host6 := func(net byte, i int) []byte {
		a := [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, net, 0, 0}
		a[8], a[15] = byte(i), byte(i*7)
		return udp6(a, [16]byte{0xff, 0x02, 15: 1}, 1000, 53)
	}
	h.expect("first host of 198.51.100.0/24", host(100, 1), cpu, emitted, network(host(100, 1)))
	for i := 2; i < 256; i++ {
		h.expect("another host of the /24", host(100, i), cpu, hit)
	}
	h.expect("first host of 198.51.101.0/24", host(101, 1), cpu, emitted, network(host(101, 1)))
	h.expect("first host of 2001:db8:0:1::/64", host6(1, 1), cpu, emitted, network(host6(1, 1)))
	for i := 2; i < 100; i++ {
		h.expect("another host of the /64", host6(1, i), cpu, hit)
	}
	h.expect("first host of 2001:db8:0:2::/64", host6(2, 1), cpu, emitted, network(host6(2, 1)))
	if k := network(host(100, 1)); k.String() != "198.51.100.0/24" {
		t.Errorf("network key %v", k)
	}
	checkInvariants(t, h.o)
}

// TestPrefilterWindow: the prefilter forgets its keys at window boundaries
// of the program's clock (CLOCK_BOOTTIME plus the offset user space sets,
// never back across a boundary), and events carry that clock's time.
func TestPrefilterWindow(t *testing.T) {
	const window = time.Minute
	h := newHarness(t, bpf.Config{Kind: flow.KeySrc, Window: window, RingBytes: 1 << 16})
	cpu := testutil.PinThread(t)
	trueOff, err := bpf.ClockOffset()
	if err != nil {
		t.Fatal(err)
	}
	f := udp4(a4, b4, 1, 2)
	k, err := flow.Parse(f, flow.LinkEthernet, flow.KeySrc)
	if err != nil {
		t.Fatal(err)
	}
	// at moves the program's clock so that it now reads t (approximately).
	at := func(ts int64) {
		t.Helper()
		if err := h.o.SetClockOffset(trueOff + ts - time.Now().UnixNano()); err != nil {
			t.Fatal(err)
		}
	}
	checkTime := func(evs []event, want int64) {
		t.Helper()
		if len(evs) == 1 {
			if d := evs[0].timeNs - want; d < -int64(time.Second) || d > int64(time.Second) {
				t.Errorf("event time %v, want %v", time.Unix(0, evs[0].timeNs).UTC(), time.Unix(0, want).UTC())
			}
		}
	}
	w := int64(window)
	start := (time.Now().UnixNano()/w + 100) * w // a window boundary in the future

	t0 := start - w/2
	at(t0)
	checkTime(h.expect("window 0", f, cpu, emitted, k), t0)
	h.expect("window 0 again", f, cpu, hit)
	at(start - int64(100*time.Millisecond))
	h.expect("end of window 0", f, cpu, hit)
	t1 := start + int64(100*time.Millisecond)
	at(t1)
	checkTime(h.expect("window 1", f, cpu, emitted, k), t1)
	h.expect("window 1 again", f, cpu, hit)
	t2 := start + 5*w + w/2
	at(t2)
	checkTime(h.expect("window 6", f, cpu, emitted, k), t2)
	// The CPU's clock does not go back across a window boundary: with
	// the clock set back to window 1, frames stay in window 6, stamped
	// with its start, and its prefilter rows still hold the key.
	f2 := udp4(b4, a4, 1, 2)
	k2, err := flow.Parse(f2, flow.LinkEthernet, flow.KeySrc)
	if err != nil {
		t.Fatal(err)
	}
	at(t1)
	h.expect("back to window 1", f, cpu, hit)
	if evs := h.expect("back to window 1, other key", f2, cpu, emitted, k2); len(evs) == 1 && evs[0].timeNs != start+5*w {
		t.Errorf("event time %v set back, want the start of window 6 %v", time.Unix(0, evs[0].timeNs).UTC(), time.Unix(0, start+5*w).UTC())
	}

	// SyncClock sets the true offset back: 100 windows back, so the same.
	if err := h.o.SyncClock(); err != nil {
		t.Fatal(err)
	}
	h.expect("synced", f, cpu, hit)
	checkInvariants(t, h.o)
}

// TestPrefilterOneWindow: without a window the clock does not matter.
func TestPrefilterOneWindow(t *testing.T) {
	h := newHarness(t, bpf.Config{Kind: flow.KeyPair, RingBytes: 1 << 16})
	cpu := testutil.PinThread(t)
	f := udp6(a6, b6, 1, 2)
	k, err := flow.Parse(f, flow.LinkEthernet, flow.KeyPair)
	if err != nil {
		t.Fatal(err)
	}
	h.expect("first", f, cpu, emitted, k)
	if err := h.o.SetClockOffset(int64(1000 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	h.expect("1000 hours later", f, cpu, hit)
}

// TestRingFull: a key the ring has no room for is counted and not
// remembered, so that the flow's next packet tries again.
func TestRingFull(t *testing.T) {
	page := os.Getpagesize()
	h := newHarness(t, bpf.Config{Kind: flow.Key5Tuple, RingBytes: page})
	cpu := testutil.PinThread(t)

	var sent []flow.Key
	var lost []byte
	for port := range 10000 {
		f := tcp4(a4, b4, uint16(port), 80)
		h.mustRun(f)
		d := h.delta()
		if d.RingFull == 1 {
			lost = f
			break
		}
		if d != emitted {
			t.Fatalf("key %d: counters moved by %+v", port, d)
		}
		sent = append(sent, key5(t, f))
	}
	if lost == nil {
		t.Fatal("the ring never filled")
	}
	// Each record takes an 8-byte header and EventSize bytes, and the
	// kernel keeps the ring from filling to its last byte (a reservation
	// must leave the producer less than the size ahead of the consumer).
	if n, want := len(sent), (page-1)/(8+bpf.EventSize); n != want {
		t.Errorf("%d records fit in a %d-byte ring, want %d", n, page, want)
	}
	// (Not h.expect, which would drain the ring.)
	h.mustRun(lost)
	if d := h.delta(); d != full {
		t.Errorf("lost key again, ring still full: counters moved by %+v, want %+v", d, full)
	}
	h.mustRun(tcp4(a4, b4, 0, 80))
	if d := h.delta(); d != hit {
		t.Errorf("an emitted key: counters moved by %+v, want %+v", d, hit)
	}
	evs := h.drain(nil)
	if len(evs) != len(sent) {
		t.Fatalf("read %d events, want %d", len(evs), len(sent))
	}
	for i, e := range evs {
		if e.key != sent[i] || e.cpu != cpu {
			t.Fatalf("event %d: %v on CPU %d, want %v on CPU %d", i, e.key, e.cpu, sent[i], cpu)
		}
	}
	h.expect("lost key after draining", lost, cpu, emitted, key5(t, lost))
	h.expect("lost key once more", lost, cpu, hit)
	checkInvariants(t, h.o)
}

// TestPrefilterFalseHits checks that the prefilter reports a key it never
// saw as seen (a false hit, which loses the key) essentially never.
//
// A probe is a false hit when its 32-bit fingerprint equals one of the at
// most FD_ROW_BUCKETS = 7 fingerprints of its row. With a hash that behaves
// as random, that happens with probability at most 7 * 2^-32 per probe, so
// the expected number of false hits among the ~100,000 probes below is
// about 1.6e-4: the test fails spuriously less than once in 6000 runs. A
// hash that ignored some key bytes, or a fingerprint that did not depend
// on all of them, would fail it at once: each base key is followed by
// probes that differ from it in one byte only (every byte of both
// addresses and ports, the protocol, the address family), while the base
// key is still in the row, which a prefilter of 16 rows keeps full.
func TestPrefilterFalseHits(t *testing.T) {
	const rows, bases = 16, 2500
	h := newHarness(t, bpf.Config{Kind: flow.Key5Tuple, Seed: 0x5eed, PrefilterBytes: rows * bpf.RowBytes, RingBytes: 8 << 20})
	cpu := testutil.PinThread(t)

	seen := make(map[flow.Key]bool)
	var sent []flow.Key
	try := func(f []byte) {
		k := key5(t, f)
		if seen[k] {
			return
		}
		seen[k] = true
		sent = append(sent, k)
		h.mustRun(f)
	}
	frame := func(src, dst [16]byte, proto uint8, sport, dport uint16) []byte {
		return cat(eth(etIPv6), ip6(proto, src, dst, 8), udp(sport, dport, 0))
	}
	for i := range bases {
		src, dst := a6, b6
		binary.BigEndian.PutUint32(src[12:], uint32(i))
		sport, dport := uint16(1000+i), uint16(53)
		try(frame(src, dst, pUDP, sport, dport))
		for j := range 16 {
			s := src
			s[j] ^= 0x80
			try(frame(s, dst, pUDP, sport, dport))
			d := dst
			d[j] ^= 0x80
			try(frame(src, d, pUDP, sport, dport))
		}
		for _, bit := range []uint16{0x8000, 0x0080} {
			try(frame(src, dst, pUDP, sport^bit, dport))
			try(frame(src, dst, pUDP, sport, dport^bit))
		}
		for _, p := range []uint8{pTCP, pSCTP, pUDPLit} {
			try(frame(src, dst, p, sport, dport))
		}
		// The IPv4 key with the same first address bytes: only the
		// flags byte differs.
		var s4, d4 [4]byte
		copy(s4[:], src[:4])
		copy(d4[:], dst[:4])
		try(cat(eth(etIPv4), ip4(pUDP, s4, d4, 8), udp(sport, dport, 0)))
	}
	d := h.delta()
	if d.PrefilterHits != 0 || d.Emitted != uint64(len(sent)) || d.RingFull != 0 {
		t.Errorf("%d distinct keys: counters moved by %+v, want %d emitted and no prefilter hit", len(sent), d, len(sent))
	}
	if evs := h.drain(nil); len(evs) != len(sent) {
		t.Errorf("%d events, want %d", len(evs), len(sent))
	}
	t.Logf("%d distinct keys through a prefilter of %d rows: %d false hits", len(sent), rows, d.PrefilterHits)
	// The prefilter does work: the last key is in its row.
	last := sent[len(sent)-1]
	f := cat(eth(etIPv4), ip4(pUDP, [4]byte(last.Src().AsSlice()), [4]byte(last.Dst().AsSlice()), 8), udp(last.SrcPort(), last.DstPort(), 0))
	h.expect("last key again", f, cpu, hit)
	checkInvariants(t, h.o)
}

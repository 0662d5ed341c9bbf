package flow

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
)

// checkBinaryRoundTrip checks that the binary form of a valid key decodes to
// the key itself; FuzzParse and the frame tests run it on every key Parse
// returns.
func checkBinaryRoundTrip(t *testing.T, k Key) {
	t.Helper()
	b, err := k.MarshalBinary()
	if err != nil || len(b) != KeySize {
		t.Fatalf("MarshalBinary(%v) = %x, %v", k, b, err)
	}
	var got Key
	if err := got.UnmarshalBinary(b); err != nil || got != k {
		t.Fatalf("UnmarshalBinary(MarshalBinary(%v)) = %v, %v", k, got, err)
	}
}

func TestKeyBinaryLayout(t *testing.T) {
	// The layout is a contract with the XDP program (bpf/flowdedup.h):
	// check each offset by hand rather than against AppendBinary itself.
	k := MakeKey(Key5Tuple, netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("192.0.2.9"), protoUDP, 53, 5353)
	b, _ := k.MarshalBinary()
	want := make([]byte, KeySize)
	copy(want[0:], []byte{10, 1, 2, 3})
	copy(want[16:], []byte{192, 0, 2, 9})
	binary.BigEndian.PutUint16(want[32:], 53)
	binary.BigEndian.PutUint16(want[34:], 5353)
	want[36], want[37], want[38] = protoUDP, byte(Key5Tuple), flagPorts
	if !bytes.Equal(b, want) {
		t.Fatalf("binary form\n got %x\nwant %x", b, want)
	}

	k6 := MakeKey(KeyDst, netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), 0, 0, 0)
	b, _ = k6.AppendBinary([]byte("prefix"))
	a := netip.MustParseAddr("2001:db8::2").As16()
	want = make([]byte, KeySize)
	copy(want[16:], a[:])
	want[37], want[38] = byte(KeyDst), flagV6
	if !bytes.Equal(b[:6], []byte("prefix")) || !bytes.Equal(b[6:], want) {
		t.Fatalf("AppendBinary\n got %x\nwant prefix%x", b, want)
	}
}

func TestKeyBinaryRoundTrip(t *testing.T) {
	for _, k := range testKeys(50) {
		checkBinaryRoundTrip(t, k)
	}
	// A non-first TCP fragment: a 5-tuple of a port protocol without
	// ports, which MakeKey cannot make but Parse does.
	frag := MakeKey(Key5Tuple, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), protoTCP, 1, 2)
	frag.flags &^= flagPorts
	frag.sport, frag.dport = 0, 0
	checkBinaryRoundTrip(t, frag)
}

func TestKeyUnmarshalBinaryRejects(t *testing.T) {
	good, _ := MakeKey(Key5Tuple, netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.3.2.1"), protoTCP, 80, 8080).MarshalBinary()
	src, _ := MakeKey(KeySrc, netip.MustParseAddr("10.1.2.3"), netip.Addr{}, 0, 0, 0).MarshalBinary()
	icmp, _ := MakeKey(Key5Tuple, netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.3.2.1"), protoICMP, 0, 0).MarshalBinary()
	edit := func(b []byte, f func(b []byte)) []byte {
		b = bytes.Clone(b)
		f(b)
		return b
	}
	cases := map[string][]byte{
		"empty":               nil,
		"short":               good[:KeySize-1],
		"long":                append(bytes.Clone(good), 0),
		"zero key":            make([]byte, KeySize),
		"kind 5":              edit(good, func(b []byte) { b[37] = 5 }),
		"unknown flag":        edit(good, func(b []byte) { b[38] |= 4 }),
		"last byte":           edit(good, func(b []byte) { b[39] = 1 }),
		"ipv4 padding":        edit(good, func(b []byte) { b[10] = 1 }),
		"src key with dst":    edit(src, func(b []byte) { b[16] = 1 }),
		"src key with proto":  edit(src, func(b []byte) { b[36] = protoTCP }),
		"src key with ports":  edit(src, func(b []byte) { b[38] |= flagPorts }),
		"dst key with src":    edit(src, func(b []byte) { b[37] = byte(KeyDst); copy(b[16:], b[:4]) }),
		"ports without flag":  edit(good, func(b []byte) { b[38] &^= flagPorts }),
		"ports flag for icmp": edit(icmp, func(b []byte) { b[38] |= flagPorts }),
		"icmp with ports":     edit(icmp, func(b []byte) { b[33] = 1 }),
	}
	for name, b := range cases {
		k := MakeKey(KeySrc, netip.MustParseAddr("192.0.2.1"), netip.Addr{}, 0, 0, 0)
		before := k
		if err := k.UnmarshalBinary(b); err != ErrBadKey {
			t.Errorf("%s: UnmarshalBinary(%x) = %v, want ErrBadKey", name, b, err)
		}
		if k != before {
			t.Errorf("%s: UnmarshalBinary changed the key on error", name)
		}
	}
	var k Key
	if n := testing.AllocsPerRun(100, func() { _ = k.UnmarshalBinary(good) }); n != 0 {
		t.Errorf("UnmarshalBinary allocates %v times", n)
	}
}

// TestKeyBinarySegment: the segment's bytes 40-43 and flag bit 3, by hand,
// and the 40-byte form written before segments still reads as the key
// without one.
func TestKeyBinarySegment(t *testing.T) {
	k := MakeKey(KeySrc, netip.MustParseAddr("10.1.2.3"), netip.Addr{}, 0, 0, 0)
	plain, _ := k.MarshalBinary()
	want := make([]byte, KeySize)
	copy(want[0:], []byte{10, 1, 2, 3})
	want[37] = byte(KeySrc)
	if !bytes.Equal(plain, want) {
		t.Fatalf("no segment\n got %x\nwant %x", plain, want)
	}
	seg, _ := k.WithSegment(0x123456).MarshalBinary()
	want[38] = 0x08
	copy(want[40:], []byte{0, 0x12, 0x34, 0x56})
	if !bytes.Equal(seg, want) {
		t.Fatalf("segment 0x123456\n got %x\nwant %x", seg, want)
	}
	checkBinaryRoundTrip(t, k.WithSegment(0x123456))
	checkBinaryRoundTrip(t, k.WithSegment(0))
	checkBinaryRoundTrip(t, k.WithSegment(MaxSegment))
	var old Key
	if err := old.UnmarshalBinary(plain[:KeySizeNoSegment]); err != nil || old != k {
		t.Fatalf("40-byte form: %v, %v; want %v", old, err, k)
	}
	edit := func(b []byte, f func(b []byte)) []byte {
		b = bytes.Clone(b)
		f(b)
		return b
	}
	for name, b := range map[string][]byte{
		"vni without flag":      edit(plain, func(b []byte) { b[43] = 1 }),
		"vni over 24 bits":      edit(seg, func(b []byte) { b[40] = 1 }),
		"40 bytes with flag":    seg[:KeySizeNoSegment],
		"41 bytes":              seg[:41],
		"unknown flag 0x10":     edit(plain, func(b []byte) { b[38] |= 0x10 }),
		"40 bytes unknown flag": edit(plain[:KeySizeNoSegment], func(b []byte) { b[38] |= 0x10 }),
	} {
		var got Key
		if err := got.UnmarshalBinary(b); err != ErrBadKey {
			t.Errorf("%s: UnmarshalBinary(%x) = %v, %v; want ErrBadKey", name, b, got, err)
		}
	}
}

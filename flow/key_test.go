package flow

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

func TestParseKeyKind(t *testing.T) {
	for _, kind := range []KeyKind{KeySrc, KeyDst, KeyPair, Key5Tuple} {
		got, err := ParseKeyKind(kind.String())
		if err != nil || got != kind {
			t.Errorf("ParseKeyKind(%q) = %v, %v", kind.String(), got, err)
		}
	}
	for _, s := range []string{"", "SRC", "5-tuple", "src ", "pair,dst"} {
		_, err := ParseKeyKind(s)
		if !errors.Is(err, ErrBadKind) {
			t.Errorf("ParseKeyKind(%q) error = %v, want ErrBadKind", s, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "src, dst, pair, 5tuple") || !strings.Contains(msg, fmt.Sprintf("%q", s)) {
			t.Errorf("ParseKeyKind(%q) error %q does not name the input and the valid kinds", s, msg)
		}
	}
	if s := KeyKind(0).String(); s != "KeyKind(0)" {
		t.Errorf("KeyKind(0).String() = %q", s)
	}
	if _, err := KeyKind(9).MarshalText(); !errors.Is(err, ErrBadKind) {
		t.Errorf("KeyKind(9).MarshalText() error = %v", err)
	}
}

func TestKeyKindFlag(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	kind := KeySrc
	fs.TextVar(&kind, "key", KeySrc, "key kind")
	if err := fs.Parse([]string{"--key", "5tuple"}); err != nil || kind != Key5Tuple {
		t.Fatalf("--key 5tuple: kind %v, err %v", kind, err)
	}
	if err := fs.Parse([]string{"--key", "ports"}); err == nil {
		t.Fatal("--key ports: no error")
	}
}

func TestKeyZero(t *testing.T) {
	var k Key
	if k.IsValid() || k.Kind() != 0 || k.Src().IsValid() || k.Dst().IsValid() || k.HasPorts() || k.Is6() {
		t.Errorf("zero Key looks valid: %#v", k)
	}
	if s := k.String(); s != "invalid Key" {
		t.Errorf("zero Key String() = %q", s)
	}
	if size := unsafe.Sizeof(k); size != 44 {
		t.Errorf("Key is %d bytes, want 44", size)
	}
}

func TestMakeKey(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	a6, b6 := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")

	// Fields outside the kind are dropped, so packets of a flow give == keys.
	if MakeKey(KeySrc, a, b, protoTCP, 1, 2) != MakeKey(KeySrc, a, netip.Addr{}, 0, 0, 0) {
		t.Error("a src key depends on fields it does not hold")
	}
	if MakeKey(KeyDst, a6, b6, protoUDP, 1, 2) != MakeKey(KeyDst, b, b6, protoTCP, 3, 4) {
		t.Error("a dst key depends on fields it does not hold")
	}
	if MakeKey(KeyPair, a, b, protoTCP, 1, 2) != MakeKey(KeyPair, a, b, protoUDP, 3, 4) {
		t.Error("a pair key depends on fields it does not hold")
	}
	if MakeKey(KeySrc, a, b, 0, 0, 0) == MakeKey(KeyDst, a, a, 0, 0, 0) {
		t.Error("src and dst keys of the same address are equal")
	}
	if k := MakeKey(Key5Tuple, a, b, protoICMP, 1, 2); k.HasPorts() || k.SrcPort() != 0 || k.DstPort() != 0 {
		t.Errorf("ICMP key has ports: %v", k)
	}

	k := MakeKey(Key5Tuple, a6, b6, protoTCP, 40000, 443)
	if k.Kind() != Key5Tuple || k.Src() != a6 || k.Dst() != b6 || k.Proto() != protoTCP ||
		k.SrcPort() != 40000 || k.DstPort() != 443 || !k.HasPorts() || !k.Is6() {
		t.Errorf("accessors of %v disagree with MakeKey", k)
	}
	if s := MakeKey(KeySrc, a, b, 0, 0, 0); s.Dst().IsValid() || s.Src() != a || s.Is6() || s.Proto() != 0 {
		t.Errorf("src key %v: Src %v, Dst %v", s, s.Src(), s.Dst())
	}
	if d := MakeKey(KeyDst, a, b, 0, 0, 0); d.Src().IsValid() || d.Dst() != b {
		t.Errorf("dst key %v: Src %v, Dst %v", d, d.Src(), d.Dst())
	}
	// An IPv4-mapped address stays IPv6; zones are dropped.
	mapped := netip.MustParseAddr("::ffff:10.0.0.1")
	if m := MakeKey(KeySrc, mapped, netip.Addr{}, 0, 0, 0); m == MakeKey(KeySrc, a, netip.Addr{}, 0, 0, 0) || m.Src() != mapped {
		t.Errorf("IPv4-mapped key %v equals the IPv4 one", m)
	}
	if z := MakeKey(KeySrc, netip.MustParseAddr("fe80::1%eth0"), netip.Addr{}, 0, 0, 0); z.Src() != netip.MustParseAddr("fe80::1") {
		t.Errorf("zone kept: %v", z.Src())
	}

	for _, bad := range []Key{
		MakeKey(0, a, b, 0, 0, 0),
		MakeKey(Key5Tuple+1, a, b, 0, 0, 0),
		MakeKey(KeySrc, netip.Addr{}, b, 0, 0, 0),
		MakeKey(KeyDst, a, netip.Addr{}, 0, 0, 0),
		MakeKey(KeyPair, a, b6, 0, 0, 0),
		MakeKey(Key5Tuple, a6, b, protoTCP, 1, 2),
		MakeKey(Key5Tuple, a6, netip.Addr{}, protoTCP, 1, 2),
	} {
		if bad != (Key{}) {
			t.Errorf("invalid input gave key %v", bad)
		}
	}
}

func TestKeyString(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	a6, b6 := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	max6 := netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
	for _, c := range []struct {
		k    Key
		want string
	}{
		{MakeKey(KeySrc, a, b, 0, 0, 0), "10.0.0.1"},
		{MakeKey(KeyDst, a, b, 0, 0, 0), "10.0.0.2"},
		{MakeKey(KeySrc, a6, b6, 0, 0, 0), "2001:db8::1"},
		{MakeKey(KeyPair, a, b, 0, 0, 0), "10.0.0.1 > 10.0.0.2"},
		{MakeKey(KeyPair, a6, b6, 0, 0, 0), "2001:db8::1 > 2001:db8::2"},
		{MakeKey(Key5Tuple, a, b, protoTCP, 1234, 80), "tcp 10.0.0.1:1234 > 10.0.0.2:80"},
		{MakeKey(Key5Tuple, a6, b6, protoUDP, 53, 5353), "udp [2001:db8::1]:53 > [2001:db8::2]:5353"},
		{MakeKey(Key5Tuple, a, b, protoSCTP, 1, 2), "sctp 10.0.0.1:1 > 10.0.0.2:2"},
		{MakeKey(Key5Tuple, a, b, protoUDPLite, 1, 2), "udplite 10.0.0.1:1 > 10.0.0.2:2"},
		{MakeKey(Key5Tuple, a, b, protoICMP, 1, 2), "icmp 10.0.0.1 > 10.0.0.2"},
		{MakeKey(Key5Tuple, a6, b6, protoICMPv6, 0, 0), "icmp6 2001:db8::1 > 2001:db8::2"},
		{MakeKey(Key5Tuple, a, b, 47, 0, 0), "gre 10.0.0.1 > 10.0.0.2"},
		{MakeKey(Key5Tuple, a, b, 200, 0, 0), "200 10.0.0.1 > 10.0.0.2"}, // unassigned
		{noPorts(MakeKey(Key5Tuple, a, b, protoTCP, 1, 2)), "tcp 10.0.0.1 > 10.0.0.2"},
		{MakeKey(Key5Tuple, max6, max6, protoSCTP, 65535, 65535), "sctp [ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535 > [ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"},
	} {
		if got := c.k.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
		if got, _ := c.k.AppendText([]byte("x")); string(got) != "x"+c.want {
			t.Errorf("AppendText = %q, want %q", got, "x"+c.want)
		}
	}
}

func TestKeyAppendTextNoAllocs(t *testing.T) {
	k := MakeKey(Key5Tuple, netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), protoTCP, 1, 2)
	buf := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(100, func() { buf, _ = k.AppendText(buf[:0]) }); n != 0 {
		t.Errorf("AppendText allocates %v times", n)
	}
}

// TestKeyComparable checks that keys of one flow collapse in a map.
func TestKeyComparable(t *testing.T) {
	seen := map[Key]int{}
	for _, f := range [][]byte{
		tcp4IP,
		v4.packet(tcp(40000, 443)),
		ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoTCP, options: make([]byte, 4)}.packet(tcp(40000, 443)),
		ip4{src: "192.0.2.1", dst: "198.51.100.2", proto: protoTCP, moreFrags: true}.packet(tcp(40000, 443)),
	} {
		k, err := Parse(f, LinkRaw, Key5Tuple)
		if err != nil {
			t.Fatal(err)
		}
		seen[k]++
	}
	if len(seen) != 1 {
		t.Errorf("one flow gave %d keys: %v", len(seen), seen)
	}
}

func TestReason(t *testing.T) {
	want := map[error]string{
		nil:                                  "ok",
		ErrTruncated:                         "truncated",
		ErrNotIP:                             "not_ip",
		ErrBadHeader:                         "bad_header",
		ErrUnsupportedLink:                   "unsupported_link",
		ErrTooManyHeaders:                    "too_many_headers",
		ErrBadKind:                           "bad_kind",
		fmt.Errorf("read: %w", ErrTruncated): "truncated",
		errors.New("flow: not an IP packet"): "other",
		fmt.Errorf("a: %w", errors.New("b")): "other",
		fmt.Errorf("x: %w", fmt.Errorf("%w", ErrNotIP)): "not_ip",
	}
	for err, label := range want {
		if got := Reason(err); got != label {
			t.Errorf("Reason(%v) = %q, want %q", err, got, label)
		}
	}
	labels := Reasons()
	for _, r := range reasons {
		if !slices.Contains(labels, Reason(r.err)) {
			t.Errorf("Reasons() lacks %q", Reason(r.err))
		}
	}
	if !slices.Contains(labels, "other") || slices.Contains(labels, "ok") {
		t.Errorf("Reasons() = %v", labels)
	}
	slices.Sort(labels)
	if len(slices.Compact(labels)) != len(reasons)+1 {
		t.Errorf("Reasons() has duplicates: %v", labels)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Reason(ErrTooManyHeaders) }); n != 0 {
		t.Errorf("Reason allocates %v times", n)
	}
	for err, malformed := range map[error]bool{
		ErrTruncated: true, ErrBadHeader: true, ErrTooManyHeaders: true,
		ErrNotIP: false, ErrUnsupportedLink: false, ErrBadKind: false, nil: false,
	} {
		if IsMalformed(err) != malformed {
			t.Errorf("IsMalformed(%v) = %v", err, !malformed)
		}
	}
}

func TestKeySegment(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	a6, b6 := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	plain := MakeKey(Key5Tuple, a6, b6, protoTCP, 1234, 80)
	if _, ok := plain.Segment(); ok {
		t.Error("MakeKey's key has a segment")
	}
	s100, s200 := plain.WithSegment(100), plain.WithSegment(200)
	if s100 == s200 || s100 == plain || plain.WithSegment(0) == plain {
		t.Error("keys in different segments, or with and without one, are equal")
	}
	if s100 != plain.WithSegment(100) {
		t.Error("keys of one segment differ")
	}
	if vni, ok := s100.Segment(); !ok || vni != 100 {
		t.Errorf("Segment() = %d, %v", vni, ok)
	}
	if s100.Hash(1) == s200.Hash(1) || s100.Hash(1) == plain.Hash(1) {
		t.Error("keys in different segments hash alike")
	}
	if (Key{}).WithSegment(1) != (Key{}) || plain.WithSegment(MaxSegment+1) != (Key{}) {
		t.Error("WithSegment of the zero Key or of a VNI over 24 bits is not the zero Key")
	}
	for k, want := range map[Key]string{
		MakeKey(KeySrc, a, b, 0, 0, 0).WithSegment(100):             "vni 100 10.0.0.1",
		MakeKey(KeyPair, a, b, 0, 0, 0).WithSegment(0):              "vni 0 10.0.0.1 > 10.0.0.2",
		MakeKey(Key5Tuple, a, b, protoTCP, 1234, 80).WithSegment(7): "vni 7 tcp 10.0.0.1:1234 > 10.0.0.2:80",
		s100: "vni 100 tcp [2001:db8::1]:1234 > [2001:db8::2]:80",
		MakeKey(Key5Tuple, a6, b6, protoSCTP, 65535, 65535).WithSegment(MaxSegment): "vni 16777215 sctp [2001:db8::1]:65535 > [2001:db8::2]:65535",
	} {
		if got := k.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
	// A segment survives masking, and masking keeps keys of two segments apart.
	m := mustMask(24, 64)
	x, y := MakeKey(KeySrc, a, b, 0, 0, 0).WithSegment(5), MakeKey(KeySrc, a, b, 0, 0, 0).WithSegment(6)
	m.Apply(&x)
	m.Apply(&y)
	if x == y || x.String() != "vni 5 10.0.0.0/24" {
		t.Errorf("masked segment keys: %v, %v", x, y)
	}
}

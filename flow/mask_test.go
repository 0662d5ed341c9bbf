package flow

import (
	"bytes"
	"errors"
	"flag"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// networkKeys returns each of keys masked by a few masks: the common /24
// and /64, the whole address (/32, /128, still a network key), the
// empty prefix, and lengths inside a byte.
func networkKeys(keys []Key) []Key {
	var out []Key
	for _, m := range []Mask{mustMask(24, 64), mustMask(32, 128), mustMask(0, 0), mustMask(17, 100)} {
		for _, k := range keys {
			m.Apply(&k)
			out = append(out, k)
		}
	}
	return out
}

func mustMask(v4, v6 int) Mask {
	m, err := MakeMask(v4, v6)
	if err != nil {
		panic(err)
	}
	return m
}

func TestParseMask(t *testing.T) {
	for _, c := range []struct {
		in     string
		v4, v6 int
		text   string
	}{
		{"24,64", 24, 64, "24,64"},
		{"24", 24, 128, "24,128"}, // IPv6 addresses kept whole
		{"0,0", 0, 0, "0,0"},
		{"32,128", 32, 128, "32,128"},
		{"016,048", 16, 48, "16,48"},
		{"", -1, -1, ""},
	} {
		m, err := ParseMask(c.in)
		if err != nil {
			t.Errorf("ParseMask(%q): %v", c.in, err)
			continue
		}
		if m.Bits(false) != c.v4 || m.Bits(true) != c.v6 || m.String() != c.text || m.IsZero() != (c.in == "") {
			t.Errorf("ParseMask(%q) = %d,%d %q (zero %v)", c.in, m.Bits(false), m.Bits(true), m.String(), m.IsZero())
		}
		var back Mask
		if err := back.UnmarshalText([]byte(m.String())); err != nil || back != m {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", m.String(), back, err, m)
		}
	}
	for _, s := range []string{"33", "24,129", "-1", "+24", "24,", ",64", "24,64,1", " 24", "24 ", "0x18", "1000", "24/64", "a", "24,6a", "4294967320"} {
		if m, err := ParseMask(s); !errors.Is(err, ErrBadMask) {
			t.Errorf("ParseMask(%q) = %v, %v; want ErrBadMask", s, m, err)
		} else if !strings.Contains(err.Error(), s) {
			t.Errorf("ParseMask(%q): error %q does not name the input", s, err)
		}
	}
	for _, c := range [][2]int{{-1, 64}, {33, 64}, {24, -1}, {24, 129}} {
		if _, err := MakeMask(c[0], c[1]); !errors.Is(err, ErrBadMask) {
			t.Errorf("MakeMask(%d, %d) error = %v, want ErrBadMask", c[0], c[1], err)
		}
	}
}

func TestMaskFlag(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	var m Mask
	fs.TextVar(&m, "prefix", Mask{}, "prefix lengths")
	if err := fs.Parse([]string{"--prefix", "24,64"}); err != nil || m != mustMask(24, 64) {
		t.Fatalf("--prefix 24,64: %v, %v", m, err)
	}
	if err := fs.Parse([]string{"--prefix", "33"}); err == nil {
		t.Fatal("--prefix 33: no error")
	}
}

// TestMaskApply checks Apply against net/netip's Prefix.Masked for every
// prefix length, kind and family.
func TestMaskApply(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		var a16, b16 [16]byte
		for i := range a16 {
			a16[i], b16[i] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		for _, v6 := range []bool{false, true} {
			a, b := netip.AddrFrom16(a16), netip.AddrFrom16(b16)
			if !v6 {
				a, b = netip.AddrFrom4([4]byte(a16[:4])), netip.AddrFrom4([4]byte(b16[:4]))
			}
			for bits := 0; bits <= a.BitLen(); bits++ {
				m := mustMask(min(bits, 32), bits)
				wantSrc, wantDst := netip.PrefixFrom(a, bits).Masked(), netip.PrefixFrom(b, bits).Masked()
				for kind := KeySrc; kind <= Key5Tuple; kind++ {
					k := MakeKey(kind, a, b, protoTCP, 1234, 80)
					host := k
					m.Apply(&k)
					if k.Bits() != bits || k.Kind() != kind || k.Is6() != v6 {
						t.Fatalf("%v masked to /%d: %v, bits %d", host, bits, k, k.Bits())
					}
					if kind != KeyDst && (k.SrcPrefix() != wantSrc || k.Src() != wantSrc.Addr()) {
						t.Fatalf("%v masked to /%d: source %v, want %v", host, bits, k.SrcPrefix(), wantSrc)
					}
					if kind != KeySrc && (k.DstPrefix() != wantDst || k.Dst() != wantDst.Addr()) {
						t.Fatalf("%v masked to /%d: destination %v, want %v", host, bits, k.DstPrefix(), wantDst)
					}
					if kind == Key5Tuple && (k.Proto() != protoTCP || k.SrcPort() != 1234 || k.DstPort() != 80) {
						t.Fatalf("%v masked to /%d lost its ports: %v", host, bits, k)
					}
					if k == host {
						t.Fatalf("%v masked to /%d equals the host key", host, bits)
					}
					again := k
					m.Apply(&again)
					if again != k {
						t.Fatalf("%v masked twice to /%d: %v, then %v", host, bits, k, again)
					}
					checkBinaryRoundTrip(t, k)
				}
			}
		}
	}
}

func TestMaskApplyKeeps(t *testing.T) {
	a := netip.MustParseAddr("10.1.2.3")
	host := MakeKey(KeySrc, a, netip.Addr{}, 0, 0, 0)
	k := host
	Mask{}.Apply(&k)
	if k != host || k.Bits() != -1 || k.SrcPrefix() != netip.MustParsePrefix("10.1.2.3/32") {
		t.Errorf("the zero Mask changed %v: %v (bits %d, prefix %v)", host, k, k.Bits(), k.SrcPrefix())
	}
	var zero Key
	mustMask(24, 64).Apply(&zero)
	if zero != (Key{}) {
		t.Errorf("Apply changed the zero Key: %#v", zero)
	}
	// A shorter network stays as it is: it cannot be lengthened.
	k16 := host
	mustMask(16, 64).Apply(&k16)
	k = k16
	mustMask(24, 64).Apply(&k)
	if k != k16 || k.String() != "10.1.0.0/16" {
		t.Errorf("a /16 key masked to /24: %v", k)
	}
	mustMask(8, 64).Apply(&k)
	if k.String() != "10.0.0.0/8" {
		t.Errorf("a /16 key masked to /8: %v", k)
	}
	// Networks of different lengths, and a /32 and its host, differ.
	k32, k24 := host, host
	mustMask(32, 128).Apply(&k32)
	mustMask(24, 128).Apply(&k24)
	k0a, k0b := host, MakeKey(KeySrc, netip.MustParseAddr("192.0.2.1"), netip.Addr{}, 0, 0, 0)
	mustMask(0, 0).Apply(&k0a)
	mustMask(0, 0).Apply(&k0b)
	if k32 == host || k32 == k24 || k0a != k0b || k0a.String() != "0.0.0.0/0" {
		t.Errorf("/32 %v, host %v, /24 %v, /0 %v and %v", k32, host, k24, k0a, k0b)
	}
	if k32.Hash(1) == host.Hash(1) || k32.Hash(1) == k24.Hash(1) {
		t.Errorf("a /32 key hashes as its host or its /24")
	}
}

func TestMaskApplyNoAllocs(t *testing.T) {
	m := mustMask(24, 64)
	for _, k := range []Key{tcp4, tcp6, project(tcp6, KeySrc)} {
		if n := testing.AllocsPerRun(100, func() {
			c := k
			m.Apply(&c)
			sinkKey = c
		}); n != 0 {
			t.Errorf("%v: Apply allocates %v times", k, n)
		}
	}
}

func TestNetworkKeyText(t *testing.T) {
	a, b := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.9.8.7")
	a6, b6 := netip.MustParseAddr("2001:db8:1:2:3:4:5:6"), netip.MustParseAddr("2001:db8:7:8::9")
	max6 := netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
	m := mustMask(24, 64)
	net := func(k Key) Key { m.Apply(&k); return k }
	for _, c := range []struct {
		k        Key
		want     string
		src, dst string
	}{
		{net(MakeKey(KeySrc, a, b, 0, 0, 0)), "10.1.2.0/24", "10.1.2.0/24", ""},
		{net(MakeKey(KeyDst, a, b, 0, 0, 0)), "10.9.8.0/24", "", "10.9.8.0/24"},
		{net(MakeKey(KeySrc, a6, b6, 0, 0, 0)), "2001:db8:1:2::/64", "2001:db8:1:2::/64", ""},
		{net(MakeKey(KeyPair, a, b, 0, 0, 0)), "10.1.2.0/24 > 10.9.8.0/24", "10.1.2.0/24", "10.9.8.0/24"},
		{net(MakeKey(Key5Tuple, a, b, protoTCP, 1234, 80)), "tcp 10.1.2.0/24:1234 > 10.9.8.0/24:80", "10.1.2.0/24", "10.9.8.0/24"},
		{net(MakeKey(Key5Tuple, a6, b6, protoUDP, 53, 5353)), "udp [2001:db8:1:2::/64]:53 > [2001:db8:7:8::/64]:5353", "2001:db8:1:2::/64", "2001:db8:7:8::/64"},
		{net(MakeKey(Key5Tuple, a, b, protoICMP, 0, 0)), "icmp 10.1.2.0/24 > 10.9.8.0/24", "10.1.2.0/24", "10.9.8.0/24"},
		{MakeKey(KeySrc, a, b, 0, 0, 0), "10.1.2.3", "10.1.2.3", ""},
	} {
		if got := c.k.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
		if got := string(c.k.AppendSrc([]byte("x"))); got != "x"+c.src {
			t.Errorf("%v: AppendSrc = %q, want %q", c.k, got, "x"+c.src)
		}
		if got := string(c.k.AppendDst([]byte("x"))); got != "x"+c.dst {
			t.Errorf("%v: AppendDst = %q, want %q", c.k, got, "x"+c.dst)
		}
	}
	// The longest text form fits the buffer String keeps on its stack.
	k := MakeKey(Key5Tuple, max6, max6, protoSCTP, 65535, 65535)
	mustMask(32, 128).Apply(&k)
	if s := k.String(); len(s) != 110 || !strings.Contains(s, "/128]:65535") {
		t.Errorf("longest form %q is %d bytes", s, len(s))
	}
	buf := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(100, func() {
		buf, _ = k.AppendText(buf[:0])
		buf = k.AppendSrc(buf[:0])
	}); n != 0 {
		t.Errorf("AppendText and AppendSrc of a network key allocate %v times", n)
	}
}

func TestNetworkKeyBinary(t *testing.T) {
	// By hand, as TestKeyBinaryLayout: bit 2 of byte 38, the length in 39.
	k := MakeKey(KeySrc, netip.MustParseAddr("10.1.2.3"), netip.Addr{}, 0, 0, 0)
	mustMask(24, 64).Apply(&k)
	b, _ := k.MarshalBinary()
	want := make([]byte, KeySize)
	copy(want, []byte{10, 1, 2, 0})
	want[37], want[38], want[39] = byte(KeySrc), 1<<2, 24
	if !bytes.Equal(b, want) {
		t.Fatalf("binary form of 10.1.2.0/24\n got %x\nwant %x", b, want)
	}
	for _, k := range networkKeys(testKeys(20)) {
		checkBinaryRoundTrip(t, k)
	}
	k6 := MakeKey(KeyPair, netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), 0, 0, 0)
	mustMask(24, 64).Apply(&k6)
	good6, _ := k6.MarshalBinary()
	edit := func(b []byte, f func(b []byte)) []byte {
		b = bytes.Clone(b)
		f(b)
		return b
	}
	for name, b := range map[string][]byte{
		"length without flag":  edit(want, func(b []byte) { b[38] = 0 }),
		"host bit set":         edit(want, func(b []byte) { b[3] = 1 }),
		"ipv4 length 33":       edit(want, func(b []byte) { b[39] = 33 }),
		"ipv6 length 129":      edit(good6, func(b []byte) { b[39] = 129 }),
		"ipv6 host bit of dst": edit(good6, func(b []byte) { b[16+15] = 1 }),
		"shorter than masked":  edit(want, func(b []byte) { b[39] = 16; b[2] = 2 }),
	} {
		var k Key
		if err := k.UnmarshalBinary(b); err != ErrBadKey {
			t.Errorf("%s: UnmarshalBinary(%x) = %v, want ErrBadKey", name, b, err)
		}
	}
}

func TestKeySpec(t *testing.T) {
	for _, c := range []struct {
		in   string
		want KeySpec
		text string
	}{
		{"src", KeySpec{Kind: KeySrc}, "src"},
		{"5tuple", KeySpec{Kind: Key5Tuple}, "5tuple"},
		{"src/24,64", KeySpec{KeySrc, mustMask(24, 64)}, "src/24,64"},
		{"pair/24", KeySpec{KeyPair, mustMask(24, 128)}, "pair/24,128"},
	} {
		got, err := ParseKeySpec(c.in)
		if err != nil || got != c.want || got.String() != c.text {
			t.Errorf("ParseKeySpec(%q) = %v (%q), %v; want %v", c.in, got, got.String(), err, c.want)
		}
	}
	for _, s := range []string{"", "src/", "src/33", "ports/24", "/24", "src/24,64/8"} {
		if _, err := ParseKeySpec(s); !errors.Is(err, ErrBadMask) && !errors.Is(err, ErrBadKind) {
			t.Errorf("ParseKeySpec(%q) error = %v", s, err)
		}
	}
}

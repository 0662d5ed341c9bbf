package eval

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
)

func TestParsePcapSpec(t *testing.T) {
	m2464, _ := flow.ParseMask("24,64")
	m16, _ := flow.ParseMask("16")
	// By hand, as flow's documentation spells them: every kind; GRE and
	// VXLAN on port 4789 alone.
	all := flow.Decap{Tunnels: flow.TunnelsAll, VXLANPorts: [2]uint16{4789, 8472}, GenevePort: 6081, GTPUPort: 2152}
	greVX := flow.Decap{Tunnels: flow.TunnelGRE | flow.TunnelVXLAN, VXLANPorts: [2]uint16{4789, 0}, GenevePort: 6081, GTPUPort: 2152}
	for _, c := range []struct {
		rest string
		want PcapSpec
		text string
	}{
		{"x.pcap", PcapSpec{Path: "x.pcap"}, "pcap:x.pcap"},
		{"x.pcap,key=pair", PcapSpec{Path: "x.pcap", Kind: flow.KeyPair}, "pcap:x.pcap,key=pair"},
		{"x.pcap,prefix=24,64", PcapSpec{Path: "x.pcap", Prefix: m2464, HasPrefix: true}, "pcap:x.pcap,prefix=24,64"},
		{"x.pcap,key=src,prefix=24,64", PcapSpec{Path: "x.pcap", Kind: flow.KeySrc, Prefix: m2464, HasPrefix: true}, "pcap:x.pcap,key=src,prefix=24,64"},
		{"x.pcap,prefix=24,64,key=dst", PcapSpec{Path: "x.pcap", Kind: flow.KeyDst, Prefix: m2464, HasPrefix: true}, "pcap:x.pcap,key=dst,prefix=24,64"},
		{"a,b.pcap,prefix=16", PcapSpec{Path: "a,b.pcap", Prefix: m16, HasPrefix: true}, "pcap:a,b.pcap,prefix=16,128"},
		{"x.pcap,decap=all", PcapSpec{Path: "x.pcap", Decap: all, HasDecap: true}, "pcap:x.pcap,decap=all"},
		{"x.pcap,decap=none", PcapSpec{Path: "x.pcap", HasDecap: true}, "pcap:x.pcap,decap=none"},
		{"x.pcap,decap=gre,vxlan=4789,key=pair", PcapSpec{Path: "x.pcap", Kind: flow.KeyPair, Decap: greVX, HasDecap: true}, "pcap:x.pcap,key=pair,decap=gre,vxlan=4789"},
		{"x.pcap,key=pair,decap=gre,vxlan=4789", PcapSpec{Path: "x.pcap", Kind: flow.KeyPair, Decap: greVX, HasDecap: true}, "pcap:x.pcap,key=pair,decap=gre,vxlan=4789"},
		{"x.pcap,decap=all,prefix=24,64,key=dst", PcapSpec{Path: "x.pcap", Kind: flow.KeyDst, Prefix: m2464, HasPrefix: true, Decap: all, HasDecap: true}, "pcap:x.pcap,key=dst,prefix=24,64,decap=all"},
		{"a,decap.pcap", PcapSpec{Path: "a,decap.pcap"}, "pcap:a,decap.pcap"},
	} {
		got, err := ParsePcapSpec(c.rest)
		if err != nil || got != c.want || got.String() != c.text {
			t.Errorf("ParsePcapSpec(%q) = %+v (%q), %v; want %+v (%q)", c.rest, got, got.String(), err, c.want, c.text)
		}
	}
	for _, rest := range []string{"", ",key=src", ",prefix=24", "x.pcap,prefix=", "x.pcap,prefix=33", "x.pcap,prefix=24,129",
		"x.pcap,key=src,key=dst", "x.pcap,prefix=24,prefix=16", "x.pcap,key=mac", "x.pcap,prefix=24,64,1",
		"x.pcap,decap=", "x.pcap,decap=teredo", "x.pcap,decap=gre,teredo", "x.pcap,decap=all,decap=gre", "x.pcap,decap=none,gre", ",decap=all"} {
		if ps, err := ParsePcapSpec(rest); !errors.Is(err, ErrStreamSpec) {
			t.Errorf("ParsePcapSpec(%q) = %+v, %v; want ErrStreamSpec", rest, ps, err)
		}
	}
}

// A pcap stream with prefix= counts networks: with /0 every IPv4 source
// is one network and every IPv6 source another, so a capture of both
// families has exactly two distinct elements; with /32 and /128 the
// networks are the hosts, as many as the stream without prefix= has; /24
// and /64 give a count in between.
func TestPcapStreamPrefix(t *testing.T) {
	file := filepath.Join("..", "testdata", "pcaps", "ipv6.pcap") // IPv4 and IPv6 sources
	distinct := func(spec string) (int, int) {
		t.Helper()
		s, err := ParseStream(spec)
		if err != nil {
			t.Fatal(err)
		}
		e, err := s.Materialize(1)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range e.Dup {
			if !d {
				n++
			}
		}
		return n, len(e.Hashes)
	}
	hosts, elems := distinct("pcap:" + file)
	all, allElems := distinct("pcap:" + file + ",prefix=0,0")
	whole, _ := distinct("pcap:" + file + ",key=src,prefix=32,128")
	nets, _ := distinct("pcap:" + file + ",prefix=24,64")
	if all != 2 || allElems != elems || whole != hosts || nets >= hosts || nets <= 2 {
		t.Errorf("distinct sources %d, by /0 %d (want 2), by /32,/128 %d (want %d), by /24,/64 %d (want between)", hosts, all, whole, hosts, nets)
	}
}

// WithDecap gives a pcap: stream eval's --decap unless its spec has
// decap=; a stream of another kind takes no tunnels.
func TestWithDecap(t *testing.T) {
	gre := flow.Decap{Tunnels: flow.TunnelGRE, VXLANPorts: [2]uint16{4789, 8472}, GenevePort: 6081, GTPUPort: 2152}
	for _, c := range []struct {
		spec  string
		decap flow.Decap
		want  string
	}{
		{"pcap:x.pcap", gre, "pcap:x.pcap,key=src,decap=gre"},
		{"pcap:x.pcap", flow.Decap{}, "pcap:x.pcap,key=src"},
		{"pcap:x.pcap,decap=none", gre, "pcap:x.pcap,key=src,decap=none"},
		{"distinct:n=5", flow.Decap{}, "distinct:n=5"},
	} {
		s, err := ParseStream(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		s, err = WithDecap(s, c.decap)
		if err != nil || s.String() != c.want {
			t.Errorf("WithDecap(%s, %v) = %v, %v; want %s", c.spec, c.decap, s, err, c.want)
		}
	}
	s, _ := ParseStream("uniform:n=5,universe=9")
	if _, err := WithDecap(s, gre); !errors.Is(err, ErrStreamSpec) {
		t.Errorf("WithDecap(uniform, gre): %v, want ErrStreamSpec", err)
	}
}

package flow

import (
	"errors"
	"flag"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

func TestParseDecap(t *testing.T) {
	def := Decap{VXLANPorts: [2]uint16{4789, 8472}, GenevePort: 6081, GTPUPort: 2152}
	with := func(t Tunnels, f func(d *Decap)) Decap {
		d := def
		d.Tunnels = t
		if f != nil {
			f(&d)
		}
		return d
	}
	for _, c := range []struct {
		in, str string
		want    Decap
	}{
		{"none", "none", Decap{}},
		{"all", "all", with(TunnelsAll, nil)},
		{"erspan", "erspan", with(TunnelERSPAN, nil)},
		{"gre,erspan", "gre,erspan", with(TunnelGRE|TunnelERSPAN, nil)},
		{"ipip,gre", "gre,ipip", with(TunnelGRE|TunnelIPIP, nil)},
		{"gre,erspan,vxlan,geneve,gtpu,ipip", "all", with(TunnelsAll, nil)},
		{"vxlan=4789", "vxlan=4789", with(TunnelVXLAN, func(d *Decap) { d.VXLANPorts = [2]uint16{4789, 0} })},
		{"vxlan=4790+8472", "vxlan=4790+8472", with(TunnelVXLAN, func(d *Decap) { d.VXLANPorts = [2]uint16{4790, 8472} })},
		{"vxlan=4789+8472", "vxlan", with(TunnelVXLAN, nil)},
		{"geneve=6082,gtpu=2153", "geneve=6082,gtpu=2153", with(TunnelGeneve|TunnelGTPU, func(d *Decap) { d.GenevePort, d.GTPUPort = 6082, 2153 })},
		{"all,gtpu=65535,novni", "all,gtpu=65535,novni", with(TunnelsAll, func(d *Decap) { d.GTPUPort = 65535; d.NoSegment = true })},
		{"novni,vxlan", "vxlan,novni", with(TunnelVXLAN, func(d *Decap) { d.NoSegment = true })},
		{"gre,gre", "gre", with(TunnelGRE, nil)},
	} {
		got, err := ParseDecap(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseDecap(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			continue
		}
		if s := got.String(); s != c.str {
			t.Errorf("ParseDecap(%q).String() = %q, want %q", c.in, s, c.str)
		}
		if back, err := ParseDecap(got.String()); err != nil || back != got {
			t.Errorf("ParseDecap(%q) = %+v, %v; want %+v", got.String(), back, err, got)
		}
	}
	for _, c := range []struct{ in, word string }{
		{"", ""},
		{"gre,", ""},
		{"teredo", "teredo"},
		{"GRE", "GRE"},
		{"none,gre", "none"},
		{"gre=47", "gre=47"},
		{"ipip=1", "ipip=1"},
		{"all=1", "all=1"},
		{"vxlan=0", "vxlan=0"},
		{"vxlan=65536", "vxlan=65536"},
		{"vxlan=+4789", "vxlan=+4789"},
		{"vxlan=4789+", "vxlan=4789+"},
		{"vxlan=1+2+3", "vxlan=1+2+3"},
		{"geneve=1+2", "geneve=1+2"},
		{"gtpu=-1", "gtpu=-1"},
		{"gtpu=0x868", "gtpu=0x868"},
		{"vxlan=1,vxlan=2", "vxlan=2"},
		{"novni", ""},
		{" gre", " gre"},
	} {
		_, err := ParseDecap(c.in)
		if !errors.Is(err, ErrBadDecap) {
			t.Errorf("ParseDecap(%q) error = %v, want ErrBadDecap", c.in, err)
			continue
		}
		if c.word != "" && !strings.Contains(err.Error(), strconv.Quote(c.word)) {
			t.Errorf("ParseDecap(%q) error %q does not name %q", c.in, err, c.word)
		}
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var d Decap
	fs.TextVar(&d, "decap", Decap{}, "tunnels")
	if err := fs.Parse([]string{"--decap", "erspan,vxlan=4789"}); err != nil || d.Tunnels != TunnelERSPAN|TunnelVXLAN || d.VXLANPorts != [2]uint16{4789, 0} {
		t.Errorf("--decap erspan,vxlan=4789: %+v, %v", d, err)
	}
	if err := fs.Parse([]string{"--decap", "bogus"}); err == nil {
		t.Error("--decap bogus: no error")
	}
}

// decapAll is what --decap all gives.
var decapAll = mustDecap("all")

func mustDecap(s string) Decap {
	d, err := ParseDecap(s)
	if err != nil {
		panic(err)
	}
	return d
}

// readPcap returns the frames of an Ethernet pcap file.
func readPcap(t testing.TB, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if r.LinkType() != 1 {
		t.Fatalf("%s: link type %v, want Ethernet", path, r.LinkType())
	}
	var frames [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err == io.EOF {
			return frames
		}
		if err != nil {
			t.Fatalf("%s: frame %d: %v", path, len(frames)+1, err)
		}
		frames = append(frames, data)
	}
}

// decapGood are the captures of tunnels DecodeDecap keys, which
// TestDecapMatchesTshark checks frame by frame.
var decapGood = []string{"gre", "erspan", "vxlan", "geneve", "gtpu", "ipip", "nested"}

// tsharkHeaders is what tshark finds in one frame: the outermost and the
// innermost IP headers' addresses (the innermost before any ICMP or ICMPv6,
// whose quoted header is not the packet's), and the VNI of the last VXLAN or
// Geneve layer before the innermost header.
type tsharkHeaders struct {
	outerSrc, outerDst netip.Addr
	src, dst           netip.Addr
	vni                uint32
	hasVNI             bool
}

// tsharkInnermost runs tshark over file and reads the headers of each frame
// in its layer order (frame.protocols), the fields' occurrences in that
// order.
func tsharkInnermost(t *testing.T, file string) []tsharkHeaders {
	t.Helper()
	tsharkMu.Lock()
	defer tsharkMu.Unlock()
	if h, ok := tsharkCache[file]; ok {
		return h
	}
	h := runTshark(t, file)
	tsharkCache[file] = h
	return h
}

// tsharkCache keeps tshark's reading of each capture for the test process:
// it takes a second or more per file, and -count=50 would read them again.
var (
	tsharkMu    sync.Mutex
	tsharkCache = map[string][]tsharkHeaders{}
)

func runTshark(t *testing.T, file string) []tsharkHeaders {
	t.Helper()
	if _, err := exec.LookPath("tshark"); err != nil {
		testutil.SkipOrFail(t, "tshark is not installed (Debian: tshark): the tunnel captures are checked against its dissection")
	}
	out, err := exec.Command("tshark", "-r", file,
		// Dissect a first fragment's payload (a fragment of an IPv6
		// tunnel packet) rather than wait for the rest; VXLAN on Linux's
		// port too.
		"-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE", "-d", "udp.port==8472,vxlan",
		"-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,",
		"-e", "frame.number", "-e", "frame.protocols",
		"-e", "ip.src", "-e", "ip.dst", "-e", "ipv6.src", "-e", "ipv6.dst",
		"-e", "vxlan.vni", "-e", "geneve.vni").Output()
	if err != nil {
		t.Fatalf("tshark -r %s: %v", file, err)
	}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	addr := func(s string) netip.Addr {
		a, err := netip.ParseAddr(s)
		if err != nil {
			t.Fatalf("%s: tshark address %q: %v", file, s, err)
		}
		return a
	}
	var frames []tsharkHeaders
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(f) != 8 {
			t.Fatalf("%s: tshark line %q", file, line)
		}
		if n, _ := strconv.Atoi(f[0]); n != len(frames)+1 {
			t.Fatalf("%s: tshark frame %s, want %d", file, f[0], len(frames)+1)
		}
		ip4s, ip4d, ip6s, ip6d := split(f[2]), split(f[3]), split(f[4]), split(f[5])
		vx, gn := split(f[6]), split(f[7])
		var h tsharkHeaders
		var i4, i6, ivx, ign int
		var vni uint32
		var hasVNI bool
		set := func(s, d string) {
			h.src, h.dst = addr(s), addr(d)
			if !h.outerSrc.IsValid() {
				h.outerSrc, h.outerDst = h.src, h.dst
			}
			h.vni, h.hasVNI = vni, hasVNI
		}
	layers:
		for p := range strings.SplitSeq(f[1], ":") {
			switch p {
			case "ip":
				if i4 >= len(ip4s) || i4 >= len(ip4d) {
					t.Fatalf("%s frame %s: no address for IPv4 layer %d in %q", file, f[0], i4, line)
				}
				set(ip4s[i4], ip4d[i4])
				i4++
			case "ipv6":
				if i6 >= len(ip6s) || i6 >= len(ip6d) {
					t.Fatalf("%s frame %s: no address for IPv6 layer %d in %q", file, f[0], i6, line)
				}
				set(ip6s[i6], ip6d[i6])
				i6++
			case "vxlan", "geneve":
				list, i := vx, &ivx
				if p == "geneve" {
					list, i = gn, &ign
				}
				if *i >= len(list) {
					t.Fatalf("%s frame %s: no VNI for %s layer %d", file, f[0], p, *i)
				}
				v, err := strconv.ParseUint(list[*i], 0, 24) // tshark prints Geneve's in hex, VXLAN's in decimal
				if err != nil {
					t.Fatalf("%s frame %s: VNI %q: %v", file, f[0], list[*i], err)
				}
				vni, hasVNI = uint32(v), true
				*i++
			case "icmp", "icmpv6":
				break layers
			}
		}
		frames = append(frames, h)
	}
	return frames
}

// TestDecapMatchesTshark keys every frame of the tunnel captures (written by
// scripts/mkdecap.py) with --decap all and compares the src, dst and pair
// keys and the segment with tshark's innermost headers, and Decode's keys
// (--decap none) with tshark's outermost.
func TestDecapMatchesTshark(t *testing.T) {
	total := 0
	for _, name := range decapGood {
		file := filepath.Join("testdata", "decap", name+".pcap")
		frames := readPcap(t, file)
		want := tsharkInnermost(t, file)
		if len(want) != len(frames) {
			t.Fatalf("%s: tshark read %d frames, pcapgo %d", file, len(want), len(frames))
		}
		for i, frame := range frames {
			w := want[i]
			if !w.src.IsValid() {
				t.Errorf("%s frame %d: tshark finds no IP header", file, i+1)
				continue
			}
			for _, c := range []struct {
				kind     KeyKind
				src, dst netip.Addr
			}{{KeySrc, w.src, w.dst}, {KeyDst, w.src, w.dst}, {KeyPair, w.src, w.dst}} {
				exp := MakeKey(c.kind, c.src, c.dst, 0, 0, 0)
				if w.hasVNI {
					exp = exp.WithSegment(w.vni)
				}
				var k Key
				if err := k.DecodeDecap(frame, LinkEthernet, c.kind, &decapAll); err != nil || k != exp {
					t.Errorf("%s frame %d: DecodeDecap(%v, all) = %v, %v; tshark's innermost: %v", file, i+1, c.kind, k, err, exp)
				}
				// --decap none: the outermost header, as before.
				outer := MakeKey(c.kind, w.outerSrc, w.outerDst, 0, 0, 0)
				if err := k.DecodeDecap(frame, LinkEthernet, c.kind, &Decap{}); err != nil || k != outer {
					t.Errorf("%s frame %d: DecodeDecap(%v, none) = %v, %v; tshark's outermost: %v", file, i+1, c.kind, k, err, outer)
				}
			}
			// The 5-tuple's addresses are the pair's.
			k5, err5 := ParseDecapFrame(frame, LinkEthernet, Key5Tuple, &decapAll)
			if err5 != nil || k5.Src() != w.src || k5.Dst() != w.dst {
				t.Errorf("%s frame %d: 5-tuple %v, %v; tshark's innermost %v > %v", file, i+1, k5, err5, w.src, w.dst)
			}
			// novni: the same addresses without a segment.
			nv := decapAll
			nv.NoSegment = true
			if k, err := ParseDecapFrame(frame, LinkEthernet, KeyPair, &nv); err != nil || k != MakeKey(KeyPair, w.src, w.dst, 0, 0, 0) {
				t.Errorf("%s frame %d: novni: %v, %v", file, i+1, k, err)
			}
			total++
		}
	}
	if total < 40 {
		t.Errorf("only %d frames compared", total)
	}
}

// decapBad is bad.pcap's frames (scripts/mkdecap.py, bad_files, in the
// same order) with the reason each must be counted by.
var decapBad = []struct {
	name string
	err  error
}{
	{"GRE header cut after 2 bytes", ErrTunnelTruncated},
	{"GRE with C, K and S cut inside the optional fields", ErrTunnelTruncated},
	{"GRE with the routing bit", ErrTunnelBadHeader},
	{"GRE version 1 (PPTP)", ErrTunnelUnknown},
	{"GRE of an unknown protocol", ErrTunnelUnknown},
	{"VXLAN with the I flag clear", ErrTunnelBadHeader},
	{"VXLAN header cut", ErrTunnelTruncated},
	{"UDP header to 4789 cut at 6 bytes", ErrTunnelTruncated},
	{"Geneve options past the packet", ErrTunnelTruncated},
	{"Geneve version 1", ErrTunnelBadHeader},
	{"Geneve of an unknown protocol", ErrTunnelUnknown},
	{"GTP-U echo request", ErrTunnelNotData},
	{"GTP-U end marker", ErrTunnelNotData},
	{"GTP-U extension chain that does not end", ErrTunnelTruncated},
	{"GTP-U extension chain of 9 headers", ErrTooManyHeaders},
	{"GTP-U extension header of length 0", ErrTunnelBadHeader},
	{"GTPv2 on the GTP-U port", ErrTunnelBadHeader},
	{"GTP-U T-PDU that is not IP", ErrTunnelUnknown},
	{"ERSPAN II header cut", ErrTunnelTruncated},
	{"ERSPAN II of version 2", ErrTunnelBadHeader},
	{"ERSPAN III platform subheader cut", ErrTunnelTruncated},
	{"IP-in-IP nested five deep", ErrTunnelTooDeep},
	{"inner IPv4 header cut inside VXLAN", ErrTruncated},
	{"ARP inside VXLAN", ErrNotIP},
	{"GTP-U cut inside its optional fields", ErrTunnelTruncated},
	{"ERSPAN III of frame type 3", ErrTunnelUnknown},
}

// TestDecapBadCaptures: each bad tunnel header is counted by its reason, for
// every key kind, and with --decap none is keyed by its outer header.
func TestDecapBadCaptures(t *testing.T) {
	frames := readPcap(t, filepath.Join("testdata", "decap", "bad.pcap"))
	if len(frames) != len(decapBad) {
		t.Fatalf("bad.pcap has %d frames, the table %d: keep scripts/mkdecap.py and decapBad in step", len(frames), len(decapBad))
	}
	for i, c := range decapBad {
		t.Run(c.name, func(t *testing.T) {
			for kind := KeySrc; kind <= Key5Tuple; kind++ {
				var k Key
				err := k.DecodeDecap(frames[i], LinkEthernet, kind, &decapAll)
				if err != c.err || k != (Key{}) {
					t.Errorf("frame %d, %v: DecodeDecap = %v, %v (%s); want %v (%s)", i+1, kind, k, err, Reason(err), c.err, Reason(c.err))
				}
				if err := k.DecodeDecap(frames[i], LinkEthernet, kind, nil); err != nil && kind != Key5Tuple {
					t.Errorf("frame %d, %v: without --decap: %v", i+1, kind, err)
				}
			}
		})
	}
}

// TestDecapKindsOff: a tunnel kind not listed is not decapsulated, nor one on
// a port not listed: the header holding it is keyed.
func TestDecapKindsOff(t *testing.T) {
	for _, c := range []struct {
		file  string
		decap string
		inner []bool // by frame: decapsulated (tshark's innermost) or not (its outermost)
	}{
		{"gre", "erspan,vxlan,geneve,gtpu,ipip", []bool{false, false, false, false, false, false, false, false, false, false, false, false}},
		{"erspan", "gre,vxlan,geneve,gtpu,ipip", []bool{false, false, false, false, false, false}},
		{"erspan", "erspan", []bool{true, true, true, true, true, true}},
		{"vxlan", "vxlan=4789", []bool{true, true, false, true, true, false, true, false}},
		{"vxlan", "vxlan=8472", []bool{false, false, true, false, false, true, false, false}},
		{"vxlan", "vxlan=4791", []bool{false, false, false, false, false, false, false, false}},
		{"geneve", "all,geneve=6082", []bool{false, false, false, false, false}},
		{"gtpu", "gtpu", []bool{true, true, true, true, true, true}},
		{"gtpu", "all,gtpu=2153", []bool{false, false, false, false, false, false}},
		{"ipip", "gre,vxlan,geneve,gtpu,erspan", []bool{false, false, false, false, false, false, false}},
		// Only the GRE around VXLAN; only the VXLAN in GRE is not reached.
		{"nested", "gre", []bool{false, false, false, false, false, true}},
	} {
		d := mustDecap(c.decap)
		file := filepath.Join("testdata", "decap", c.file+".pcap")
		frames := readPcap(t, file)
		want := tsharkInnermost(t, file)
		for i, frame := range frames {
			if c.file == "nested" && i == 0 {
				// GRE to the VXLAN's IP header.
				k, err := ParseDecapFrame(frame, LinkEthernet, KeySrc, &d)
				if exp := MakeKey(KeySrc, netip.MustParseAddr("198.51.100.61"), netip.Addr{}, 0, 0, 0); err != nil || k != exp {
					t.Errorf("%s frame 1, --decap %s: %v, %v; want %v", file, c.decap, k, err, exp)
				}
				continue
			}
			src := want[i].outerSrc
			if c.inner[i] {
				src = want[i].src
			}
			k, err := ParseDecapFrame(frame, LinkEthernet, KeySrc, &d)
			if err != nil || k.Src() != src {
				t.Errorf("%s frame %d, --decap %s: %v, %v; want source %v", file, i+1, c.decap, k, err, src)
			}
		}
	}
}

// TestDecapNone: with no tunnels DecodeDecap is Decode, on every frame of
// the captures and with every kind.
func TestDecapNone(t *testing.T) {
	for _, name := range append(decapGood, "bad") {
		for _, frame := range readPcap(t, filepath.Join("testdata", "decap", name+".pcap")) {
			for kind := KeyKind(0); kind <= Key5Tuple+1; kind++ {
				want, werr := Parse(frame, LinkEthernet, kind)
				for _, d := range []*Decap{nil, {}, {VXLANPorts: [2]uint16{4789, 8472}, NoSegment: true}} {
					var k Key
					if err := k.DecodeDecap(frame, LinkEthernet, kind, d); k != want || err != werr {
						t.Errorf("%s: DecodeDecap(%+v) = %v, %v; Decode: %v, %v", name, d, k, err, want, werr)
					}
				}
			}
		}
	}
}

// TestDecapNoAllocs: DecodeDecap allocates nothing, keyed or failing.
func TestDecapNoAllocs(t *testing.T) {
	var frames [][]byte
	for _, name := range append(decapGood, "bad") {
		frames = append(frames, readPcap(t, filepath.Join("testdata", "decap", name+".pcap"))...)
	}
	d := decapAll
	var k Key
	if n := testing.AllocsPerRun(20, func() {
		for _, f := range frames {
			_ = k.DecodeDecap(f, LinkEthernet, Key5Tuple, &d)
			_ = k.DecodeDecap(f, LinkEthernet, KeySrc, &d)
		}
	}); n != 0 {
		t.Errorf("DecodeDecap allocates %v times per %d frames", n, len(frames))
	}
}

// TestDecapReasons: the new sentinels have their labels, and which are
// malformed.
func TestDecapReasons(t *testing.T) {
	for _, c := range []struct {
		err       error
		label     string
		malformed bool
	}{
		{ErrTunnelTruncated, "tunnel_truncated", true},
		{ErrTunnelBadHeader, "tunnel_bad_header", true},
		{ErrTunnelUnknown, "tunnel_unknown", false},
		{ErrTunnelNotData, "tunnel_not_data", false},
		{ErrTunnelTooDeep, "tunnel_too_deep", true},
	} {
		if got := Reason(c.err); got != c.label {
			t.Errorf("Reason(%v) = %q, want %q", c.err, got, c.label)
		}
		if IsMalformed(c.err) != c.malformed {
			t.Errorf("IsMalformed(%v) = %v", c.err, !c.malformed)
		}
		found := false
		for _, l := range Reasons() {
			found = found || l == c.label
		}
		if !found {
			t.Errorf("Reasons() lacks %q", c.label)
		}
	}
}

// TestDecapInnerVersion: an inner header of the wrong version is
// ErrBadHeader, as on a link of that version; link padding after a short
// IPv4 packet is not read as a tunnel header; a tunnel in a first fragment
// is opened.
func TestDecapInnerVersion(t *testing.T) {
	outer := func(proto uint8, payload []byte) []byte {
		return ether(etherTypeIPv4, ip4{src: "203.0.113.1", dst: "203.0.113.2", proto: proto}.packet(payload))
	}
	gre := func(ptype uint16) []byte { return cat([]byte{0, 0}, be16(ptype)) }
	for _, c := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"4in4 carrying IPv6", outer(protoIPIP, tcp6IP), ErrBadHeader},
		{"6in4 carrying IPv4", outer(protoIPv6, tcp4IP), ErrBadHeader},
		{"GRE 0x0800 carrying IPv6", outer(protoGRE, cat(gre(etherTypeIPv4), tcp6IP)), ErrBadHeader},
		{"GRE 0x86DD carrying IPv4", outer(protoGRE, cat(gre(etherTypeIPv6), tcp4IP)), ErrBadHeader},
	} {
		if _, err := ParseDecapFrame(c.frame, LinkEthernet, KeySrc, &decapAll); err != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// An IPv4 packet of protocol 47 with no payload, and 4 bytes of link
	// padding that would read as a GRE header of IPv4: its GRE header is
	// cut (read as GRE, the padding would leave an empty inner IPv4
	// header, ErrTruncated).
	padded := cat(outer(protoGRE, nil), gre(etherTypeIPv4))
	if k, err := ParseDecapFrame(padded, LinkEthernet, KeySrc, &decapAll); err != ErrTunnelTruncated {
		t.Errorf("padding: %v, %v; want ErrTunnelTruncated", k, err)
	}
	// A first fragment (more fragments, offset 0) of IPv4 in IPv4.
	first := ether(etherTypeIPv4, ip4{src: "203.0.113.1", dst: "203.0.113.2", proto: protoIPIP, moreFrags: true}.packet(tcp4IP))
	if k, err := ParseDecapFrame(first, LinkEthernet, KeySrc, &decapAll); err != nil || k != project(tcp4, KeySrc) {
		t.Errorf("first fragment: %v, %v; want the inner source %v", k, err, project(tcp4, KeySrc))
	}
	// The next fragment: the outer header.
	next := ether(etherTypeIPv4, ip4{src: "203.0.113.1", dst: "203.0.113.2", proto: protoIPIP, fragOff: 4}.packet(tcp4IP[20:]))
	if k, err := ParseDecapFrame(next, LinkEthernet, KeySrc, &decapAll); err != nil || k.Src() != netip.MustParseAddr("203.0.113.1") {
		t.Errorf("non-first fragment: %v, %v; want the outer source", k, err)
	}
}

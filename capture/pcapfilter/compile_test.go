package pcapfilter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/net/bpf"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/testframe"
)

// testFrame is a network-layer packet the filter tests wrap in each link type.
type testFrame struct {
	name      string
	etherType uint16
	l3        []byte
	vlan      bool // Ethernet only: carry an 802.1Q tag before the EtherType
}

var (
	a4      = netip.MustParseAddr("192.0.2.1")
	b4      = netip.MustParseAddr("198.51.100.2")
	c4      = netip.MustParseAddr("10.1.2.3")
	a6      = netip.MustParseAddr("2001:db8::1")
	b6      = netip.MustParseAddr("2001:db8:8000::2")
	mapped6 = netip.MustParseAddr("::ffff:192.0.2.1")
)

// testFrames is the corpus of the accept/reject tables and of the comparison
// with tcpdump: each names what sets it apart.
func testFrames() []testFrame {
	tcp := testframe.Transport(protoTCP, 1234, 80)
	frag6 := func(next byte, offMF uint16, payload []byte) []byte {
		h := make([]byte, 8)
		h[0] = next
		binary.BigEndian.PutUint16(h[2:], offMF)
		binary.BigEndian.PutUint32(h[4:], 0xabcd)
		return append(h, payload...)
	}
	hopByHop := func(next byte, payload []byte) []byte {
		return append([]byte{next, 0, 1, 4, 0, 0, 0, 0}, payload...)
	}
	return []testFrame{
		{"tcp4", etherIPv4, testframe.IPv4(a4, b4, protoTCP, nil, 0x4000, tcp), false},
		{"udp4-dns", etherIPv4, testframe.IPv4(b4, a4, protoUDP, nil, 0, testframe.Transport(protoUDP, 53, 40000)), false},
		{"sctp4", etherIPv4, testframe.IPv4(a4, c4, protoSCTP, nil, 0, testframe.Transport(protoSCTP, 5000, 6000)), false},
		{"icmp4", etherIPv4, testframe.IPv4(c4, a4, protoICMP, nil, 0, testframe.Transport(protoICMP, 0x0800, 80)), false},
		{"igmp4", etherIPv4, testframe.IPv4(c4, netip.MustParseAddr("224.0.0.22"), protoIGMP, nil, 0, testframe.Transport(protoIGMP, 0x2200, 0)), false},
		{"gre4", etherIPv4, testframe.IPv4(b4, c4, 47, nil, 0, []byte{0, 0, 0x08, 0}), false},
		{"tcp4-options", etherIPv4, testframe.IPv4(c4, b4, protoTCP, []byte{1, 1, 1, 0}, 0, testframe.Transport(protoTCP, 443, 1024)), false},
		{"udp4-first-frag", etherIPv4, testframe.IPv4(a4, b4, protoUDP, nil, 0x2000, testframe.Transport(protoUDP, 53, 1000)), false},
		// Bytes where ports would be read 53 and 80: a non-first fragment has no ports.
		{"udp4-later-frag", etherIPv4, testframe.IPv4(a4, b4, protoUDP, nil, 185, testframe.Transport(protoUDP, 53, 80)), false},
		{"tcp4-truncated", etherIPv4, testframe.IPv4(a4, b4, protoTCP, nil, 0, nil)[:20], false},
		{"tcp4-vlan", etherIPv4, testframe.IPv4(a4, b4, protoTCP, nil, 0, tcp), true},
		{"tcp6", etherIPv6, testframe.IPv6(a6, b6, protoTCP, tcp), false},
		{"udp6-dns", etherIPv6, testframe.IPv6(b6, a6, protoUDP, testframe.Transport(protoUDP, 40000, 53)), false},
		{"sctp6", etherIPv6, testframe.IPv6(a6, b6, protoSCTP, testframe.Transport(protoSCTP, 5000, 6000)), false},
		{"icmp6", etherIPv6, testframe.IPv6(b6, a6, protoICMPv6, testframe.Transport(protoICMPv6, 0x8000, 80)), false},
		{"tcp6-frag", etherIPv6, testframe.IPv6(a6, b6, protoFrag6, frag6(protoTCP, 1, tcp)), false},
		{"udp6-hbh", etherIPv6, testframe.IPv6(a6, b6, 0, hopByHop(protoUDP, testframe.Transport(protoUDP, 53, 53))), false},
		{"udp6-mapped", etherIPv6, testframe.IPv6(mapped6, a6, protoUDP, testframe.Transport(protoUDP, 7, 9)), false},
		{"arp-request", etherARP, testframe.ARP(1, a4, c4), false},
		{"rarp", etherRARP, testframe.ARP(3, b4, a4), false},
		{"lldp", 0x88cc, make([]byte, 46), false},
	}
}

// wrap puts a link-layer header of type lt in front of f, or returns nil
// when lt cannot carry f.
func wrap(f testFrame, lt flow.LinkType) []byte {
	var hdr []byte
	switch lt {
	case flow.LinkEthernet:
		return testframe.Ethernet(f.etherType, f.vlan, f.l3)
	case flow.LinkLinuxSLL:
		if f.vlan {
			return nil
		}
		hdr = []byte{0, 0, 0, 1, 0, 6, 0x02, 0, 0, 0, 0, 1, 0, 0}
		hdr = binary.BigEndian.AppendUint16(hdr, f.etherType)
	case flow.LinkLinuxSLL2:
		if f.vlan {
			return nil
		}
		hdr = binary.BigEndian.AppendUint16(nil, f.etherType)
		hdr = append(hdr, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 0x02, 0, 0, 0, 0, 1, 0, 0)
	case flow.LinkRaw:
		if f.vlan || f.etherType != etherIPv4 && f.etherType != etherIPv6 {
			return nil
		}
	case flow.LinkIPv4:
		if f.vlan || f.etherType != etherIPv4 {
			return nil
		}
	case flow.LinkIPv6:
		if f.vlan || f.etherType != etherIPv6 {
			return nil
		}
	}
	return append(hdr, f.l3...)
}

var linkTypes = []flow.LinkType{flow.LinkEthernet, flow.LinkLinuxSLL, flow.LinkLinuxSLL2, flow.LinkRaw, flow.LinkIPv4, flow.LinkIPv6}

// loadVM compiles expr and loads it in golang.org/x/net/bpf's VM, after a
// round trip through the raw encoding the kernel receives.
func loadVM(tb testing.TB, expr string, lt flow.LinkType) (*bpf.VM, error) {
	tb.Helper()
	raw, err := Compile(expr, lt, 256)
	if err != nil {
		return nil, err
	}
	prog, ok := bpf.Disassemble(raw)
	if !ok {
		tb.Fatalf("%q: program does not disassemble: %v", expr, prog)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		tb.Fatalf("%q: VM rejects the program: %v\n%s", expr, err, listing(prog))
	}
	return vm, nil
}

func listing(prog []bpf.Instruction) string {
	var b strings.Builder
	for i, ins := range prog {
		fmt.Fprintf(&b, "(%03d) %v\n", i, ins)
	}
	return b.String()
}

func accepts(tb testing.TB, vm *bpf.VM, frame []byte) bool {
	tb.Helper()
	n, err := vm.Run(frame)
	if err != nil {
		tb.Fatalf("VM: %v", err)
	}
	return n > 0
}

// TestAcceptReject runs each expression over the frame corpus in
// every link type that can carry the frame, and compares the frames accepted
// with the expected ones. The tables mirror libpcap's semantics, which the
// tcpdump comparison test checks independently.
func TestAcceptReject(t *testing.T) {
	all := func() []string {
		var names []string
		for _, f := range testFrames() {
			names = append(names, f.name)
		}
		return names
	}
	ip4 := []string{"tcp4", "udp4-dns", "sctp4", "icmp4", "igmp4", "gre4", "tcp4-options", "udp4-first-frag", "udp4-later-frag", "tcp4-truncated"}
	ip6 := []string{"tcp6", "udp6-dns", "sctp6", "icmp6", "tcp6-frag", "udp6-hbh", "udp6-mapped"}
	cases := []struct {
		expr string
		want []string
	}{
		{"", all()},
		{"ip", ip4},
		{"ip6", ip6},
		{"arp", []string{"arp-request"}},
		{"rarp", []string{"rarp"}},
		{"tcp", []string{"tcp4", "tcp4-options", "tcp4-truncated", "tcp6", "tcp6-frag"}},
		{"udp", []string{"udp4-dns", "udp4-first-frag", "udp4-later-frag", "udp6-dns", "udp6-mapped"}},
		{"sctp", []string{"sctp4", "sctp6"}},
		{"icmp", []string{"icmp4"}},
		{"icmp6", []string{"icmp6"}},
		{"igmp", []string{"igmp4"}},
		{"ip proto 47", []string{"gre4"}},
		{"proto 6", []string{"tcp4", "tcp4-options", "tcp4-truncated", "tcp6", "tcp6-frag"}},
		{`ip6 proto \udp`, []string{"udp6-dns", "udp6-mapped"}},
		{"ip6 proto 0", []string{"udp6-hbh"}},
		{"port 80", []string{"tcp4", "tcp6"}},
		{"port 53", []string{"udp4-dns", "udp4-first-frag", "udp6-dns"}},
		{"src port 53", []string{"udp4-dns", "udp4-first-frag"}},
		{"dst port 53", []string{"udp6-dns"}},
		{"udp port 53 or 1000", []string{"udp4-dns", "udp4-first-frag", "udp6-dns"}},
		{"tcp port 443", []string{"tcp4-options"}},
		{"tcp src port 443", []string{"tcp4-options"}},
		{"tcp dst port 443", nil},
		{"sctp port 6000", []string{"sctp4", "sctp6"}},
		{"portrange 5000-5999", []string{"sctp4", "sctp6"}},
		{"dst portrange 1000-1024", []string{"tcp4-options", "udp4-first-frag"}},
		{"src and dst port 53", nil},
		{"src or dst port 6000", []string{"sctp4", "sctp6"}},
		{"host 192.0.2.1", []string{"tcp4", "udp4-dns", "sctp4", "icmp4", "udp4-first-frag", "udp4-later-frag", "tcp4-truncated", "arp-request", "rarp"}},
		{"ip host 192.0.2.1", []string{"tcp4", "udp4-dns", "sctp4", "icmp4", "udp4-first-frag", "udp4-later-frag", "tcp4-truncated"}},
		{"arp host 192.0.2.1", []string{"arp-request"}},
		{"src host 192.0.2.1", []string{"tcp4", "sctp4", "udp4-first-frag", "udp4-later-frag", "tcp4-truncated", "arp-request"}},
		{"dst 192.0.2.1", []string{"udp4-dns", "icmp4", "rarp"}},
		{"host 2001:db8::1", []string{"tcp6", "udp6-dns", "sctp6", "icmp6", "tcp6-frag", "udp6-hbh", "udp6-mapped"}},
		{"src host 2001:db8::1", []string{"tcp6", "sctp6", "tcp6-frag", "udp6-hbh"}},
		{"ip6 dst host 2001:db8::1", []string{"udp6-dns", "icmp6", "udp6-mapped"}},
		{"host ::ffff:192.0.2.1", []string{"udp6-mapped"}},
		{"net 10.0.0.0/8", []string{"sctp4", "icmp4", "igmp4", "gre4", "tcp4-options", "arp-request"}},
		{"net 10.1", []string{"sctp4", "icmp4", "igmp4", "gre4", "tcp4-options", "arp-request"}},
		{"src net 10.1.0.0 mask 255.255.0.0", []string{"icmp4", "igmp4", "tcp4-options"}},
		{"net 2001:db8:8000::/33", []string{"tcp6", "udp6-dns", "sctp6", "icmp6", "tcp6-frag", "udp6-hbh"}},
		{"dst net 2001:db8::/33", []string{"udp6-dns", "icmp6", "udp6-mapped"}},
		{"net 0.0.0.0/0", append(slices.Clone(ip4), "arp-request", "rarp")},
		{"src and dst net 192.0.0.0/2", []string{"tcp4", "udp4-dns", "tcp4-truncated", "udp4-first-frag", "udp4-later-frag", "rarp"}},
		{"not ip", append(slices.Clone(ip6), "tcp4-vlan", "arp-request", "rarp", "lldp")},
		{"! tcp && ! udp && ip", []string{"sctp4", "icmp4", "igmp4", "gre4"}},
		{"tcp or udp and ip6", []string{"tcp6", "tcp6-frag", "udp6-dns", "udp6-mapped"}},
		{"tcp or (udp and ip6)", []string{"tcp4", "tcp4-options", "tcp4-truncated", "tcp6", "tcp6-frag", "udp6-dns", "udp6-mapped"}},
		{"host 192.0.2.1 and not 198.51.100.2", []string{"sctp4", "icmp4", "arp-request"}},
	}
	frames := testFrames()
	for _, lt := range linkTypes {
		for _, c := range cases {
			var want, got []string
			var rejectsAll bool
			vm, err := loadVM(t, c.expr, lt)
			if err != nil {
				var fe *Error
				if !errors.As(err, &fe) || !strings.Contains(fe.Msg, "rejects all") {
					t.Errorf("%v %q: %v", lt, c.expr, err)
					continue
				}
				rejectsAll = true
			}
			for _, f := range frames {
				data := wrap(f, lt)
				if data == nil {
					continue
				}
				if slices.Contains(c.want, f.name) {
					want = append(want, f.name)
				}
				if !rejectsAll && accepts(t, vm, data) {
					got = append(got, f.name)
				}
			}
			if rejectsAll && len(want) > 0 {
				t.Errorf("%v %q: compiler says it rejects all, want %v", lt, c.expr, want)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%v %q:\n got %v\nwant %v", lt, c.expr, got, want)
			}
		}
	}
}

// TestLength checks less and greater against the frames' lengths.
func TestLength(t *testing.T) {
	for _, lt := range linkTypes {
		for _, limit := range []int{0, 58, 60, 100, 1500} {
			less, err := loadVM(t, fmt.Sprintf("less %d", limit), lt)
			if err != nil {
				t.Fatal(err)
			}
			greater, err := loadVM(t, fmt.Sprintf("greater %d", limit), lt)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range testFrames() {
				data := wrap(f, lt)
				if data == nil {
					continue
				}
				if got, want := accepts(t, less, data), len(data) <= limit; got != want {
					t.Errorf("%v less %d, %s (%d bytes): %v", lt, limit, f.name, len(data), got)
				}
				if got, want := accepts(t, greater, data), len(data) >= limit; got != want {
					t.Errorf("%v greater %d, %s (%d bytes): %v", lt, limit, f.name, len(data), got)
				}
			}
		}
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		expr string
		lt   flow.LinkType
		pos  int    // expected Error.Pos; -1 for a non-Error
		msg  string // substring of the message
	}{
		{"tcp udp", flow.LinkEthernet, 4, `expected "and" or "or"`},
		{"tcp and", flow.LinkEthernet, 7, "expected a primitive before end of filter"},
		{"(tcp", flow.LinkEthernet, 4, `expected ")"`},
		{"tcp)", flow.LinkEthernet, 3, `unexpected ")"`},
		{"()", flow.LinkEthernet, 1, "expected a primitive"},
		{"1.2.3.4", flow.LinkEthernet, 0, "neither a keyword"},
		{"tcp or 80", flow.LinkEthernet, 7, "neither a keyword"},
		{"host example.com", flow.LinkEthernet, 5, "not an IPv4 or IPv6 address"},
		{"host 10", flow.LinkEthernet, 5, "not an IPv4 or IPv6 address"},
		{"port http", flow.LinkEthernet, 5, "port names are not resolved"},
		{"port 70000", flow.LinkEthernet, 5, "port number 70000 > 65535"},
		{"portrange 1-", flow.LinkEthernet, 10, "not N-N"},
		{"ip port 80", flow.LinkEthernet, 0, `illegal qualifier "ip"`},
		{"tcp host 1.2.3.4", flow.LinkEthernet, 0, `"tcp" modifier applied to host`},
		{"ip host 2001:db8::1", flow.LinkEthernet, 0, `"ip" modifier applied to IPv6`},
		{"net 10.1.2.3/8", flow.LinkEthernet, 4, "non-network bits"},
		{"net 10.0.0.0/33", flow.LinkEthernet, 4, "prefix length"},
		{"net 2001:db8:: mask 255.0.0.0", flow.LinkEthernet, 15, "IPv4 networks only"},
		{"net 10.0.0.0/8 mask 255.0.0.0", flow.LinkEthernet, 15, "not both"},
		{"tcp proto 6", flow.LinkEthernet, 0, "bogus"},
		{"proto 300", flow.LinkEthernet, 6, "0 to 255"},
		{"src proto 6", flow.LinkEthernet, 10, "do not apply to proto"},
		{"ether host 02:00:00:00:00:01", flow.LinkEthernet, 0, "Ethernet addresses"},
		{"vlan 100", flow.LinkEthernet, 0, "VLAN"},
		{"tcp[13] & 2 != 0", flow.LinkEthernet, 3, "packet data accessors"},
		{"len > 100", flow.LinkEthernet, 4, "arithmetic and comparisons"},
		{"len", flow.LinkEthernet, 0, "packet length arithmetic"},
		{"ip and $x", flow.LinkEthernet, 7, "unexpected character"},
		{"arp", flow.LinkRaw, 0, "rejects all"},
		{"tcp && arp", flow.LinkIPv4, 0, "rejects all"},
		{"ip6", flow.LinkIPv4, 0, "rejects all"},
		{"tcp", flow.LinkNull, -1, "not supported by the filter compiler"},
		{strings.Repeat("(", 300) + "tcp" + strings.Repeat(")", 300), flow.LinkEthernet, 201, "nested more than"},
	}
	for _, c := range cases {
		_, err := Compile(c.expr, c.lt, 0)
		if err == nil {
			t.Errorf("%q: compiled, want an error", c.expr)
			continue
		}
		if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: error %q, want it to say %q", c.expr, err, c.msg)
		}
		var fe *Error
		switch {
		case c.pos < 0 && errors.As(err, &fe):
			t.Errorf("%q: Error %v, want another error", c.expr, err)
		case c.pos >= 0 && !errors.As(err, &fe):
			t.Errorf("%q: %T %v, want a *Error", c.expr, err, err)
		case c.pos >= 0 && fe.Pos != c.pos:
			t.Errorf("%q: error at %d (%v), want %d", c.expr, fe.Pos, err, c.pos)
		}
	}
}

// TestSnapLen checks the accept value and the default.
func TestSnapLen(t *testing.T) {
	for _, c := range []struct{ in, want int }{{0, DefaultSnapLen}, {-1, DefaultSnapLen}, {96, 96}} {
		raw, err := Compile("", flow.LinkEthernet, c.in)
		if err != nil {
			t.Fatal(err)
		}
		want := []bpf.RawInstruction{{Op: 0x06, K: uint32(c.want)}} // ret #snaplen
		if !slices.Equal(raw, want) {
			t.Errorf("snaplen %d: %v, want %v", c.in, raw, want)
		}
	}
}

// TestLongJumps builds a filter too long for 8-bit conditional
// jumps and checks it still decides right.
func TestLongJumps(t *testing.T) {
	var terms []string
	for p := 1; p <= 60; p++ {
		terms = append(terms, fmt.Sprintf("port %d", 10000+p))
	}
	expr := "(" + strings.Join(terms, " or ") + ") or port 80"
	vm, err := loadVM(t, expr, flow.LinkEthernet)
	if err != nil {
		t.Fatal(err)
	}
	prog, _ := Compile(expr, flow.LinkEthernet, 0)
	if len(prog) < 512 {
		t.Fatalf("program has %d instructions: too short to test long jumps", len(prog))
	}
	for _, f := range testFrames() {
		want := f.name == "tcp4" || f.name == "tcp6"
		if got := accepts(t, vm, wrap(f, flow.LinkEthernet)); got != want {
			t.Errorf("%s: accepted %v, want %v", f.name, got, want)
		}
	}
	if _, err := Compile(strings.Repeat("port 1 or ", 400)+"port 2", flow.LinkEthernet, 0); err == nil || !strings.Contains(err.Error(), "more than the kernel's 4096") {
		t.Errorf("oversized filter: %v, want a length error", err)
	}
}

// tcpdumpExprs are compared with tcpdump frame by frame.
var tcpdumpExprs = []string{
	"ip", "ip6", "arp", "rarp", "tcp", "udp", "sctp", "icmp", "icmp6", "igmp",
	"ip proto 47", "proto 6", `ip6 proto \udp`, "ip6 proto 0", "ip6 proto 44",
	"port 80", "port 53", "src port 53", "dst port 53", "udp port 53 or 1000", "tcp port 443",
	"tcp src port 443", "sctp port 6000", "portrange 5000-5999", "dst portrange 1024-1000",
	"src and dst port 53", "src or dst port 6000", "dst or src port 0x50", "port 0120",
	"host 192.0.2.1", "ip host 192.0.2.1", "arp host 192.0.2.1", "rarp src host 198.51.100.2",
	"src host 192.0.2.1", "dst 192.0.2.1", "ip dst 192.0.2.1", "host 2001:db8::1", "src host 2001:db8::1",
	"ip6 dst host 2001:db8::1", "host ::ffff:192.0.2.1", "net 10.0.0.0/8", "net 10.1", "net 10.1/16",
	"src net 10.1.0.0 mask 255.255.0.0", "net 198.51.100.0 mask 255.255.255.0", "net 2001:db8:8000::/33",
	"dst net 2001:db8::/33", "net ::/0", "net 0.0.0.0/0", "ip6 net 2001:db8::/32", "arp net 10.0/8",
	"src and dst net 192.0.0.0/2",
	"not ip", "! tcp && ! udp && ip", "tcp or udp and ip6", "tcp or (udp and ip6)", "not (tcp or udp)",
	"host 192.0.2.1 and not 198.51.100.2", "port 80 or host 10.1.2.3 or 198.51.100.2", "not port 53 and 1000",
	"tcp and (port 80 or 443)", "less 60", "greater 100", "not less 100 and ip6",
	"icmp6 and net ::/0", "tcp and udp", "udp and arp", "ip and not net 10.0.0.0/8 and not port 80", "udp and (src port 53 or dst port 53)",
}

// TestMatchesTcpdump writes the frame corpus to a pcap per link
// type, lets tcpdump (libpcap's compiler) filter it with each expression, and
// checks that our program accepts exactly the same frames.
func TestMatchesTcpdump(t *testing.T) {
	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil {
		testutil.SkipOrFail(t, "tcpdump not installed (Debian package tcpdump): cannot compare with libpcap's compiler")
	}
	dir := t.TempDir()
	pcapLinkTypes := map[flow.LinkType]layers.LinkType{
		flow.LinkEthernet:  layers.LinkTypeEthernet,
		flow.LinkLinuxSLL:  layers.LinkTypeLinuxSLL,
		flow.LinkLinuxSLL2: layers.LinkType(flow.LinkLinuxSLL2),
		flow.LinkRaw:       layers.LinkTypeRaw,
		flow.LinkIPv4:      layers.LinkTypeIPv4,
		flow.LinkIPv6:      layers.LinkTypeIPv6,
	}
	compared, refused, frames := 0, 0, 0
	for _, lt := range linkTypes {
		var corpus [][]byte
		for _, f := range testFrames() {
			if data := wrap(f, lt); data != nil {
				corpus = append(corpus, data)
			}
		}
		path := fmt.Sprintf("%s/%v.pcap", dir, lt)
		writePcap(t, path, pcapLinkTypes[lt], corpus)
		for _, expr := range tcpdumpExprs {
			cmd := exec.Command(tcpdump, "-n", "-r", path, "-w", "-", expr)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			runErr := cmd.Run()
			vm, ourErr := loadVM(t, expr, lt)
			if runErr != nil && ourErr == nil && strings.Contains(stderr.String(), "expression rejects all packets") {
				// libpcap's optimizer proves some contradictions ("tcp and
				// udp") that constant folding here does not: the program
				// must still reject every frame.
				for _, data := range corpus {
					if accepts(t, vm, data) {
						t.Errorf("%v %q: tcpdump says it rejects all packets, we accept % x", lt, expr, data)
					}
				}
				compared++
				continue
			}
			if runErr != nil || ourErr != nil {
				if runErr == nil || ourErr == nil {
					t.Errorf("%v %q: tcpdump: %v %s; ours: %v", lt, expr, runErr, strings.TrimSpace(stderr.String()), ourErr)
				}
				refused++ // both refuse: they agree
				continue
			}
			theirs := readPcap(t, stdout.Bytes())
			var ours [][]byte
			for _, data := range corpus {
				if accepts(t, vm, data) {
					ours = append(ours, data)
				}
			}
			if !slices.EqualFunc(theirs, ours, bytes.Equal) {
				t.Errorf("%v %q: tcpdump accepts %d frames, we accept %d:\ntcpdump: %s\nours:    %s",
					lt, expr, len(theirs), len(ours), frameNames(lt, theirs), frameNames(lt, ours))
			}
			compared++
			frames += len(corpus)
		}
	}
	t.Logf("tcpdump and we agree on %d (expression, link type) pairs: %d compared frame by frame (%d verdicts), %d refused by both",
		compared+refused, compared, frames, refused)
}

func frameNames(lt flow.LinkType, accepted [][]byte) string {
	var names []string
	for _, f := range testFrames() {
		data := wrap(f, lt)
		if data != nil && slices.ContainsFunc(accepted, func(b []byte) bool { return bytes.Equal(b, data) }) {
			names = append(names, f.name)
		}
	}
	return strings.Join(names, " ")
}

func writePcap(tb testing.TB, path string, lt layers.LinkType, frames [][]byte) {
	tb.Helper()
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	if err := w.WriteFileHeader(65535, lt); err != nil {
		tb.Fatal(err)
	}
	ts := time.Unix(1700000000, 0)
	for i, data := range frames {
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(data), Length: len(data)}
		if err := w.WritePacket(ci, data); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func readPcap(tb testing.TB, data []byte) [][]byte {
	tb.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(data))
	if err != nil {
		tb.Fatalf("reading tcpdump's output: %v", err)
	}
	var out [][]byte
	for {
		d, _, err := r.ReadPacketData()
		if err != nil {
			return out
		}
		out = append(out, d)
	}
}

package pcapfilter

// A compiler from a subset of pcap-filter(7) to classic BPF, so that a live
// capture can drop unwanted frames in the kernel without tying the build to
// libpcap through cgo.
//
// The generated programs test what libpcap's do for the same expression (the
// tests run both over the same frames), without libpcap's optimizer: they are
// a little longer, which costs nothing that matters next to a system call.

import (
	"fmt"

	"golang.org/x/net/bpf"

	"github.com/flowdedup/flowdedup/flow"
)

// MaxInstructions is the longest program the kernel accepts (BPF_MAXINSNS).
const MaxInstructions = 4096

// DefaultSnapLen is what an accepting program returns when Compile is
// given no snap length: libpcap's largest, so the whole frame.
const DefaultSnapLen = 262144

// Error reports a filter expression that Compile rejects, and where.
type Error struct {
	Expr string // the whole expression
	Pos  int    // byte offset in Expr of the fault; len(Expr) when the expression ended too soon
	Msg  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("capture: filter %q: column %d: %s", e.Expr, e.Pos+1, e.Msg)
}

// Compile compiles expr, a filter in the pcap-filter(7) language, to a
// classic BPF program for frames of link type lt. The program returns
// snaplen (DefaultSnapLen when snaplen <= 0) for a frame it accepts, so
// attached to a socket it also cuts frames to the snap length, and 0 for a
// frame it rejects. An empty expression accepts every frame.
//
// Link types: Ethernet, Linux SLL and SLL2, raw IP (LinkRaw, LinkIPv4,
// LinkIPv6). As in libpcap, the link header is not walked: on Ethernet, "ip"
// means EtherType 0x0800 right after the MAC addresses, so frames with VLAN
// tags match none of the primitives below.
//
// The language is libpcap's, less what a flow deduplicator does not need:
//
//	expr      = term { ("and" | "&&" | "or" | "||") term }
//	term      = ("not" | "!") term | "(" expr ")" | primitive | ID
//	primitive = proto
//	          | [proto] [dir] type ID
//	          | [ip | ip6 | arp | rarp] dir ID                 (type host)
//	          | (ip | ip6 | arp | rarp) ID                     (type host)
//	          | [ip | ip6] "proto" PROTO
//	          | "less" N | "greater" N                          (frame length)
//	proto     = ip | ip6 | arp | rarp | tcp | udp | sctp | icmp | icmp6 | igmp
//	dir       = src | dst | "src or dst" | "src and dst"
//	type      = host ADDR | net NET | port N | portrange N-N
//	NET       = ADDR/LEN | ADDR mask ADDR | IPv4 prefix of 1 to 3 octets ("10.1" is 10.1.0.0/16)
//	PROTO     = a number, or \tcp \udp \sctp \icmp \icmp6 \igmp
//
// Precedence is libpcap's: "not" binds tightest, "and" and "or" bind equally
// and group from the left ("a or b and c" is "(a or b) and c"). Terms must be
// joined by an operator: "tcp udp" is an error, as in libpcap. A bare ID after
// an operator takes the qualifiers of the previous primitive: "port 80 or 443"
// is "port 80 or port 443", "host a and not b" is "host a and not host b".
//
// Semantics follow libpcap: "tcp", "udp", "sctp", "icmp6" and "proto N" also
// match an IPv6 packet whose first header is a fragment header followed by
// that protocol; "port" and "portrange" read the ports of IPv4 packets past
// the IHL-sized header and never match non-first fragments, and read IPv6
// ports only when the next header right after the fixed header is TCP, UDP
// or SCTP; "host" and "net" with an IPv4 address and no protocol qualifier
// also match ARP and RARP sender and target addresses. An expression that
// can match no frame of lt is an error, as in libpcap ("arp" on raw IP).
//
// Not supported, each an *Error naming it: host and port names (give
// numbers: nothing is resolved), Ethernet addresses, vlan/mpls/pppoe, packet
// data accessors and arithmetic (tcp[13] & 2 != 0), and the rest of the
// qualifiers pcap-filter(7) lists. Also unlike libpcap, "host" takes only a
// whole address and "proto" only a number below 256.
func Compile(expr string, lt flow.LinkType, snaplen int) ([]bpf.RawInstruction, error) {
	prog, err := compile(expr, lt, snaplen)
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("capture: filter %q: assembling: %w", expr, err)
	}
	return raw, nil
}

// compile is Compile before assembly, as golang.org/x/net/bpf's VM and
// the tests want it.
func compile(expr string, lt flow.LinkType, snaplen int) ([]bpf.Instruction, error) {
	if snaplen <= 0 {
		snaplen = DefaultSnapLen
	}
	link, err := linkLayerOf(lt)
	if err != nil {
		return nil, err
	}
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	e := trueNode
	if len(toks) > 1 { // more than the end token
		p := &parser{expr: expr, toks: toks, link: link}
		if e, err = p.parse(); err != nil {
			return nil, err
		}
		if e.op == opFalse {
			return nil, &Error{Expr: expr, Pos: 0, Msg: fmt.Sprintf("expression rejects all %v frames", lt)}
		}
	}
	prog, err := generate(e, uint32(snaplen))
	if err != nil {
		return nil, &Error{Expr: expr, Pos: 0, Msg: err.Error()}
	}
	return prog, nil
}

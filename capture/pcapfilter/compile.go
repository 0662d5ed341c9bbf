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
	"net/netip"
	"strconv"
	"strings"

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

// --- Boolean expressions over single loads and comparisons ---

type nodeOp uint8

const (
	opTest nodeOp = iota
	opAnd
	opOr
	opNot
	opTrue
	opFalse
)

type node struct {
	op   nodeOp
	l, r *node
	test check
}

var (
	trueNode  = &node{op: opTrue}
	falseNode = &node{op: opFalse}
)

type loadKind uint8

const (
	loadAbs  loadKind = iota // A = P[off:off+size]
	loadIPv4                 // X = 4*(P[ihl]&0xf); A = P[X+off:X+off+size]: past the IPv4 header
	loadLen                  // A = the frame's length on the wire
)

// check loads a value into A, masks it and compares it with val.
type check struct {
	kind loadKind
	size int    // 1, 2 or 4 bytes
	off  uint32 // where to load from (for loadIPv4, past the IPv4 header)
	ihl  uint32 // loadIPv4: offset of the IPv4 header's version/IHL byte
	mask uint32 // AND with A before comparing; 0 for none
	cond bpf.JumpTest
	val  uint32
}

func cmp(size int, off uint32, cond bpf.JumpTest, val uint32) *node {
	return &node{op: opTest, test: check{kind: loadAbs, size: size, off: off, cond: cond, val: val}}
}

func masked(size int, off, mask, val uint32) *node {
	switch {
	case mask == 0:
		return trueNode
	case uint64(mask) == 1<<(8*uint(size))-1:
		mask = 0 // the load brings in no other bits
	}
	return &node{op: opTest, test: check{kind: loadAbs, size: size, off: off, mask: mask, cond: bpf.JumpEqual, val: val}}
}

// The constructors fold constants, so that a primitive the link type cannot
// carry (arp on raw IP) leaves no code behind.

func and(a, b *node) *node {
	switch {
	case a.op == opFalse || b.op == opFalse:
		return falseNode
	case a.op == opTrue:
		return b
	case b.op == opTrue:
		return a
	}
	return &node{op: opAnd, l: a, r: b}
}

func or(a, b *node) *node {
	switch {
	case a.op == opTrue || b.op == opTrue:
		return trueNode
	case a.op == opFalse:
		return b
	case b.op == opFalse:
		return a
	}
	return &node{op: opOr, l: a, r: b}
}

func not(a *node) *node {
	switch a.op {
	case opTrue:
		return falseNode
	case opFalse:
		return trueNode
	case opNot:
		return a.l
	}
	return &node{op: opNot, l: a}
}

func allOf(es ...*node) *node {
	out := trueNode
	for _, e := range es {
		out = and(out, e)
	}
	return out
}

func anyOf(es ...*node) *node {
	out := falseNode
	for _, e := range es {
		out = or(out, e)
	}
	return out
}

// --- Link layers ---

// EtherTypes and IP protocol numbers the primitives test.
const (
	etherIPv4 = 0x0800
	etherARP  = 0x0806
	etherRARP = 0x8035
	etherIPv6 = 0x86dd

	protoICMP   = 1
	protoIGMP   = 2
	protoTCP    = 6
	protoUDP    = 17
	protoFrag6  = 44
	protoICMPv6 = 58
	protoSCTP   = 132
)

// linkLayer says where a link type keeps the network protocol and header.
type linkLayer struct {
	lt      flow.LinkType
	nl      uint32 // offset of the network-layer header
	typeOff int    // offset of a 16-bit EtherType; -1 when there is none
}

func linkLayerOf(lt flow.LinkType) (linkLayer, error) {
	switch lt {
	case flow.LinkEthernet:
		return linkLayer{lt: lt, nl: 14, typeOff: 12}, nil
	case flow.LinkLinuxSLL:
		return linkLayer{lt: lt, nl: 16, typeOff: 14}, nil
	case flow.LinkLinuxSLL2:
		return linkLayer{lt: lt, nl: 20, typeOff: 0}, nil
	case flow.LinkRaw, flow.LinkIPv4, flow.LinkIPv6:
		return linkLayer{lt: lt, nl: 0, typeOff: -1}, nil
	}
	return linkLayer{}, fmt.Errorf("capture: filter: link type %v is not supported by the filter compiler (Ethernet, Linux SLL/SLL2 and raw IP are)", lt)
}

// network is the test "the frame carries network protocol t" (an EtherType).
func (l linkLayer) network(t uint16) *node {
	if l.typeOff >= 0 {
		return cmp(2, uint32(l.typeOff), bpf.JumpEqual, uint32(t))
	}
	var version uint32
	switch {
	case t == etherIPv4 && l.lt == flow.LinkIPv4, t == etherIPv6 && l.lt == flow.LinkIPv6:
		return trueNode
	case t == etherIPv4 && l.lt == flow.LinkRaw:
		version = 4
	case t == etherIPv6 && l.lt == flow.LinkRaw:
		version = 6
	default:
		return falseNode
	}
	return masked(1, 0, 0xf0, version<<4)
}

// ipProto is "IPv4 with protocol v".
func (l linkLayer) ipProto(v uint32) *node {
	return and(l.network(etherIPv4), cmp(1, l.nl+9, bpf.JumpEqual, v))
}

// ip6Proto is "IPv6 whose next header is v, directly or after a fragment
// header", as libpcap tests it.
func (l linkLayer) ip6Proto(v uint32) *node {
	next := cmp(1, l.nl+6, bpf.JumpEqual, v)
	if v != protoFrag6 {
		next = or(next, and(cmp(1, l.nl+6, bpf.JumpEqual, protoFrag6), cmp(1, l.nl+40, bpf.JumpEqual, v)))
	}
	return and(l.network(etherIPv6), next)
}

// dir is a direction qualifier.
type dir uint8

const (
	dirAny  dir = iota // src or dst (the default)
	dirBoth            // src and dst
	dirSrc
	dirDst
)

func (d dir) join(src, dst *node) *node {
	switch d {
	case dirSrc:
		return src
	case dirDst:
		return dst
	case dirBoth:
		return and(src, dst)
	}
	return or(src, dst)
}

// addr tests a masked address at off; addr and mask are 4 or 16 bytes.
func matchAddr(off uint32, addr, mask []byte) *node {
	e := trueNode
	for i := 0; i < len(addr); i += 4 {
		w := uint32(addr[i])<<24 | uint32(addr[i+1])<<16 | uint32(addr[i+2])<<8 | uint32(addr[i+3])
		m := uint32(mask[i])<<24 | uint32(mask[i+1])<<16 | uint32(mask[i+2])<<8 | uint32(mask[i+3])
		e = and(e, masked(4, off+uint32(i), m, w))
	}
	return e
}

// --- Lexer ---

type tokKind uint8

const (
	tokWord tokKind = iota
	tokLParen
	tokRParen
	tokNot
	tokAnd
	tokOr
	tokEnd
)

type token struct {
	kind tokKind
	text string
	pos  int
}

func (t token) String() string {
	if t.kind == tokEnd {
		return "end of filter"
	}
	return strconv.Quote(t.text)
}

func wordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == ':' || c == '/' || c == '-' || c == '_' || c == '\\'
}

func lex(expr string) ([]token, error) {
	var toks []token
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(':
			toks = append(toks, token{tokLParen, "(", i})
			i++
		case c == ')':
			toks = append(toks, token{tokRParen, ")", i})
			i++
		case c == '!' && !strings.HasPrefix(expr[i:], "!="):
			toks = append(toks, token{tokNot, "!", i})
			i++
		case strings.HasPrefix(expr[i:], "&&"):
			toks = append(toks, token{tokAnd, "&&", i})
			i += 2
		case strings.HasPrefix(expr[i:], "||"):
			toks = append(toks, token{tokOr, "||", i})
			i += 2
		case wordByte(c):
			j := i
			for j < len(expr) && wordByte(expr[j]) {
				j++
			}
			w := expr[i:j]
			kind := tokWord
			switch w {
			case "and":
				kind = tokAnd
			case "or":
				kind = tokOr
			case "not":
				kind = tokNot
			}
			toks = append(toks, token{kind, w, i})
			i = j
		case c == '[':
			return nil, &Error{expr, i, "packet data accessors such as tcp[13] are not supported"}
		case strings.IndexByte("=<>&|+-*%^~", c) >= 0 || c == '!':
			return nil, &Error{expr, i, fmt.Sprintf("arithmetic and comparisons (%q) are not supported", c)}
		default:
			return nil, &Error{expr, i, fmt.Sprintf("unexpected character %q", c)}
		}
	}
	return append(toks, token{kind: tokEnd, pos: len(expr)}), nil
}

// --- Parser ---

// qual is the qualifiers of a primitive, kept so that a bare ID after an
// operator can reuse them.
type qual struct {
	proto    string // "" when not given
	protoPos int
	dir      dir
	dirSet   bool
	typ      string // "" when not given: host
}

type parser struct {
	expr string
	toks []token
	i    int
	link linkLayer
	// last holds the qualifiers of the latest qualified primitive and
	// afterOp says an operator came since it: then a bare ID reuses them.
	last    *qual
	afterOp bool
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEnd {
		p.i++
	}
	return t
}

func (p *parser) errAt(pos int, format string, args ...any) error {
	return &Error{Expr: p.expr, Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) parse() (*node, error) {
	e, err := p.parseExpr(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEnd {
		return nil, p.errAt(t.pos, "unexpected %v", t)
	}
	return e, nil
}

// maxDepth bounds the nesting of parentheses and negations, so that no
// input can exhaust the stack.
const maxDepth = 200

func (p *parser) parseExpr(depth int) (*node, error) {
	x, err := p.parseTerm(depth)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch t.kind {
		case tokAnd, tokOr:
			p.next()
			p.afterOp = true
			y, err := p.parseTerm(depth)
			if err != nil {
				return nil, err
			}
			if t.kind == tokAnd {
				x = and(x, y)
			} else {
				x = or(x, y)
			}
		case tokRParen, tokEnd:
			return x, nil
		default:
			return nil, p.errAt(t.pos, "expected \"and\" or \"or\" before %v", t)
		}
	}
}

func (p *parser) parseTerm(depth int) (*node, error) {
	if depth > maxDepth {
		return nil, p.errAt(p.peek().pos, "nested more than %d deep", maxDepth)
	}
	t := p.peek()
	switch t.kind {
	case tokNot:
		p.next()
		x, err := p.parseTerm(depth + 1)
		if err != nil {
			return nil, err
		}
		return not(x), nil
	case tokLParen:
		p.next()
		p.afterOp = false
		x, err := p.parseExpr(depth + 1)
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tokRParen {
			return nil, p.errAt(c.pos, "expected \")\" before %v", c)
		}
		return x, nil
	case tokWord:
		x, err := p.parsePrimitive()
		p.afterOp = false
		return x, err
	}
	return nil, p.errAt(t.pos, "expected a primitive before %v", t)
}

var protoKeywords = map[string]bool{
	"ip": true, "ip6": true, "arp": true, "rarp": true, "tcp": true, "udp": true,
	"sctp": true, "icmp": true, "icmp6": true, "igmp": true,
}

var typeKeywords = map[string]bool{"host": true, "net": true, "port": true, "portrange": true, "proto": true}

// unsupported lists pcap-filter(7) keywords this compiler knows it lacks.
var unsupported = map[string]string{
	"ether": "Ethernet addresses and types", "link": "link-layer primitives", "fddi": "FDDI", "tr": "Token Ring", "wlan": "802.11",
	"vlan": "VLAN tags", "mpls": "MPLS labels", "pppoed": "PPPoE", "pppoes": "PPPoE", "geneve": "Geneve", "vxlan": "VXLAN",
	"gateway": "gateway", "broadcast": "broadcast", "multicast": "multicast", "len": "packet length arithmetic",
	"inbound": "direction", "outbound": "direction", "ifindex": "interface", "ifname": "interface", "on": "pflog", "rnr": "pflog",
	"srnr": "pflog", "reason": "pflog", "rset": "pflog", "ruleset": "pflog", "action": "pflog", "protochain": "protocol chains",
	"decnet": "DECnet", "atalk": "AppleTalk", "aarp": "AppleTalk", "iso": "ISO", "esis": "ISO", "isis": "ISO", "clnp": "ISO",
	"stp": "STP", "ipx": "IPX", "netbeui": "NetBEUI", "lat": "LAT", "mopdl": "MOP", "moprc": "MOP", "sca": "SCA", "llc": "LLC",
	"ah": "AH", "esp": "ESP", "pim": "PIM", "vrrp": "VRRP", "carp": "CARP", "radio": "802.11", "type": "802.11",
	"subtype": "802.11", "dir": "802.11", "addr1": "802.11", "addr2": "802.11", "addr3": "802.11", "addr4": "802.11",
	"ra": "802.11", "ta": "802.11", "bssid": "802.11", "hdpmf": "802.11", "icmptype": "ICMP fields", "tcpflags": "TCP flags",
}

// keyword tells a word the grammar reserves from an ID.
func (p *parser) keyword(t token) bool {
	if t.kind != tokWord {
		return false
	}
	_, unsupported := unsupported[t.text]
	return protoKeywords[t.text] || typeKeywords[t.text] || unsupported ||
		t.text == "src" || t.text == "dst" || t.text == "less" || t.text == "greater" || t.text == "mask"
}

func (p *parser) parsePrimitive() (*node, error) {
	t := p.peek()
	if what, ok := unsupported[t.text]; ok {
		return nil, p.errAt(t.pos, "%q (%s) is not supported by flowdedup's filter compiler", t.text, what)
	}
	if t.text == "less" || t.text == "greater" {
		p.next()
		p.last = nil
		n, err := p.number("a frame length", 1<<32-1)
		if err != nil {
			return nil, err
		}
		length := &node{op: opTest, test: check{kind: loadLen, cond: bpf.JumpGreaterThan, val: n}}
		if t.text == "less" {
			return not(length), nil // len <= n
		}
		length.test.cond = bpf.JumpGreaterOrEqual
		return length, nil
	}
	if !p.keyword(t) {
		// A bare ID: it takes the qualifiers of the previous primitive.
		if p.last == nil || !p.afterOp {
			return nil, p.errAt(t.pos, "%v is neither a keyword nor preceded by one (host names are not resolved: write \"host ADDR\", \"port N\"...)", t)
		}
		q := *p.last
		return p.qualified(q)
	}

	var q qual
	if protoKeywords[t.text] {
		p.next()
		q.proto, q.protoPos = t.text, t.pos
		if n := p.peek(); n.kind == tokWord && (!p.keyword(n) || n.text == "src" || n.text == "dst" || typeKeywords[n.text]) {
			return p.qualified(q)
		}
		// A protocol on its own.
		p.last = nil
		return p.protocol(q.proto), nil
	}
	return p.qualified(q)
}

// qualified parses the rest of "[proto] [dir] [type] ID" after the protocol
// qualifier, if any, and builds it.
func (p *parser) qualified(q qual) (*node, error) {
	if t := p.peek(); t.text == "src" || t.text == "dst" {
		p.next()
		q.dirSet = true
		q.dir = dirSrc
		if t.text == "dst" {
			q.dir = dirDst
		}
		// "src or dst" and "src and dst" are one qualifier, read ahead.
		if op := p.peek(); op.kind == tokAnd || op.kind == tokOr {
			if other := p.toks[p.i+1]; other.kind == tokWord && (other.text == "src" || other.text == "dst") && other.text != t.text {
				p.next()
				p.next()
				q.dir = dirAny
				if op.kind == tokAnd {
					q.dir = dirBoth
				}
			}
		}
	}
	if t := p.peek(); typeKeywords[t.text] {
		p.next()
		q.typ = t.text
	}
	id := p.peek()
	if id.kind != tokWord || p.keyword(id) {
		return nil, p.errAt(id.pos, "expected an address or number before %v", id)
	}
	p.next()
	p.last = &q
	switch q.typ {
	case "", "host":
		return p.host(q, id)
	case "net":
		return p.net(q, id)
	case "port", "portrange":
		return p.port(q, id)
	default: // "proto"
		return p.proto(q, id)
	}
}

func (p *parser) protocol(name string) *node {
	l := p.link
	switch name {
	case "ip":
		return l.network(etherIPv4)
	case "ip6":
		return l.network(etherIPv6)
	case "arp":
		return l.network(etherARP)
	case "rarp":
		return l.network(etherRARP)
	case "icmp":
		return l.ipProto(protoICMP)
	case "igmp":
		return l.ipProto(protoIGMP)
	case "icmp6":
		return l.ip6Proto(protoICMPv6)
	}
	v := transportProtos[name]
	return or(l.ipProto(v), l.ip6Proto(v))
}

var transportProtos = map[string]uint32{"tcp": protoTCP, "udp": protoUDP, "sctp": protoSCTP}

func (p *parser) host(q qual, id token) (*node, error) {
	a, err := netip.ParseAddr(id.text)
	if err != nil || a.Zone() != "" {
		return nil, p.errAt(id.pos, "host %v is not an IPv4 or IPv6 address (host names are not resolved)", id)
	}
	mask := make([]byte, a.BitLen()/8)
	for i := range mask {
		mask[i] = 0xff
	}
	return p.addr(q, a.AsSlice(), mask, id)
}

func (p *parser) net(q qual, id token) (*node, error) {
	addr, mask, err := p.parseNet(id)
	if err != nil {
		return nil, err
	}
	return p.addr(q, addr, mask, id)
}

// parseNet reads NET: ADDR/LEN, ADDR mask ADDR, or a 1 to 3 octet IPv4 prefix.
func (p *parser) parseNet(id token) (addr, mask []byte, err error) {
	text, lenText, hasLen := strings.Cut(id.text, "/")
	v4, octets := parseIPv4Prefix(text)
	switch {
	case v4 != nil:
		addr = v4
	default:
		a, perr := netip.ParseAddr(text)
		if perr != nil || a.Zone() != "" || a.Is4() {
			return nil, nil, p.errAt(id.pos, "net %v is not a network (write 10.0.0.0/8, 10.1, 2001:db8::/32 or ADDR mask MASK)", id)
		}
		addr = a.AsSlice()
	}
	bitLen := 8 * len(addr)
	switch {
	case hasLen && p.peek().text != "mask":
		n, perr := strconv.Atoi(lenText)
		if perr != nil || n < 0 || n > bitLen || lenText != strconv.Itoa(n) {
			return nil, nil, p.errAt(id.pos, "net %v: prefix length must be 0 to %d", id, bitLen)
		}
		mask = prefixMask(len(addr), n)
	case p.peek().text == "mask":
		if hasLen {
			return nil, nil, p.errAt(p.peek().pos, "a network takes /LEN or mask, not both")
		}
		m := p.next()
		mt := p.next()
		mv4, mOctets := parseIPv4Prefix(mt.text)
		if len(addr) != 4 {
			return nil, nil, p.errAt(m.pos, "mask applies to IPv4 networks only (write %s/LEN)", text)
		}
		if mt.kind != tokWord || mv4 == nil || mOctets != 4 {
			return nil, nil, p.errAt(mt.pos, "expected a dotted IPv4 mask before %v", mt)
		}
		mask = mv4
	case len(addr) == 4:
		mask = prefixMask(4, 8*octets)
	default:
		mask = prefixMask(16, 128)
	}
	for i := range addr {
		if addr[i]&^mask[i] != 0 {
			return nil, nil, p.errAt(id.pos, "non-network bits set in %q", id.text)
		}
	}
	return addr, mask, nil
}

// parseIPv4Prefix reads 1 to 4 dotted decimal octets.
func parseIPv4Prefix(s string) (addr []byte, octets int) {
	if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
		b := a.As4()
		return b[:], 4
	}
	parts := strings.Split(s, ".")
	if len(parts) > 3 {
		return nil, 0
	}
	addr = make([]byte, 4)
	for i, part := range parts {
		n, err := strconv.ParseUint(part, 10, 8)
		if err != nil || part != strconv.FormatUint(n, 10) {
			return nil, 0
		}
		addr[i] = byte(n)
	}
	return addr, len(parts)
}

func prefixMask(size, ones int) []byte {
	m := make([]byte, size)
	for i := range m {
		switch {
		case ones >= 8:
			m[i] = 0xff
			ones -= 8
		case ones > 0:
			m[i] = byte(0xff << (8 - ones))
			ones = 0
		}
	}
	return m
}

// addr builds host and net primitives from a masked address.
func (p *parser) addr(q qual, addr, mask []byte, id token) (*node, error) {
	l := p.link
	if len(addr) == 16 {
		if q.proto != "" && q.proto != "ip6" {
			return nil, p.errAt(q.protoPos, "%q modifier applied to IPv6 %s %v", q.proto, typeName(q), id)
		}
		return and(l.network(etherIPv6), q.dir.join(matchAddr(l.nl+8, addr, mask), matchAddr(l.nl+24, addr, mask))), nil
	}
	ip := and(l.network(etherIPv4), q.dir.join(matchAddr(l.nl+12, addr, mask), matchAddr(l.nl+16, addr, mask)))
	// ARP and RARP for IPv4 over Ethernet: sender address at 14, target at 24.
	arpAddrs := q.dir.join(matchAddr(l.nl+14, addr, mask), matchAddr(l.nl+24, addr, mask))
	arp := and(l.network(etherARP), arpAddrs)
	rarp := and(l.network(etherRARP), arpAddrs)
	switch q.proto {
	case "":
		// libpcap tests ARP and RARP together; so does this.
		return or(ip, and(or(l.network(etherARP), l.network(etherRARP)), arpAddrs)), nil
	case "ip":
		return ip, nil
	case "arp":
		return arp, nil
	case "rarp":
		return rarp, nil
	}
	return nil, p.errAt(q.protoPos, "%q modifier applied to %s", q.proto, typeName(q))
}

func typeName(q qual) string {
	if q.typ == "" {
		return "host"
	}
	return q.typ
}

func (p *parser) port(q qual, id token) (*node, error) {
	var protos []uint32
	switch q.proto {
	case "":
		protos = []uint32{protoSCTP, protoTCP, protoUDP}
	case "tcp", "udp", "sctp":
		protos = []uint32{transportProtos[q.proto]}
	default:
		return nil, p.errAt(q.protoPos, "illegal qualifier %q of %q (tcp, udp or sctp)", q.proto, q.typ)
	}
	lo, hi, err := p.portValues(q, id)
	if err != nil {
		return nil, err
	}
	match := func(t check) *node {
		if lo == hi {
			t.cond, t.val = bpf.JumpEqual, lo
			return &node{op: opTest, test: t}
		}
		ge, gt := t, t
		ge.cond, ge.val = bpf.JumpGreaterOrEqual, lo
		gt.cond, gt.val = bpf.JumpGreaterThan, hi
		return and(&node{op: opTest, test: ge}, not(&node{op: opTest, test: gt}))
	}
	l := p.link
	var next6, proto4 []*node
	for _, v := range protos {
		next6 = append(next6, cmp(1, l.nl+6, bpf.JumpEqual, v))
		proto4 = append(proto4, cmp(1, l.nl+9, bpf.JumpEqual, v))
	}
	abs := func(off uint32) check { return check{kind: loadAbs, size: 2, off: off} }
	past4 := func(off uint32) check { return check{kind: loadIPv4, size: 2, off: l.nl + off, ihl: l.nl} }
	v6 := allOf(l.network(etherIPv6), anyOf(next6...),
		q.dir.join(match(abs(l.nl+40)), match(abs(l.nl+42))))
	v4 := allOf(l.network(etherIPv4), anyOf(proto4...),
		not(cmp(2, l.nl+6, bpf.JumpBitsSet, 0x1fff)), // a non-first fragment has no ports
		q.dir.join(match(past4(0)), match(past4(2))))
	return or(v6, v4), nil
}

func (p *parser) portValues(q qual, id token) (lo, hi uint32, err error) {
	bad := func() (uint32, uint32, error) {
		if q.typ == "portrange" {
			return 0, 0, p.errAt(id.pos, "portrange %v is not N-N (port names are not resolved)", id)
		}
		return 0, 0, p.errAt(id.pos, "port %v is not a number (port names are not resolved)", id)
	}
	parse := func(s string) (uint32, bool, error) {
		n, ok := parseNumber(s)
		if ok && n > 65535 {
			return 0, false, p.errAt(id.pos, "port number %d > 65535", n)
		}
		return n, ok, nil
	}
	if q.typ == "port" {
		n, ok, err := parse(id.text)
		if err != nil || !ok {
			if err == nil {
				return bad()
			}
			return 0, 0, err
		}
		return n, n, nil
	}
	a, b, found := strings.Cut(id.text, "-")
	if !found {
		return bad()
	}
	lo, ok1, err := parse(a)
	if err != nil {
		return 0, 0, err
	}
	hi, ok2, err := parse(b)
	if err != nil {
		return 0, 0, err
	}
	if !ok1 || !ok2 {
		return bad()
	}
	if lo > hi {
		lo, hi = hi, lo
	}
	return lo, hi, nil
}

var protoNames = map[string]uint32{
	`\icmp`: protoICMP, `\igmp`: protoIGMP, `\tcp`: protoTCP, `\udp`: protoUDP,
	`\icmp6`: protoICMPv6, `\sctp`: protoSCTP,
}

func (p *parser) proto(q qual, id token) (*node, error) {
	if q.dirSet {
		return nil, p.errAt(id.pos, "src and dst do not apply to proto")
	}
	v, ok := protoNames[id.text]
	if !ok {
		n, isNum := parseNumber(id.text)
		if !isNum || n > 255 {
			return nil, p.errAt(id.pos, "proto %v is not a protocol number from 0 to 255 or one of \\tcp \\udp \\sctp \\icmp \\icmp6 \\igmp", id)
		}
		v = n
	}
	switch q.proto {
	case "":
		return or(p.link.ipProto(v), p.link.ip6Proto(v)), nil
	case "ip":
		return p.link.ipProto(v), nil
	case "ip6":
		return p.link.ip6Proto(v), nil
	}
	return nil, p.errAt(q.protoPos, "'%s proto' is bogus (ip proto or ip6 proto)", q.proto)
}

// number reads the next token as a number no larger than limit.
func (p *parser) number(what string, limit uint64) (uint32, error) {
	t := p.next()
	n, ok := parseNumber(t.text)
	if t.kind != tokWord || !ok || uint64(n) > limit {
		return 0, p.errAt(t.pos, "expected %s before %v", what, t)
	}
	return n, nil
}

// parseNumber reads a number as libpcap does: decimal, 0x hexadecimal or
// 0 octal, up to 2^32-1.
func parseNumber(s string) (uint32, bool) {
	base := 10
	digits := s
	switch {
	case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
		base, digits = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, digits = 8, s[1:]
	}
	for _, c := range digits {
		if !('0' <= c && c <= '9' || base == 16 && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F')) {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(digits, base, 32)
	return uint32(n), err == nil
}

// --- Code generation ---

// insn is an instruction whose jump targets are labels until layout.
type insn struct {
	ins    bpf.Instruction // a plain instruction, or nil for a jump
	cond   bpf.JumpTest    // conditional jump when uncond is false
	val    uint32
	jt, jf int // target labels; an unconditional jump uses jt
	uncond bool
}

type codegen struct {
	code   []insn
	labels []int // label -> index in code of the instruction it marks
}

func (g *codegen) label() int {
	g.labels = append(g.labels, -1)
	return len(g.labels) - 1
}

func (g *codegen) place(l int) { g.labels[l] = len(g.code) }

func (g *codegen) emit(ins bpf.Instruction) { g.code = append(g.code, insn{ins: ins}) }

// gen emits e as code that continues at label t when e holds and at f
// when not. Every label is placed after the jumps that name it, so all
// jumps go forward, as classic BPF requires.
func (g *codegen) gen(e *node, t, f int) {
	switch e.op {
	case opTrue:
		g.code = append(g.code, insn{uncond: true, jt: t})
	case opFalse:
		g.code = append(g.code, insn{uncond: true, jt: f})
	case opNot:
		g.gen(e.l, f, t)
	case opAnd:
		m := g.label()
		g.gen(e.l, m, f)
		g.place(m)
		g.gen(e.r, t, f)
	case opOr:
		m := g.label()
		g.gen(e.l, t, m)
		g.place(m)
		g.gen(e.r, t, f)
	case opTest:
		x := e.test
		switch x.kind {
		case loadAbs:
			g.emit(bpf.LoadAbsolute{Off: x.off, Size: x.size})
		case loadIPv4:
			g.emit(bpf.LoadMemShift{Off: x.ihl})
			g.emit(bpf.LoadIndirect{Off: x.off, Size: x.size})
		case loadLen:
			g.emit(bpf.LoadExtension{Num: bpf.ExtLen})
		}
		if x.mask != 0 {
			g.emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: x.mask})
		}
		g.code = append(g.code, insn{cond: x.cond, val: x.val, jt: t, jf: f})
	}
}

// generate turns e into a program that returns snaplen when e holds.
func generate(e *node, snaplen uint32) ([]bpf.Instruction, error) {
	if e.op == opTrue {
		return []bpf.Instruction{bpf.RetConstant{Val: snaplen}}, nil
	}
	var g codegen
	accept, reject := g.label(), g.label()
	g.gen(e, accept, reject)
	g.place(accept)
	g.emit(bpf.RetConstant{Val: snaplen})
	g.place(reject)
	g.emit(bpf.RetConstant{Val: 0})
	return g.layout()
}

// layout resolves labels to jump offsets. An unconditional jump to the next
// instruction disappears; a conditional jump that cannot reach its target
// in the 8-bit offset goes through unconditional jumps, which reach 2^32.
func (g *codegen) layout() ([]bpf.Instruction, error) {
	n := len(g.code)
	// firstLive[i] is the first instruction at or after i that is emitted.
	firstLive := make([]int, n+1)
	dead := make([]bool, n)
	firstLive[n] = n
	for i := n - 1; i >= 0; i-- {
		c := g.code[i]
		if c.ins == nil && c.uncond && firstLive[g.labels[c.jt]] == firstLive[i+1] {
			dead[i] = true
			firstLive[i] = firstLive[i+1]
		} else {
			firstLive[i] = i
		}
	}
	target := func(l int) int { return firstLive[g.labels[l]] }

	long := make([]bool, n)
	pos := make([]int, n+1)
	for {
		p := 0
		for i := range g.code {
			pos[i] = p
			switch {
			case dead[i]:
			case long[i]:
				p += 3
			default:
				p++
			}
		}
		pos[n] = p
		grew := false
		for i, c := range g.code {
			if dead[i] || long[i] || c.ins != nil || c.uncond {
				continue
			}
			if pos[target(c.jt)]-pos[i]-1 > 255 || pos[target(c.jf)]-pos[i]-1 > 255 {
				long[i] = true
				grew = true
			}
		}
		if !grew {
			break
		}
	}
	if pos[n] > MaxInstructions {
		return nil, fmt.Errorf("filter compiles to %d instructions, more than the kernel's %d", pos[n], MaxInstructions)
	}

	prog := make([]bpf.Instruction, 0, pos[n])
	for i, c := range g.code {
		switch {
		case dead[i]:
		case c.ins != nil:
			prog = append(prog, c.ins)
		case c.uncond:
			prog = append(prog, bpf.Jump{Skip: uint32(pos[target(c.jt)] - pos[i] - 1)})
		case long[i]:
			prog = append(prog,
				bpf.JumpIf{Cond: c.cond, Val: c.val, SkipTrue: 0, SkipFalse: 1},
				bpf.Jump{Skip: uint32(pos[target(c.jt)] - pos[i] - 2)},
				bpf.Jump{Skip: uint32(pos[target(c.jf)] - pos[i] - 3)})
		default:
			prog = append(prog, bpf.JumpIf{Cond: c.cond, Val: c.val,
				SkipTrue: uint8(pos[target(c.jt)] - pos[i] - 1), SkipFalse: uint8(pos[target(c.jf)] - pos[i] - 1)})
		}
	}
	return prog, nil
}

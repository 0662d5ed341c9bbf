package pcapfilter

// The parser: a recursive descent over the tokens that builds the
// expression tree, with pcap-filter(7)'s qualifier inheritance.

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/bpf"
)

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

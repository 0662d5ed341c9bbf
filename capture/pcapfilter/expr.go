package pcapfilter

// The expression tree the parser builds and the code generator walks:
// boolean combinations of single loads and comparisons, and the link-layer
// and address tests that primitives turn into.

import (
	"fmt"

	"golang.org/x/net/bpf"

	"github.com/flowdedup/flowdedup/flow"
)

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

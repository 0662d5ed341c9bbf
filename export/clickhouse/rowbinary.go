package clickhouse

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// Rows go to the server, and come back from it on a retry, in ClickHouse's
// RowBinary format: each row is its columns' values one after the other;
// UInt8 to UInt64 in little-endian byte order, DateTime as the UInt32
// seconds since the epoch (no time zone is involved, unlike DateTime in
// text formats), String as its length in unsigned LEB128 then its bytes.
// ClickHouse 18.16 and current releases read and write it the same way.

// maxUnixSeconds is the last second a DateTime holds (UInt32 seconds),
// 2106-02-07T06:28:15Z.
const maxUnixSeconds = math.MaxUint32

// errRowBinary is wrapped by the errors of splitRows.
var errRowBinary = errors.New("malformed RowBinary")

// appendString appends s as a RowBinary String.
func appendString(b []byte, s string) []byte {
	return append(appendStringLen(b, len(s)), s...)
}

// appendStringLen appends the length of a String whose n bytes follow.
func appendStringLen(b []byte, n int) []byte { return binary.AppendUvarint(b, uint64(n)) }

func appendU16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

// seconds returns ns, nanoseconds since the epoch, as DateTime seconds and
// the nanoseconds within the second, and false when a DateTime cannot hold
// it.
func seconds(ns int64) (sec, frac uint32, ok bool) {
	if ns < 0 || ns/1e9 > maxUnixSeconds {
		return 0, 0, false
	}
	return uint32(ns / 1e9), uint32(ns % 1e9), true
}

// rowTimes returns the DateTime seconds of r's time and window and the
// nanoseconds within its time's second, or an error saying which is
// outside 1970 to 2106.
func rowTimes(r *record.Record) (ts, tsNs, win uint32, err error) {
	ts, tsNs, ok := seconds(r.TimeNs)
	if !ok {
		return 0, 0, 0, fmt.Errorf("time %d ns is outside the DateTime range, 1970 to 2106", r.TimeNs)
	}
	win, _, ok = seconds(r.WindowNs)
	if !ok {
		return 0, 0, 0, fmt.Errorf("window start %d ns is outside the DateTime range, 1970 to 2106", r.WindowNs)
	}
	return ts, tsNs, win, nil
}

// rowStream is the body of a streamed insert (Destination.stream): it
// encodes the flows rows of recs into chunk, about streamChunk bytes at a
// time, as the transport reads them. The records have been checked: an
// error of appendRecord cannot happen, and would fail the request. stop,
// which insertStream calls before the Destination returns the records to
// its caller, makes every later Read fail: the transport never reads
// records that are no longer the batch's.
type rowStream struct {
	mu      sync.Mutex
	f       *flowRow
	recs    []record.Record
	id      uint64
	next    int    // the next record to encode
	chunk   []byte // encoded rows, read up to off
	off     int
	n       int64 // bytes given
	stopped bool
}

// streamChunk is how much a rowStream encodes at a time: a few hundred
// rows, in the L2 cache, sent in one chunk of the HTTP body.
const streamChunk = 64 << 10

var errStreamStopped = errors.New("the insert's body was given up")

func (s *rowStream) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return 0, errStreamStopped
	}
	for s.off == len(s.chunk) {
		if s.next == len(s.recs) {
			return 0, io.EOF
		}
		s.chunk, s.off = s.chunk[:0], 0
		for s.next < len(s.recs) && len(s.chunk) < streamChunk {
			var err error
			if s.chunk, err = s.f.appendRecord(s.chunk, &s.recs[s.next], s.id); err != nil {
				return 0, fmt.Errorf("record %d: %v", s.next, err)
			}
			s.next++
		}
	}
	n := copy(p, s.chunk[s.off:])
	s.off += n
	s.n += int64(n)
	return n, nil
}

// stop ends the stream: later Reads fail. It returns the bytes given, and
// the chunk buffer, for the next stream when the transport is done with
// this one.
func (s *rowStream) stop() (int64, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	return s.n, s.chunk
}

// flowRow holds what every flows row of a batch shares: the observer and
// the kind, already encoded as Strings.
type flowRow struct {
	observerName string // the observer that observer encodes
	observer     []byte
	kind         []byte
}

// setObserver makes the rows appended next carry the observer name. A run
// has one observer (a batch spooled by an earlier run may have another),
// so the encoded String is kept until the name changes, and re-encoded
// into the same buffer then: encoding a batch allocates nothing.
func (f *flowRow) setObserver(name string) {
	if name == f.observerName {
		return
	}
	f.observerName = name
	f.observer = appendString(f.observer[:0], name)
}

// appendRecord appends the flows row of r, in flowsColumns order, or
// returns an error saying why r cannot be stored. The key has been checked
// to be of the configured kind.
//
// The row is encoded straight from the key's binary form (flow.Key's
// AppendBinary, whose layout flow documents as stable): a key's segment
// (flow.Key.Segment) goes into vni and has_vni, and its "vni N " before
// the key's text as AppendText writes it; each address is
// formatted once, in the key's text, and its bytes copied into src and
// dst; IPv4 addresses take a table of decimal bytes. The text is
// flow.Key.AppendText's and the addresses net/netip's, byte for byte
// (TestAppendRecordMatchesText). Nothing is allocated.
func (f *flowRow) appendRecord(b []byte, r *record.Record, batch uint64) ([]byte, error) {
	ts, tsNs, win, err := rowTimes(r)
	if err != nil {
		return b, err
	}
	var kb [flow.KeySize]byte
	r.Key.AppendBinary(kb[:0]) // never fails
	kind, v6, ports := flow.KeyKind(kb[keyKindAt]), kb[keyFlagsAt]&keyFlagV6 != 0, kb[keyFlagsAt]&keyFlagPorts != 0
	net := "" // a network's "/bits" after each address (--prefix: CIDR text)
	if kb[keyFlagsAt]&keyFlagPrefix != 0 {
		net = prefixText[min(kb[keyBitsAt], 128)] // at most 128 in a valid key
	}

	seg := kb[keyFlagsAt]&keyFlagSeg != 0
	vni := binary.BigEndian.Uint32(kb[keySegAt:])

	b = append(b, f.observer...)
	b = appendU32(b, win)
	b = appendU32(b, ts)
	b = appendU32(b, tsNs)
	// key: at most 125 bytes (an SCTP 5-tuple of IPv6 networks in a
	// segment: "vni 16777215 " and 110), so its length is one byte,
	// written when the text is done.
	at := len(b)
	b = append(b, 0)
	if seg { // flow.Key.AppendText's "vni N " before the key
		b = append(b, "vni "...)
		b = strconv.AppendUint(b, uint64(vni), 10)
		b = append(b, ' ')
	}
	var src, dst [2]int // where the addresses are in b
	switch kind {
	case flow.KeySrc:
		src[0] = len(b)
		b = appendIP(b, kb[0:16], v6, net)
		src[1] = len(b)
	case flow.KeyDst:
		dst[0] = len(b)
		b = appendIP(b, kb[16:32], v6, net)
		dst[1] = len(b)
	case flow.KeyPair:
		src[0] = len(b)
		b = appendIP(b, kb[0:16], v6, net)
		src[1] = len(b)
		b = append(b, " > "...)
		dst[0] = len(b)
		b = appendIP(b, kb[16:32], v6, net)
		dst[1] = len(b)
	case flow.Key5Tuple:
		proto := kb[keyProtoAt]
		if name := flow.ProtoName(proto); name != "" {
			b = append(b, name...)
		} else {
			b = append(b, decimal[proto]...)
		}
		b = append(b, ' ')
		bracket := v6 && ports // netip.AddrPort's form: [v6]:port
		for side := range 2 {
			if side == 1 {
				b = append(b, " > "...)
			}
			if bracket {
				b = append(b, '[')
			}
			pos := &src
			if side == 1 {
				pos = &dst
			}
			pos[0] = len(b)
			b = appendIP(b, kb[16*side:16*side+16], v6, net)
			pos[1] = len(b)
			if bracket {
				b = append(b, ']')
			}
			if ports {
				b = append(b, ':')
				b = appendPort(b, binary.BigEndian.Uint16(kb[keyPortsAt+2*side:]))
			}
		}
	}
	b[at] = byte(len(b) - at - 1)
	b = append(b, byte(src[1]-src[0])) // "" when the kind has none
	b = append(b, b[src[0]:src[1]]...)
	b = append(b, byte(dst[1]-dst[0]))
	b = append(b, b[dst[0]:dst[1]]...)
	if kind == flow.Key5Tuple {
		b = append(b, kb[keyProtoAt])
		// sport and dport, little-endian; zero without ports.
		b = append(b, kb[keyPortsAt+1], kb[keyPortsAt], kb[keyPortsAt+3], kb[keyPortsAt+2])
	} else {
		b = append(b, 0, 0, 0, 0, 0)
	}
	b = append(b, f.kind...)
	b = appendU64(b, batch)
	// vni and has_vni: 0 and 0 for a key without a segment.
	b = appendU32(b, vni)
	if seg {
		return append(b, 1), nil
	}
	return append(b, 0), nil
}

// Offsets in flow.Key's binary form (see flow.Key.AppendBinary).
const (
	keyPortsAt    = 32 // source then destination port, big-endian
	keyProtoAt    = 36
	keyKindAt     = 37
	keyFlagsAt    = 38
	keyBitsAt     = 39 // a network's prefix length
	keySegAt      = 40 // the segment (VNI), big-endian; zero without one
	keyFlagV6     = 1 << 0
	keyFlagPorts  = 1 << 1
	keyFlagPrefix = 1 << 2 // a network key
	keyFlagSeg    = 1 << 3 // a key taken inside a VXLAN or Geneve segment
)

// prefixText holds "/0" to "/128", the CIDR suffixes of networks.
var prefixText = func() (p [129]string) {
	for i := range p {
		p[i] = "/" + strconv.Itoa(i)
	}
	return p
}()

// decimal holds the decimal text of every byte value.
var decimal = func() (d [256]string) {
	for i := range d {
		d[i] = strconv.Itoa(i)
	}
	return d
}()

// digits2 holds the two decimal digits of 0 to 99.
const digits2 = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"

// appendPort appends p in decimal, as strconv.AppendUint does, two digits
// at a time.
func appendPort(b []byte, p uint16) []byte {
	var buf [5]byte
	i := len(buf)
	for p >= 100 {
		q := p / 100
		r := 2 * (p - 100*q)
		i -= 2
		buf[i], buf[i+1] = digits2[r], digits2[r+1]
		p = q
	}
	if p >= 10 {
		i -= 2
		buf[i], buf[i+1] = digits2[2*p], digits2[2*p+1]
	} else {
		i--
		buf[i] = byte('0' + p)
	}
	return append(b, buf[i:]...)
}

// appendIP appends the text of the address in a (16 bytes, IPv4 in the
// first 4) as net/netip writes it, then net (a network's "/bits", or "").
func appendIP(b, a []byte, v6 bool, net string) []byte {
	if v6 {
		b = appendIPv6(b, a)
	} else {
		b = appendIPv4(b, a)
	}
	return append(b, net...)
}

// appendIPv6 appends the 16-byte address a as net/netip writes it: RFC
// 5952's form (lowercase hexadecimal groups without leading zeros, the
// first of the longest runs of two or more zero groups as ::), and an
// IPv4-mapped address as ::ffff:a.b.c.d.
func appendIPv6(b, a []byte) []byte {
	var g [8]uint16
	for i := range g {
		g[i] = binary.BigEndian.Uint16(a[2*i:])
	}
	if g[0]|g[1]|g[2]|g[3]|g[4] == 0 && g[5] == 0xffff {
		b = append(b, "::ffff:"...)
		return appendIPv4(b, a[12:])
	}
	zeroStart, zeroEnd := 8, 8 // the run of zero groups written as ::
	for i := 0; i < 8; i++ {
		j := i
		for j < 8 && g[j] == 0 {
			j++
		}
		if l := j - i; l >= 2 && l > zeroEnd-zeroStart {
			zeroStart, zeroEnd = i, j
		}
		i = j
	}
	for i := 0; i < 8; i++ {
		if i == zeroStart {
			b = append(b, ':', ':')
			i = zeroEnd
			if i >= 8 {
				break
			}
		} else if i > 0 {
			b = append(b, ':')
		}
		b = appendHex16(b, g[i])
	}
	return b
}

// appendHex16 appends v in lowercase hexadecimal without leading zeros.
func appendHex16(b []byte, v uint16) []byte {
	const hex = "0123456789abcdef"
	switch {
	case v >= 0x1000:
		return append(b, hex[v>>12], hex[v>>8&0xf], hex[v>>4&0xf], hex[v&0xf])
	case v >= 0x100:
		return append(b, hex[v>>8], hex[v>>4&0xf], hex[v&0xf])
	case v >= 0x10:
		return append(b, hex[v>>4], hex[v&0xf])
	}
	return append(b, hex[v])
}

// appendIPv4 appends the 4-byte address at the head of a in dotted
// decimal.
func appendIPv4(b, a []byte) []byte {
	b = append(b, decimal[a[0]]...)
	b = append(b, '.')
	b = append(b, decimal[a[1]]...)
	b = append(b, '.')
	b = append(b, decimal[a[2]]...)
	b = append(b, '.')
	return append(b, decimal[a[3]]...)
}

// splitRows splits RowBinary data of rows of cols into rows, appended to
// rows (each a subslice of data), and fails on data that does not end
// with a whole row. Only the types of flowsColumns and windowsColumns are
// known.
func splitRows(data []byte, cols []column, rows [][]byte) ([][]byte, error) {
	for start := 0; start < len(data); {
		at := start
		for _, c := range cols {
			n, err := valueLen(data[at:], c.typ)
			if err != nil {
				return rows, fmt.Errorf("%w: row %d, column %s at byte %d: %v", errRowBinary, len(rows), c.name, at, err)
			}
			at += n
		}
		rows = append(rows, data[start:at:at])
		start = at
	}
	return rows, nil
}

// valueLen returns the length of the RowBinary value of type typ at the
// head of b.
func valueLen(b []byte, typ string) (int, error) {
	var n int
	switch typ {
	case "UInt8":
		n = 1
	case "UInt16":
		n = 2
	case "UInt32", "DateTime('UTC')":
		n = 4
	case "UInt64":
		n = 8
	case "String":
		l, h := binary.Uvarint(b)
		if h <= 0 {
			return 0, fmt.Errorf("bad string length")
		}
		if l > uint64(len(b)-h) {
			return 0, fmt.Errorf("string of %d bytes, %d left", l, len(b)-h)
		}
		return h + int(l), nil
	default:
		return 0, fmt.Errorf("type %s not known", typ)
	}
	if len(b) < n {
		return 0, fmt.Errorf("%s value of %d bytes, %d left", typ, n, len(b))
	}
	return n, nil
}

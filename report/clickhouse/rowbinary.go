package clickhouse

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/pipeline"
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

// beginString reserves the one-byte length of a String whose bytes are
// appended next; endString writes the length. Keys and addresses are
// shorter than 128 bytes, so the reserved byte is the whole length; a
// longer one makes room by moving the bytes.
func beginString(b []byte) ([]byte, int) { return append(b, 0), len(b) }

func endString(b []byte, at int) []byte {
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	var v [binary.MaxVarintLen64]byte
	l := binary.PutUvarint(v[:], uint64(n))
	b = append(b, v[1:l]...) // grow by the extra length bytes
	copy(b[at+l:], b[at+1:at+1+n])
	copy(b[at:], v[:l])
	return b
}

func appendAddr(b []byte, a netip.Addr) []byte {
	b, at := beginString(b)
	b = a.AppendTo(b)
	return endString(b, at)
}

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
func (f *flowRow) appendRecord(b []byte, r *pipeline.Record, batch uint64) ([]byte, error) {
	ts, tsNs, ok := seconds(r.TimeNs)
	if !ok {
		return b, fmt.Errorf("time %d ns is outside the DateTime range, 1970 to 2106", r.TimeNs)
	}
	win, _, ok := seconds(r.WindowNs)
	if !ok {
		return b, fmt.Errorf("window start %d ns is outside the DateTime range, 1970 to 2106", r.WindowNs)
	}
	k := &r.Key
	b = append(b, f.observer...)
	b = appendU32(b, win)
	b = appendU32(b, ts)
	b = appendU32(b, tsNs)
	var at int
	b, at = beginString(b)
	b, _ = k.AppendText(b) // never fails
	b = endString(b, at)
	kind := k.Kind()
	if kind == flow.KeyDst {
		b = append(b, 0) // src ""
	} else {
		b = appendAddr(b, k.Src())
	}
	if kind == flow.KeySrc {
		b = append(b, 0) // dst ""
	} else {
		b = appendAddr(b, k.Dst())
	}
	if kind == flow.Key5Tuple {
		b = append(b, k.Proto())
		b = appendU16(b, k.SrcPort()) // 0 without ports
		b = appendU16(b, k.DstPort())
	} else {
		b = append(b, 0, 0, 0, 0, 0)
	}
	b = append(b, f.kind...)
	return appendU64(b, batch), nil
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

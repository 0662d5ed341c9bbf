package report

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// Formats lists the record formats NewRecordWriter accepts; the first is
// the default.
var Formats = []string{"jsonl", "csv", "text"}

// ErrFormat is returned, wrapped, for a record format not in Formats.
var ErrFormat = errors.New("report: unknown record format")

type format uint8

const (
	formatJSONL format = iota
	formatCSV
	formatText
)

func parseFormat(s string) (format, error) {
	switch s {
	case "", "jsonl":
		return formatJSONL, nil
	case "csv":
		return formatCSV, nil
	case "text":
		return formatText, nil
	}
	return 0, fmt.Errorf("%w %q (known: jsonl, csv, text)", ErrFormat, s)
}

const (
	// bufSize is how many bytes of whole records are gathered before they
	// are written.
	bufSize = 64 << 10
	// maxRecordLen bounds one record (the longest, a jsonl SCTP 5-tuple of
	// IPv6 addresses in a window, is under 250 bytes), so that a buffer of
	// bufSize+maxRecordLen never grows.
	maxRecordLen = 512
)

// A RecordWriter writes distinct-flow records (record.Record) as JSON
// lines, CSV or text. It is the record half of a pipeline.Sink; Reporter
// combines it with window summaries.
//
// Records are appended to a 64 KiB buffer and written when it fills or on
// Flush, always as whole records: a destination receives each buffer in a
// single Write, and a file that takes part of a failed write is truncated
// back to the last whole record (see WriteError). Writing a record does not
// allocate.
//
// A RecordWriter is a synchronous [Destination] (Records, Window and Close flush
// as said there). It is not safe for concurrent use. It does not close its
// destination.
type RecordWriter struct {
	out     wholeWriter
	format  format
	kind    flow.KeyKind
	buf     []byte        // whole records not yet written
	pending int           // records in buf
	started bool          // a record was given
	segs    bool          // SetSegments: csv has a vni column
	names   ObserverNames // SetObservers: the records' observers are written
}

var _ record.Destination = (*RecordWriter)(nil)

// NewRecordWriter returns a writer of records of the given key kind to w in
// format: "jsonl" (or ""), "csv" or "text".
//
// jsonl writes one JSON object per record:
//
//	{"ts":"2026-01-01T00:00:01.5Z","src":"10.0.0.1","dst":"10.0.0.2","proto":6,"proto_name":"tcp","sport":1234,"dport":80,"window":"2026-01-01T00:00:00Z"}
//
// ts is the packet time of the flow's first packet in its window, and
// window the start of that window, both RFC 3339 in UTC with as many
// fractional digits as needed (time.RFC3339Nano). The key fields are those
// of the kind: src (src, pair, 5tuple), dst (dst, pair, 5tuple), addresses,
// or networks in CIDR form ("10.1.2.0/24") for keys by network
// (pipeline.Config.Prefix, flow.Key.AppendSrc), proto
// (5tuple, the IP protocol number), proto_name (5tuple, when IANA names
// the protocol: flow.ProtoName, e.g. tcp, udp, icmp, icmp6, igmp, gre),
// sport and dport (5tuple, when the key has ports: not for ICMP, other
// portless protocols or non-first fragments). window is omitted when windows are off
// (record.Record.Windowed false), and written for every window a record
// can have: before 1970, at the epoch, or as late as Unix ns reach.
//
// A key with a segment (flow.Key.Segment, taken inside VXLAN or Geneve)
// adds "vni", its VNI, after the key's fields and before window
// (record.AppendJSON); a key without one has no vni.
//
// csv writes a header line naming the kind's columns, then one row per
// record; absent fields are empty:
//
//	ts,src,dst,proto,proto_name,sport,dport,window
//	2026-01-01T00:00:01.5Z,10.0.0.1,10.0.0.2,6,tcp,1234,80,2026-01-01T00:00:00Z
//
// A csv writer told that its run keys segments (SetSegments: --decap with
// vxlan or geneve, without novni) has a vni column before window, empty for
// a key without a segment:
//
//	ts,src,dst,proto,proto_name,sport,dport,vni,window
//	2026-01-01T00:00:01.5Z,10.0.0.1,10.0.0.2,6,tcp,1234,80,100,2026-01-01T00:00:00Z
//	2026-01-01T00:00:01.6Z,10.0.0.1,10.0.0.2,6,tcp,1234,80,,2026-01-01T00:00:00Z
//
// Other csv writers have no vni column, and refuse a key with a segment
// (ErrSegment) rather than drop its VNI.
//
// text writes the time, two spaces and the key's text form
// (flow.Key.AppendText), which starts "vni N " for a key with a segment:
//
//	2026-01-01T00:00:01.5Z  tcp 10.0.0.1:1234 > 10.0.0.2:80
//	2026-01-01T00:00:01.5Z  vni 100 tcp 10.0.0.1:1234 > 10.0.0.2:80
func NewRecordWriter(w io.Writer, format string, kind flow.KeyKind) (*RecordWriter, error) {
	f, err := parseFormat(format)
	if err != nil {
		return nil, err
	}
	if !kind.IsValid() {
		return nil, fmt.Errorf("report: records: %w: %v", flow.ErrBadKind, kind)
	}
	rw := &RecordWriter{
		out:    wholeWriter{w: w, op: "records"},
		format: f,
		kind:   kind,
		buf:    make([]byte, 0, bufSize+maxRecordLen),
	}
	if f == formatCSV {
		rw.buf = rw.appendHeader(rw.buf)
	}
	return rw, nil
}

// ErrSegment is returned, wrapped, for a key with a segment (VNI) given to
// a csv writer without a vni column (SetSegments).
var ErrSegment = errors.New("report: records: a key with a segment (VNI) given to a csv writer without a vni column")

// errSetSegments: SetSegments on a writer that has written records.
var errSetSegments = errors.New("report: SetSegments after the first record")

// SetSegments tells the writer that its run keys segments (a --decap with
// vxlan or geneve and without novni): csv gets a vni column, before window
// (see NewRecordWriter). jsonl and text carry a key's segment whether or
// not it is set. Call it before the first record.
func (rw *RecordWriter) SetSegments() error {
	if rw.started {
		return errSetSegments
	}
	rw.segs = true
	if rw.format == formatCSV {
		rw.buf = rw.appendHeader(rw.buf[:0])
	}
	return nil
}

// appendHeader appends the csv header of the writer's kind, with the vni
// column of SetSegments and the exporter column of SetObservers.
func (rw *RecordWriter) appendHeader(b []byte) []byte {
	h := csvHeaders[rw.kind]
	h = h[:len(h)-len("window\n")]
	b = append(b, h...)
	if rw.segs {
		b = append(b, "vni,"...)
	}
	b = append(b, "window"...)
	if rw.names != nil {
		b = append(b, ",exporter"...)
	}
	return append(b, '\n')
}

var csvHeaders = [...]string{
	flow.KeySrc:    "ts,src,window\n",
	flow.KeyDst:    "ts,dst,window\n",
	flow.KeyPair:   "ts,src,dst,window\n",
	flow.Key5Tuple: "ts,src,dst,proto,proto_name,sport,dport,window\n",
}

// Record buffers r, and writes the buffer when it is full. A key of another
// kind than the writer's is an error wrapping flow.ErrBadKind. After a write
// error, Record returns that error (a *WriteError) and writes nothing.
func (rw *RecordWriter) Record(r *record.Record) error {
	if rw.out.err != nil {
		return rw.out.err
	}
	if k := r.Key.Kind(); k != rw.kind {
		return fmt.Errorf("report: records: %w: a %v key given to a %v writer", flow.ErrBadKind, k, rw.kind)
	}
	if rw.format == formatCSV && !rw.segs {
		if vni, ok := r.Key.Segment(); ok {
			return fmt.Errorf("%w: vni %d (the run's --decap has vxlan or geneve, but the writer was not told: SetSegments)", ErrSegment, vni)
		}
	}
	switch rw.format {
	case formatJSONL:
		rw.buf = record.AppendJSON(rw.buf, r)
	case formatCSV:
		rw.buf = appendCSV(rw.buf, r, rw.segs)
	case formatText:
		rw.buf = appendText(rw.buf, r)
	}
	if rw.names != nil {
		rw.buf = appendObserver(rw.buf, rw.format, rw.names, r)
	}
	rw.started = true
	rw.pending++
	if len(rw.buf) >= bufSize {
		return rw.Flush()
	}
	return nil
}

// Records buffers the records of b (see Record). When one fails, the
// records of b after it are counted as lost too: its *WriteError's Lost
// includes them.
func (rw *RecordWriter) Records(b *record.Batch) error {
	if rw.out.err != nil {
		return rw.out.err
	}
	for i := range b.Records {
		if err := rw.Record(&b.Records[i]); err != nil {
			if we, ok := err.(*WriteError); ok {
				we.Lost += len(b.Records) - i - 1
			}
			return err
		}
	}
	return nil
}

// Window flushes the records: those of the window that closed are written
// before its summary is. In the text format, the window's spread lists
// (Summary.Spread, --spread) follow its records (appendSpreadText).
func (rw *RecordWriter) Window(s *record.Summary) error {
	if rw.format == formatText && s != nil && s.Spread != nil && rw.out.err == nil {
		rw.buf = appendSpreadText(rw.buf, s)
	}
	return rw.Flush()
}

// Close flushes the records. It does not close the destination.
func (rw *RecordWriter) Close() error { return rw.Flush() }

// Flush writes the buffered records. Reporter flushes at the end of every
// window and whenever the pipeline is idle.
func (rw *RecordWriter) Flush() error {
	err := rw.out.write(rw.buf, rw.pending)
	if err == nil {
		rw.buf = rw.buf[:0]
		rw.pending = 0
	}
	return err
}

// appendCSV appends a row of the columns in csvHeaders, with a vni column
// before window when segs. No field can hold a comma, quote or newline, so
// none is quoted.
func appendCSV(b []byte, r *record.Record, segs bool) []byte {
	k := &r.Key
	b = appendTime(b, r.TimeNs)
	if k.Kind() != flow.KeyDst {
		b = append(b, ',')
		b = k.AppendSrc(b)
	}
	if k.Kind() != flow.KeySrc {
		b = append(b, ',')
		b = k.AppendDst(b)
	}
	if k.Kind() == flow.Key5Tuple {
		b = append(b, ',')
		b = strconv.AppendUint(b, uint64(k.Proto()), 10)
		b = append(b, ',')
		b = append(b, flow.ProtoName(k.Proto())...)
		b = append(b, ',')
		if k.HasPorts() {
			b = strconv.AppendUint(b, uint64(k.SrcPort()), 10)
			b = append(b, ',')
			b = strconv.AppendUint(b, uint64(k.DstPort()), 10)
		} else {
			b = append(b, ',')
		}
	}
	if segs {
		b = append(b, ',')
		if vni, ok := k.Segment(); ok {
			b = strconv.AppendUint(b, uint64(vni), 10)
		}
	}
	b = append(b, ',')
	if r.Windowed {
		b = appendTime(b, r.WindowNs)
	}
	return append(b, '\n')
}

func appendText(b []byte, r *record.Record) []byte {
	b = appendTime(b, r.TimeNs)
	b = append(b, "  "...)
	b, _ = r.Key.AppendText(b) // never fails
	return append(b, '\n')
}

// appendTime appends the instant ns nanoseconds after the Unix epoch in
// RFC 3339 form, in UTC, without trailing zeros in the fraction.
func appendTime(b []byte, ns int64) []byte {
	return time.Unix(0, ns).UTC().AppendFormat(b, time.RFC3339Nano)
}

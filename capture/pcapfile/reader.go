package pcapfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/bits"
	"os"
	"slices"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// MaxCaptureLength is the longest record a capture file may hold: libpcap's
// MAXIMUM_SNAPLEN, the bound tcpdump and Wireshark also apply. A record
// header that claims more is taken as damage rather than trusted, so a
// Reader never allocates according to a length read from a file.
const MaxCaptureLength = 262144

// ErrNotCapture reports a file that is neither pcap nor pcapng, plain or
// gzip-compressed. Open returns it (wrapped in a *Error).
var ErrNotCapture = errors.New("capture: not a pcap or pcapng file")

const (
	// bufSize is the read buffer. Records are handed out from it without
	// a copy, so it holds a whole packet block: the largest record plus
	// room for pcapng options.
	bufSize = MaxCaptureLength + 64<<10
	// rawBufSize buffers the compressed bytes of a gzip file.
	rawBufSize = 64 << 10
	// ngMaxBlock bounds the length of any pcapng block. Larger blocks
	// (Wireshark's limit is about the same) are taken as damage.
	ngMaxBlock = 64 << 20
	// ngMaxIfaces bounds the interfaces of one pcapng section, so that
	// interface blocks cannot grow the reader's memory with the file.
	ngMaxIfaces = 1 << 16
)

// PollInterval bounds how long Next waits for data on a pipe (standard
// input or a named pipe, not gzip-compressed) before it returns
// capture.ErrTimeout, so that the caller can hand on what it holds while
// the writer is quiet, and notice a stop.
const PollInterval = 100 * time.Millisecond

// Magic numbers, as the first four bytes of a file read big-endian.
const (
	pcapMicroBE = 0xa1b2c3d4
	pcapMicroLE = 0xd4c3b2a1
	pcapNanoBE  = 0xa1b23c4d
	pcapNanoLE  = 0x4d3cb2a1
	gzipMagic   = 0x1f8b // first two bytes only
)

// pcapng block types, option codes and the byte-order magic.
const (
	blockSectionHeader  = 0x0a0d0d0a
	blockInterface      = 0x00000001
	blockPacketObsolete = 0x00000002
	blockSimplePacket   = 0x00000003
	blockEnhancedPacket = 0x00000006
	byteOrderMagic      = 0x1a2b3c4d

	optEnd      = 0
	optTsResol  = 9
	optTsOffset = 14
)

// magics are the first bytes of every kind of file Open accepts: a file
// shorter than a magic number, whose bytes begin one of them (an empty file
// too), is a capture cut short, not a file of another kind.
var magics = [...][]byte{
	{0xa1, 0xb2, 0xc3, 0xd4}, {0xd4, 0xc3, 0xb2, 0xa1}, // pcap, microseconds
	{0xa1, 0xb2, 0x3c, 0x4d}, {0x4d, 0x3c, 0xb2, 0xa1}, // pcap, nanoseconds
	{0x0a, 0x0d, 0x0d, 0x0a}, // pcapng section header block
	{0x1f, 0x8b},             // gzip
}

// magicPrefix reports whether b, shorter than a magic number, is how one
// begins.
func magicPrefix(b []byte, gzipOK bool) bool {
	for _, m := range magics {
		if (gzipOK || len(m) == 4) && len(b) < len(m) && bytes.HasPrefix(m, b) {
			return true
		}
	}
	return false
}

type kind uint8

const (
	kindPcap kind = iota + 1
	kindPcapng
)

// Stats describes one input of a Reader.
type Stats struct {
	Path       string        // as given to Open; "-" is standard input
	Format     string        // "pcap", "pcap-nsec" or "pcapng"; "" until the file is opened
	Compressed bool          // gzip
	LinkType   flow.LinkType // pcap: the file's; pcapng: the first interface's (each packet carries its own)
	Packets    int64         // records returned so far
	Err        error         // the error that ended the file early, nil if it was read to its end
	Done       bool          // the file has been read (to its end or to Err)
}

// Error is damage found in one input file, or the reason it could not be
// opened. It wraps capture.ErrCorrupt when the file's contents are damaged
// (errors.Is(err, capture.ErrCorrupt)), ErrNotCapture when the file is not
// a capture file of a known kind, and io.ErrUnexpectedEOF when the file
// ends inside its header or a record (a truncated file).
type Error struct {
	Path       string // as given to Open; "-" is standard input
	Record     int64  // 1-based number of the packet record being read; 0: the file header
	Offset     int64  // byte offset of the damaged record or block (of the decompressed stream for gzip)
	Compressed bool   // the file is gzip: Offset counts decompressed bytes
	Err        error  // what is wrong

	corrupt    bool
	notCapture bool
}

func (e *Error) Error() string {
	msg := "capture: " + e.Path + ": "
	if e.Record > 0 || e.corrupt {
		msg += e.Where() + ": "
	}
	if e.notCapture {
		msg += "not a pcap or pcapng file: "
	}
	return msg + e.Err.Error()
}

// Where says where the damage is: "record 4 at offset 1234" ("... of the
// decompressed data" in a gzip file), or "file header at offset 0".
func (e *Error) Where() string {
	var s string
	if e.Record > 0 {
		s = fmt.Sprintf("record %d at offset %d", e.Record, e.Offset)
	} else {
		s = fmt.Sprintf("file header at offset %d", e.Offset)
	}
	if e.Compressed {
		s += " of the decompressed data"
	}
	return s
}

// truncated is what is wrong with a file that ends inside its header or a
// record: what it was reading, and how much of it there was. It wraps
// io.ErrUnexpectedEOF.
type truncated struct {
	what      string // e.g. "the record data"; "": the file is empty
	got, want int    // bytes of it present (-1: not known), and its length (0: not known yet)
	gzip      bool   // the bytes are decompressed ones
	cut       bool   // gzip: the compressed stream itself ends early
}

func (e *truncated) Error() string {
	if e.what == "" {
		if e.gzip {
			return "empty gzip data"
		}
		return "empty file"
	}
	subject := "file ends"
	switch {
	case e.gzip && e.cut:
		subject = "gzip stream cut short"
	case e.gzip:
		subject = "gzip data ends"
	}
	switch {
	case e.got < 0:
		return fmt.Sprintf("%s inside %s", subject, e.what)
	case e.want > 0:
		return fmt.Sprintf("%s inside %s after %d of its %d bytes", subject, e.what, e.got, e.want)
	}
	return fmt.Sprintf("%s inside %s after %d bytes", subject, e.what, e.got)
}

func (e *truncated) Unwrap() error { return io.ErrUnexpectedEOF }

// Is makes an empty file's error wrap capture.ErrEmpty too.
func (e *truncated) Is(target error) bool { return target == capture.ErrEmpty && e.what == "" }

// Unwrap returns capture.ErrCorrupt and ErrNotCapture where they apply, and
// Err.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 3)
	if e.corrupt {
		errs = append(errs, capture.ErrCorrupt)
	}
	if e.notCapture {
		errs = append(errs, ErrNotCapture)
	}
	return append(errs, e.Err)
}

// iface is what a pcapng interface description block says about its
// packets.
type iface struct {
	link     flow.LinkType
	snapLen  uint32
	units    uint64 // timestamp units per second
	tsOffset int64  // seconds added to every timestamp (if_tsoffset)
}

// timeNs converts a pcapng timestamp to Unix nanoseconds. Garbage in a
// damaged file wraps around rather than failing: the framing is intact.
func (ifc *iface) timeNs(ts uint64) int64 {
	var sec, ns uint64
	switch ifc.units {
	case 1e6:
		sec, ns = ts/1e6, ts%1e6*1e3
	case 1e9:
		sec, ns = ts/1e9, ts%1e9
	default:
		sec = ts / ifc.units
		// frac*1e9/units exactly: the high word is below units, so Div64
		// cannot overflow.
		hi, lo := bits.Mul64(ts%ifc.units, 1e9)
		ns, _ = bits.Div64(hi, lo, ifc.units)
	}
	return (int64(sec)+ifc.tsOffset)*1e9 + int64(ns)
}

// tsUnits decodes an if_tsresol value: timestamp units per second.
func tsUnits(v byte) (uint64, bool) {
	if v&0x80 != 0 {
		e := v & 0x7f
		if e > 63 {
			return 0, false
		}
		return 1 << e, true
	}
	if v > 19 { // 10^20 does not fit in 64 bits
		return 0, false
	}
	u := uint64(1)
	for range v {
		u *= 10
	}
	return u, true
}

// Reader is a capture.Source that reads pcap and pcapng files, plain or
// gzip-compressed, one after another in the order given to Open.
//
// Each file's format is told by its first bytes, never by its name: pcap
// with microsecond or nanosecond timestamps in either byte order, pcapng
// (any number of sections, either byte order, several interfaces with their
// own link types and timestamp resolutions), and either of them inside gzip.
// gzip is inflated by github.com/klauspost/compress/gzip rather than
// compress/gzip: replaying a 1M-packet capture gzip'd at the default level
// took 446 ns a packet against 570 (the inflation is most of it).
//
// Files are streamed through one fixed buffer: memory does not grow with
// the size or the number of the files, and reading a record allocates
// nothing.
//
// Packets: Data is the record's captured bytes, zero-copy from the read
// buffer and valid until the next call to Next. LinkType is the file's link
// type (pcapng: that of the packet's interface), TimeNs the record's
// timestamp (pcapng simple packet blocks have none and repeat the previous
// packet's), WireLen the original length, raised to the captured length
// when a writer recorded a smaller one. A link type flow.Parse does not
// support is no error here: such files open and their frames are returned,
// so the caller counts them through flow.Parse's ErrUnsupportedLink like any
// other frame it cannot key, and a replay of mixed captures is not stopped
// by one odd file.
//
// Damage: records are checked before they are read. A record longer than
// MaxCaptureLength, a pcapng block whose length is implausible, whose
// trailing length differs from its leading one or whose packet overruns it,
// a packet on an interface the section never described, and a file that
// ends inside its header or a record (or a gzip stream that fails) make
// Next return a *Error that wraps capture.ErrCorrupt and names the file,
// the record number and the offset (Error.Where). A truncated file's error
// also wraps io.ErrUnexpectedEOF and says what it ends inside and how many
// of its bytes are there, in one form for pcap, pcapng and gzip:
//
//	capture: day.pcap: record 4 at offset 1234: file ends inside the record data after 12 of its 60 bytes
//	capture: day.pcapng: record 9 at offset 880: file ends inside an enhanced packet block after 20 of its 96 bytes
//	capture: day.pcap.gz: record 7 at offset 512 of the decompressed data: gzip stream cut short inside the record header after 3 of its 16 bytes
//	capture: new.pcap: file header at offset 0: empty file
//	capture: new.pcap: file header at offset 0: file ends inside the pcap file header after 20 of its 24 bytes
//
// Records longer than the snap length the file declares, but
// within MaxCaptureLength, are read, as tcpdump and Wireshark read them:
// some writers do not truncate to the snap length they declare.
//
// After such an error the file's framing is lost, so the rest of that file is
// skipped, and the following call to Next continues with the next file:
// one truncated capture in a day of hourly files costs the records after
// the damage, not the rest of the day. A caller that prefers to stop at the
// first damaged file stops calling Next. Next returns io.EOF only after the
// last file. Read errors of the operating system are returned the same way,
// without capture.ErrCorrupt.
//
// Pipes: standard input ("-") and named pipes are read as they are
// written, by a writer such as tcpdump -U -w -. When such a pipe, not
// gzip-compressed, has had no data for PollInterval, Next returns
// capture.ErrTimeout, as a live source does on a quiet link, so that the
// caller can hand on the packets it holds and check for a stop; the bytes
// of a record the pause cut stay buffered, and the next call goes on with
// the same file. A gzip stream on a pipe is read without timeouts (gzip
// keeps a read error for good). On Linux, standard input is opened anew
// (/dev/stdin) for this: a file description of the reader's own, whose
// non-blocking mode does not leak to the processes that share the
// inherited one; elsewhere standard input waits for data.
//
// Current and Files tell which file is being read and how each one ended.
// A Reader is used by one goroutine.
//
// The records are framed here rather than by gopacket's pcapgo readers,
// which FuzzReader uses as the reference decoder instead. In pcapgo
// v1.7.7 the pcap reader reports a file cut right after a record header as
// a clean io.EOF, and the pcapng reader trusts a packet block's captured
// length without checking it against the block, growing a buffer to it (a
// 4-byte packet claiming 100 MiB, in a 50 MiB file, allocated 127 MiB) and
// reading on through the following blocks; it also allocates per packet
// for link types above 255 when asked for each interface's link type.
// Framing both formats here is little code, and reads a record in half the
// time pcapgo takes.
type Reader struct {
	paths []string
	stats []Stats

	next   int  // index of the next file to open
	cur    int  // index of the file being read, -1 before the first
	probed bool // Open has accepted every file
	open   bool
	closed bool
	file   *os.File
	stdin  io.Reader // standard input, with the bytes Open looked at put back
	// stdinFile is standard input's file when reads of it can time out
	// (a pipe); ownStdin: Open opened it anew, and Close closes it.
	stdinFile *os.File
	ownStdin  bool
	// poll is the file being read when it is a pipe whose reads time out
	// after PollInterval (see Next); nil otherwise.
	poll *os.File
	raw  *bufio.Reader
	gz   *gzip.Reader
	in   *bufio.Reader // the decompressed stream records are read from
	// win is what in holds buffered, from its read position; pos of its
	// bytes have been consumed but not yet discarded from in. Records are
	// framed in it (peek, discard) without a call into in, which is read
	// only when the window runs out (peekSlow) or for what it cannot hold
	// (unwindow first).
	win     []byte
	pos     int
	spill   []byte // holds a packet whose block is too big for in
	ifaces  []iface
	format  kind
	big     bool          // big-endian file or pcapng section
	fracMul int64         // pcap: nanoseconds per unit of the fraction field
	link    flow.LinkType // pcap: the file's link type

	records  int64 // records returned from the current file
	offset   int64 // offset of the next record or block in the current file
	pending  int   // bytes of the last returned record still in the buffer
	lastTime int64 // timestamp of the last packet, for simple packet blocks
	sawIface bool  // an interface description block has been read
}

var _ capture.Source = (*Reader)(nil)

// Open returns a Reader that reads the files at paths in order;
// "-" reads standard input (at most once). Every file is opened and its
// header checked up front, then closed again until its turn, so a missing
// or unrecognised file is reported before any packet is read and a long
// list does not hold one descriptor per file. Standard input, named pipes
// and devices cannot be read twice: of standard input only the magic
// number is checked up front, of the others nothing but that they exist,
// and their header when their turn comes. The error joins one
// *Error per bad path: ErrNotCapture for a file of another kind, the
// fs error (such as fs.ErrNotExist) otherwise.
//
// A file that ends inside its header (an empty file, or one cut inside its
// gzip header, its pcap file header or its first section header block, every
// byte of it what a capture begins with) is not of another kind but a
// truncated capture, such as a capture killed before its first write
// leaves: Open accepts it and Next reports it in its turn, as it reports a
// file cut inside a record (an *Error wrapping capture.ErrCorrupt and
// io.ErrUnexpectedEOF, Record 0), so that one empty file does not stop a
// replay of many.
func Open(paths ...string) (*Reader, error) {
	if !slices.Contains(paths, "-") {
		return open(os.Stdin, paths...)
	}
	stdin, reopened := pollableStdin()
	s, err := open(stdin, paths...)
	if reopened {
		if err != nil {
			stdin.Close()
		} else {
			s.ownStdin = true
		}
	}
	return s, err
}

// open is Open with stdin standing for standard input.
func open(stdin io.Reader, paths ...string) (*Reader, error) {
	if len(paths) == 0 {
		return nil, errors.New("capture: no capture files given")
	}
	s := &Reader{
		paths: slices.Clone(paths),
		stats: make([]Stats, len(paths)),
		raw:   bufio.NewReaderSize(nil, rawBufSize),
		in:    bufio.NewReaderSize(nil, bufSize),
	}
	if f, ok := stdin.(*os.File); ok && f.SetReadDeadline(time.Time{}) == nil {
		s.stdinFile = f
	}
	var errs []error
	for i, path := range paths {
		s.stats[i].Path = path
		if err := s.probe(i, stdin); err != nil && !truncatedHeader(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s.cur, s.probed = -1, true
	return s, nil
}

// probe checks that paths[i] is a capture file. Standard input cannot be
// opened twice: only its magic number is checked here, its header when its
// turn comes. Nor can a named pipe be read twice, nor a device: their
// header is checked in their turn.
func (s *Reader) probe(i int, stdin io.Reader) error {
	path := s.paths[i]
	if path != "-" {
		if fi, err := os.Stat(path); err == nil && fi.Mode()&(fs.ModeNamedPipe|fs.ModeDevice|fs.ModeSocket) != 0 {
			return nil
		}
		err := s.openFile(i)
		s.closeInput()
		return err
	}
	if s.stdin != nil {
		return &Error{Path: path, Err: errors.New("standard input given more than once")}
	}
	var head [4]byte
	n, err := io.ReadFull(stdin, head[:])
	s.stdin = io.MultiReader(bytes.NewReader(head[:n]), stdin)
	switch {
	case (err == io.EOF || err == io.ErrUnexpectedEOF) && magicPrefix(head[:n], true):
		return nil // cut short: Next reports it in its turn
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return &Error{Path: path, Err: fmt.Errorf("%d bytes, and no capture file begins with them", n), notCapture: true}
	case err != nil:
		return &Error{Path: path, Err: fmt.Errorf("read: %w", err)}
	}
	if binary.BigEndian.Uint16(head[:]) == gzipMagic {
		return nil
	}
	switch magic := binary.BigEndian.Uint32(head[:]); magic {
	case pcapMicroBE, pcapMicroLE, pcapNanoBE, pcapNanoLE, blockSectionHeader:
		return nil
	default:
		return &Error{Path: path, Err: fmt.Errorf("unknown magic number %#08x", magic), notCapture: true}
	}
}

// openFile opens paths[i] and reads its header, leaving the source at its
// first record.
func (s *Reader) openFile(i int) error {
	path := s.paths[i]
	s.cur = i
	s.records, s.offset, s.pending, s.lastTime = 0, 0, 0, 0
	s.win, s.pos = nil, 0
	s.ifaces, s.sawIface = s.ifaces[:0], false
	st := &s.stats[i]

	var src io.Reader
	if path == "-" {
		src = s.stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = fmt.Errorf("open: %w", pe.Err)
			}
			return &Error{Path: path, Err: err}
		}
		s.file, src = f, f
	}
	s.open = true

	s.raw.Reset(src)
	m, _ := s.raw.Peek(10) // a gzip header's fixed part
	if len(m) == 1 && m[0] == gzipMagic>>8 {
		st.Compressed = true
		return s.cutHeader(&truncated{what: "the gzip header", got: 1, want: 10})
	}
	if len(m) >= 2 && binary.BigEndian.Uint16(m) == gzipMagic {
		st.Compressed = true
		if len(m) < 10 {
			return s.cutHeader(&truncated{what: "the gzip header", got: len(m), want: 10})
		}
		var err error
		if s.gz == nil {
			s.gz, err = gzip.NewReader(s.raw)
		} else {
			err = s.gz.Reset(s.raw)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return s.cutHeader(&truncated{what: "the gzip header", got: -1})
		}
		if err != nil {
			return s.headerErr(fmt.Errorf("gzip: %w", err))
		}
		s.in.Reset(s.gz)
	} else {
		s.in.Reset(s.raw)
	}

	h, err := s.peek(4)
	if err != nil {
		if (err == io.EOF || err == io.ErrUnexpectedEOF) && magicPrefix(h, !st.Compressed) {
			cut := st.Compressed && err == io.ErrUnexpectedEOF
			if len(h) == 0 && !cut {
				return s.cutHeader(&truncated{gzip: st.Compressed})
			}
			return s.cutHeader(&truncated{what: "the magic number", got: len(h), want: 4, gzip: st.Compressed, cut: cut})
		}
		return s.headerErr(fmt.Errorf("reading the header: %w", s.readErr(err)))
	}
	switch magic := binary.BigEndian.Uint32(h); magic {
	case pcapMicroBE, pcapMicroLE, pcapNanoBE, pcapNanoLE:
		return s.pcapHeader(magic)
	case blockSectionHeader:
		s.format = kindPcapng
		st.Format = "pcapng"
		if err := s.ngSection(); err != nil {
			var fe *Error
			if errors.As(err, &fe) {
				if fe.corrupt && errors.Is(fe.Err, io.ErrUnexpectedEOF) {
					fe.Record = 0 // the file's first section header block is its header
					return fe
				}
				err = fe.Err
			}
			return s.headerErr(err)
		}
		return nil
	default:
		if st.Compressed {
			return s.headerErr(fmt.Errorf("unknown magic number %#08x in gzip data", magic))
		}
		return s.headerErr(fmt.Errorf("unknown magic number %#08x", magic))
	}
}

// headerErr reports a file whose header is unusable: not a capture
// file, unless the operating system failed to read it. Once Open has
// accepted the file (it changed since, or it is standard input), that is
// also corruption.
func (s *Reader) headerErr(err error) error {
	var pe *fs.PathError
	damaged := !errors.As(err, &pe)
	return &Error{Path: s.paths[s.cur], Compressed: s.stats[s.cur].Compressed, Err: err, notCapture: damaged, corrupt: damaged && s.probed}
}

// cutHeader reports a file that ends inside its header: a truncated
// capture, not a file of another kind (see Open).
func (s *Reader) cutHeader(t *truncated) error {
	return &Error{Path: s.paths[s.cur], Compressed: t.gzip, Err: t, corrupt: true}
}

// truncatedHeader reports whether err is cutHeader's: a file Open
// accepts, whose damage Next reports.
func truncatedHeader(err error) bool {
	var fe *Error
	return errors.As(err, &fe) && fe.Record == 0 && fe.corrupt && errors.Is(fe.Err, io.ErrUnexpectedEOF)
}

// pcapHeader reads the 24-byte pcap file header.
func (s *Reader) pcapHeader(magic uint32) error {
	h, err := s.peek(24)
	s.big = magic == pcapMicroBE || magic == pcapNanoBE
	if err != nil {
		if (err == io.EOF || err == io.ErrUnexpectedEOF) && (len(h) < 6 || s.u16(h[4:]) == 2) {
			gz := s.stats[s.cur].Compressed
			return s.cutHeader(&truncated{what: "the pcap file header", got: len(h), want: 24, gzip: gz, cut: gz && err == io.ErrUnexpectedEOF})
		}
		return s.headerErr(fmt.Errorf("pcap header: %w", s.readErr(err)))
	}
	s.format = kindPcap
	s.fracMul = 1e3
	st := &s.stats[s.cur]
	st.Format = "pcap"
	if magic == pcapNanoBE || magic == pcapNanoLE {
		s.fracMul = 1
		st.Format = "pcap-nsec"
	}
	if major, minor := s.u16(h[4:]), s.u16(h[6:]); major != 2 {
		return s.headerErr(fmt.Errorf("pcap version %d.%d not supported", major, minor))
	}
	// The upper bits of the link type field carry FCS information; libpcap
	// keeps the low 26 bits as the link type.
	s.link = flow.LinkType(s.u32(h[20:]) & 0x03ffffff)
	st.LinkType = s.link
	s.discard(24)
	s.offset = 24
	return nil
}

// Next reads the next record into p; see Reader for the errors.
func (s *Reader) Next(p *capture.Packet) error {
	if s.open && !s.big {
		// The common cases, in full here so that they take one call: a
		// little-endian pcap record, or enhanced packet block, already
		// buffered. nextSlow checks and reads everything else.
		s.release()
		b := s.win[s.pos:]
		switch {
		case s.format == kindPcap && len(b) >= 16:
			caplen := binary.LittleEndian.Uint32(b[8:])
			if n := 16 + int(caplen); caplen <= MaxCaptureLength && n <= len(b) {
				p.Data = b[16:n:n]
				p.WireLen = int(max(binary.LittleEndian.Uint32(b[12:]), caplen))
				p.TimeNs = int64(binary.LittleEndian.Uint32(b[0:]))*1e9 + int64(binary.LittleEndian.Uint32(b[4:]))*s.fracMul
				p.LinkType = s.link
				s.pending = n
				s.records++
				return nil
			}
		case s.format == kindPcapng && len(b) >= 32 && binary.LittleEndian.Uint32(b) == blockEnhancedPacket:
			// The checks of ngLength, ngPacket and ngTrailer.
			total := int(binary.LittleEndian.Uint32(b[4:]))
			id, caplen := binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[20:])
			if total >= 32 && total%4 == 0 && total <= len(b) && id < uint32(len(s.ifaces)) &&
				caplen <= uint32(total-32) && caplen <= MaxCaptureLength && binary.LittleEndian.Uint32(b[total-4:]) == uint32(total) {
				ifc := &s.ifaces[id]
				end := 28 + int(caplen)
				p.Data = b[28:end:end]
				p.TimeNs = ifc.timeNs(uint64(binary.LittleEndian.Uint32(b[12:]))<<32 | uint64(binary.LittleEndian.Uint32(b[16:])))
				p.WireLen = int(max(binary.LittleEndian.Uint32(b[24:]), caplen))
				p.LinkType = ifc.link
				s.lastTime = p.TimeNs
				s.pending = total
				s.records++
				return nil
			}
		}
	}
	return s.nextSlow(p)
}

// nextSlow is Next beyond its common case.
func (s *Reader) nextSlow(p *capture.Packet) error {
	if s.closed {
		return capture.ErrClosed
	}
	for {
		if !s.open {
			if s.next >= len(s.paths) {
				return io.EOF
			}
			i := s.next
			s.next++
			if err := s.openFile(i); err != nil {
				s.endFile(err)
				return err
			}
			s.poll = s.pollable()
		}
		var err error
		if s.format == kindPcap {
			err = s.pcapNext(p)
		} else {
			err = s.ngNext(p)
		}
		if err == nil {
			s.records++
			return nil
		}
		if err == io.EOF {
			s.endFile(nil)
			continue
		}
		if err == capture.ErrTimeout {
			return err // a quiet pipe: the file goes on
		}
		s.endFile(err)
		return err
	}
}

// endFile closes the current file and records how it ended.
func (s *Reader) endFile(err error) {
	st := &s.stats[s.cur]
	st.Packets, st.Err, st.Done = s.records, err, true
	s.closeInput()
}

// pollable returns the file being read if it is a pipe whose reads can
// time out, uncompressed: gzip keeps the error of a read that timed out
// and fails for good, so a compressed pipe is read without timeouts.
func (s *Reader) pollable() *os.File {
	if s.stats[s.cur].Compressed {
		return nil
	}
	if s.paths[s.cur] == "-" {
		return s.stdinFile
	}
	if fi, err := s.file.Stat(); err != nil || fi.Mode().IsRegular() {
		return nil
	}
	if s.file.SetReadDeadline(time.Time{}) != nil {
		return nil // a device, or a system where pipes take no deadlines
	}
	return s.file
}

// setDeadline sets the deadline of the next reads of a pipe; the zero
// time waits as long as it takes.
func (s *Reader) setDeadline(t time.Time) {
	if s.poll != nil {
		s.poll.SetReadDeadline(t)
	}
}

func (s *Reader) closeInput() error {
	s.open, s.pending = false, 0
	s.poll = nil
	s.win, s.pos = nil, 0
	s.raw.Reset(nil)
	s.in.Reset(nil)
	if s.file == nil {
		return nil
	}
	err := s.file.Close()
	s.file = nil
	return err
}

// Close closes the file being read. Next then returns capture.ErrClosed.
// Standard input is left open.
func (s *Reader) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.closeInput()
	if s.ownStdin {
		s.stdinFile.Close()
	}
	s.raw, s.in, s.gz, s.spill, s.stdin, s.stdinFile = nil, nil, nil, nil, nil, nil
	return err
}

// Current returns the path of the file the last call to Next read from or
// failed in ("" before the first call).
func (s *Reader) Current() string {
	if s.cur < 0 {
		return ""
	}
	return s.paths[s.cur]
}

// Files returns the state of every input file, in order. The caller owns
// the returned slice.
func (s *Reader) Files() []Stats {
	out := append([]Stats(nil), s.stats...)
	if s.open {
		out[s.cur].Packets = s.records
	}
	return out
}

func (s *Reader) u16(b []byte) uint16 {
	if s.big {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

func (s *Reader) u32(b []byte) uint32 {
	if s.big {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

func (s *Reader) u64(b []byte) uint64 {
	if s.big {
		return binary.BigEndian.Uint64(b)
	}
	return binary.LittleEndian.Uint64(b)
}

// release consumes the record the last Next returned. Its bytes were
// handed out from a Peek, valid until this read call.
func (s *Reader) release() {
	s.pos += s.pending
	s.offset += int64(s.pending)
	s.pending = 0
}

// peek returns the next n bytes of the stream without consuming them,
// valid until the next read. From the window when it holds them: a few
// instructions, where bufio.Reader.Peek, a call that cannot be inlined,
// took a fifth of the time of a record.
func (s *Reader) peek(n int) ([]byte, error) {
	if end := s.pos + n; end <= len(s.win) {
		return s.win[s.pos:end], nil
	}
	return s.peekSlow(n)
}

// peekSlow is peek through in, which reads more of the stream, and makes
// what in then holds the window.
func (s *Reader) peekSlow(n int) ([]byte, error) {
	s.unwindow()
	if s.poll != nil {
		s.setDeadline(time.Now().Add(PollInterval))
	}
	b, err := s.in.Peek(n)
	s.win, _ = s.in.Peek(s.in.Buffered()) // no read: the bytes are buffered
	return b, err
}

// discard consumes n bytes that a peek returned.
func (s *Reader) discard(n int) { s.pos += n }

// unwindow consumes in in the bytes consumed from the window and drops the
// window, before in is read directly.
func (s *Reader) unwindow() {
	if s.win != nil {
		s.in.Discard(s.pos) // buffered: cannot fail
		s.win, s.pos = nil, 0
	}
}

// readErr turns the error of a read that came up short into what it
// means inside a record: io.EOF there is io.ErrUnexpectedEOF.
func (s *Reader) readErr(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// short reports a read that came up short inside what, after got of its
// want bytes (want 0: its length is not known yet).
func (s *Reader) short(what string, got, want int, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// A pipe with nothing more for now. What was read stays in the
		// buffer: the record is read whole at a later call.
		return capture.ErrTimeout
	}
	gz := s.stats[s.cur].Compressed
	// gzip.Reader returns io.ErrUnexpectedEOF for a stream cut short and
	// io.EOF at its proper end; a file ends with io.EOF.
	cut := gz && err == io.ErrUnexpectedEOF
	err = s.readErr(err)
	var pe *fs.PathError
	if errors.As(err, &pe) { // the operating system failed, not the file
		return s.recordErr(fmt.Errorf("reading %s: %w", what, err), false)
	}
	if err == io.ErrUnexpectedEOF {
		return s.recordErr(&truncated{what: what, got: got, want: want, gzip: gz, cut: cut}, true)
	}
	return s.recordErr(fmt.Errorf("%s: %w", what, err), true)
}

func (s *Reader) corrupt(format string, args ...any) error {
	return s.recordErr(fmt.Errorf(format, args...), true)
}

func (s *Reader) recordErr(err error, corrupt bool) error {
	return &Error{Path: s.paths[s.cur], Record: s.records + 1, Offset: s.offset,
		Compressed: s.stats[s.cur].Compressed, Err: err, corrupt: corrupt}
}

// blockName names a pcapng block type in errors.
func blockName(typ uint32) string {
	switch typ {
	case blockSectionHeader:
		return "the section header block"
	case blockInterface:
		return "an interface description block"
	case blockEnhancedPacket:
		return "an enhanced packet block"
	case blockSimplePacket:
		return "a simple packet block"
	case blockPacketObsolete:
		return "a packet block"
	}
	return fmt.Sprintf("a block of type %#x", typ)
}

// pcapNext reads a pcap record: a 16-byte header (seconds, fraction,
// captured length, original length) and the captured bytes.
func (s *Reader) pcapNext(p *capture.Packet) error {
	s.release()
	h, err := s.peek(16)
	if err != nil {
		if len(h) == 0 && err == io.EOF {
			return io.EOF
		}
		return s.short("the record header", len(h), 16, err)
	}
	caplen := s.u32(h[8:])
	if caplen > MaxCaptureLength {
		return s.corrupt("captured length %d exceeds %d", caplen, MaxCaptureLength)
	}
	n := 16 + int(caplen)
	rec, err := s.peek(n)
	if err != nil {
		return s.short("the record data", len(rec)-16, int(caplen), err)
	}
	s.pcapRecord(p, rec)
	return nil
}

// pcapRecord returns the pcap record rec, header and data, in p.
func (s *Reader) pcapRecord(p *capture.Packet, rec []byte) {
	n := len(rec)
	caplen := uint32(n - 16)
	p.Data = rec[16:n:n]
	p.WireLen = int(max(s.u32(rec[12:]), caplen))
	p.TimeNs = int64(s.u32(rec[0:]))*1e9 + int64(s.u32(rec[4:]))*s.fracMul
	p.LinkType = s.link
	s.pending = n
}

// ngNext reads pcapng blocks up to and including the next packet block.
func (s *Reader) ngNext(p *capture.Packet) error {
	s.release()
	for {
		h, err := s.peek(8)
		if err != nil {
			if len(h) == 0 && err == io.EOF {
				return io.EOF
			}
			return s.short("a block header", len(h), 8, err)
		}
		typ := s.u32(h)
		if typ == blockSectionHeader {
			if err := s.ngSection(); err != nil {
				return err
			}
			continue
		}
		total, err := s.ngLength(typ, s.u32(h[4:]))
		if err != nil {
			return err
		}
		switch typ {
		case blockEnhancedPacket, blockPacketObsolete, blockSimplePacket:
			return s.ngPacket(p, typ, total)
		case blockInterface:
			err = s.ngInterface(total)
		default:
			err = s.ngSkip(typ, total)
		}
		if err != nil {
			return err
		}
	}
}

// ngLength checks a block's total length against its type's minimum
// and ngMaxBlock.
func (s *Reader) ngLength(typ, total uint32) (int, error) {
	least := uint32(12)
	switch typ {
	case blockSectionHeader:
		least = 28
	case blockInterface:
		least = 20
	case blockSimplePacket:
		least = 16
	case blockEnhancedPacket, blockPacketObsolete:
		least = 32
	}
	if total < least || total%4 != 0 || total > ngMaxBlock {
		return 0, s.corrupt("block type %#x: invalid length %d", typ, total)
	}
	return int(total), nil
}

// ngTrailer checks the length that closes a block against the one that
// opens it: the check that catches a block read out of step.
func (s *Reader) ngTrailer(typ uint32, total int, trailer []byte) error {
	if t := s.u32(trailer); t != uint32(total) {
		return s.corrupt("block type %#x: trailing length %d differs from leading length %d", typ, t, total)
	}
	return nil
}

// ngSkip consumes a block the reader has no use for.
func (s *Reader) ngSkip(typ uint32, total int) error {
	if total <= s.in.Size() {
		b, err := s.peek(total)
		if err != nil {
			return s.short(blockName(typ), len(b), total, err)
		}
		if err := s.ngTrailer(typ, total, b[total-4:]); err != nil {
			return err
		}
		s.discard(total)
		s.offset += int64(total)
		return nil
	}
	s.unwindow()
	s.setDeadline(time.Time{}) // consumed in part, the block cannot be begun again
	if n, err := s.in.Discard(total - 4); err != nil {
		return s.short(blockName(typ), n, total, err)
	}
	b, err := s.peek(4)
	if err != nil {
		return s.short(blockName(typ), total-4+len(b), total, err)
	}
	if err := s.ngTrailer(typ, total, b); err != nil {
		return err
	}
	s.discard(4)
	s.offset += int64(total)
	return nil
}

// ngSection reads a section header block: it sets the byte order of
// the section and forgets the previous section's interfaces.
func (s *Reader) ngSection() error {
	h, err := s.peek(16)
	if err != nil {
		return s.short(blockName(blockSectionHeader), len(h), 0, err)
	}
	switch binary.BigEndian.Uint32(h[8:]) {
	case byteOrderMagic:
		s.big = true
	case bits.ReverseBytes32(byteOrderMagic):
		s.big = false
	default:
		return s.corrupt("section header block: invalid byte-order magic %#08x", binary.BigEndian.Uint32(h[8:]))
	}
	total, err := s.ngLength(blockSectionHeader, s.u32(h[4:]))
	if err != nil {
		return err
	}
	if major, minor := s.u16(h[12:]), s.u16(h[14:]); major != 1 {
		return s.corrupt("pcapng version %d.%d not supported", major, minor)
	}
	s.ifaces = s.ifaces[:0]
	return s.ngSkip(blockSectionHeader, total)
}

// ngInterface reads an interface description block: link type, snap
// length and the options that scale timestamps.
func (s *Reader) ngInterface(total int) error {
	if total > s.in.Size() {
		return s.corrupt("interface description block of %d bytes is too long", total)
	}
	b, err := s.peek(total)
	if err != nil {
		return s.short(blockName(blockInterface), len(b), total, err)
	}
	if err := s.ngTrailer(blockInterface, total, b[total-4:]); err != nil {
		return err
	}
	if len(s.ifaces) >= ngMaxIfaces {
		return s.corrupt("more than %d interfaces in a section", ngMaxIfaces)
	}
	ifc := iface{
		link:    flow.LinkType(s.u16(b[8:])),
		snapLen: s.u32(b[12:]),
		units:   1e6, // the default resolution is microseconds
	}
	for opts := b[16 : total-4]; len(opts) >= 4; {
		code, n := s.u16(opts), int(s.u16(opts[2:]))
		if code == optEnd {
			break
		}
		opts = opts[4:]
		if n > len(opts) {
			return s.corrupt("interface description block: option %d of %d bytes overruns the block", code, n)
		}
		v := opts[:n]
		opts = opts[min((n+3)&^3, len(opts)):]
		switch {
		case code == optTsResol && n >= 1:
			units, ok := tsUnits(v[0])
			if !ok {
				return s.corrupt("interface description block: timestamp resolution %#02x out of range", v[0])
			}
			ifc.units = units
		case code == optTsOffset && n >= 8:
			ifc.tsOffset = int64(s.u64(v))
		}
	}
	s.ifaces = append(s.ifaces, ifc)
	if !s.sawIface {
		s.sawIface = true
		s.stats[s.cur].LinkType = ifc.link
	}
	s.discard(total)
	s.offset += int64(total)
	return nil
}

// ngPacket reads an enhanced, simple or obsolete packet block of total
// bytes. The header is checked before the block is read: the captured
// length must fit both the block and MaxCaptureLength.
func (s *Reader) ngPacket(p *capture.Packet, typ uint32, total int) error {
	hdr := 28
	if typ == blockSimplePacket {
		hdr = 12
	}
	h, err := s.peek(hdr)
	if err != nil {
		return s.short(blockName(typ), len(h), total, err)
	}
	var (
		ifc             *iface
		caplen, wirelen uint32
		ts              uint64
	)
	room := uint32(total - hdr - 4)
	if typ == blockSimplePacket {
		if len(s.ifaces) == 0 {
			return s.corrupt("simple packet block before any interface description block")
		}
		ifc = &s.ifaces[0]
		wirelen = s.u32(h[8:])
		caplen = min(wirelen, room)
		if ifc.snapLen != 0 {
			caplen = min(caplen, ifc.snapLen)
		}
	} else {
		id := s.u32(h[8:])
		if typ == blockPacketObsolete {
			id = uint32(s.u16(h[8:]))
		}
		if id >= uint32(len(s.ifaces)) {
			return s.corrupt("packet block on interface %d; the section describes %d", id, len(s.ifaces))
		}
		ifc = &s.ifaces[id]
		ts = uint64(s.u32(h[12:]))<<32 | uint64(s.u32(h[16:]))
		caplen, wirelen = s.u32(h[20:]), s.u32(h[24:])
		if caplen > room {
			return s.corrupt("captured length %d overruns the %d-byte packet block", caplen, total)
		}
	}
	if caplen > MaxCaptureLength {
		return s.corrupt("captured length %d exceeds %d", caplen, MaxCaptureLength)
	}
	end := hdr + int(caplen)
	if total <= s.in.Size() {
		b, err := s.peek(total)
		if err != nil {
			return s.short(blockName(typ), len(b), total, err)
		}
		if err := s.ngTrailer(typ, total, b[total-4:]); err != nil {
			return err
		}
		p.Data = b[hdr:end:end]
		s.pending = total
	} else {
		// Options too long for the buffer: copy the packet out, then skip.
		if s.spill == nil {
			s.spill = make([]byte, MaxCaptureLength)
		}
		s.discard(hdr)
		s.unwindow()
		s.setDeadline(time.Time{}) // consumed in part, the block cannot be begun again
		data := s.spill[:caplen:caplen]
		if n, err := io.ReadFull(s.in, data); err != nil {
			if err == io.ErrUnexpectedEOF {
				err = io.EOF // ReadFull's, after some bytes: the data ends
			}
			return s.short(blockName(typ), hdr+n, total, err)
		}
		if n, err := s.in.Discard(total - end - 4); err != nil {
			return s.short(blockName(typ), end+n, total, err)
		}
		b, err := s.peek(4)
		if err != nil {
			return s.short(blockName(typ), total-4+len(b), total, err)
		}
		if err := s.ngTrailer(typ, total, b); err != nil {
			return err
		}
		s.discard(4)
		s.offset += int64(total)
		p.Data = data
	}
	if typ == blockSimplePacket {
		p.TimeNs = s.lastTime // the block has no timestamp
	} else {
		p.TimeNs = ifc.timeNs(ts)
		s.lastTime = p.TimeNs
	}
	p.WireLen = int(max(wirelen, caplen))
	p.LinkType = ifc.link
	return nil
}

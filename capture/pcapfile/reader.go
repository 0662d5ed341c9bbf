package pcapfile

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/bits"
	"os"
	"slices"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// MaxCaptureLength is the longest record a capture file may hold: libpcap's
// MAXIMUM_SNAPLEN, the bound tcpdump and Wireshark also apply. A record
// header that claims more is taken as damage rather than trusted, so a
// FileSource never allocates according to a length read from a file.
const MaxCaptureLength = 262144

// ErrNotCapture reports a file that is neither pcap nor pcapng, plain or
// gzip-compressed. OpenFiles returns it (wrapped in a *FileError).
var ErrNotCapture = errors.New("capture: not a pcap or pcapng file")

const (
	// fileBufSize is the read buffer. Records are handed out from it without
	// a copy, so it holds a whole packet block: the largest record plus
	// room for pcapng options.
	fileBufSize = MaxCaptureLength + 64<<10
	// fileRawBufSize buffers the compressed bytes of a gzip file.
	fileRawBufSize = 64 << 10
	// fileNgMaxBlock bounds the length of any pcapng block. Larger blocks
	// (Wireshark's limit is about the same) are taken as damage.
	fileNgMaxBlock = 64 << 20
	// fileNgMaxIfaces bounds the interfaces of one pcapng section, so that
	// interface blocks cannot grow the reader's memory with the file.
	fileNgMaxIfaces = 1 << 16
)

// Magic numbers, as the first four bytes of a file read big-endian.
const (
	filePcapMicroBE = 0xa1b2c3d4
	filePcapMicroLE = 0xd4c3b2a1
	filePcapNanoBE  = 0xa1b23c4d
	filePcapNanoLE  = 0x4d3cb2a1
	fileGzipMagic   = 0x1f8b // first two bytes only
)

// pcapng block types, option codes and the byte-order magic.
const (
	fileNgSectionHeader  = 0x0a0d0d0a
	fileNgInterface      = 0x00000001
	fileNgPacketObsolete = 0x00000002
	fileNgSimplePacket   = 0x00000003
	fileNgEnhancedPacket = 0x00000006
	fileNgByteOrderMagic = 0x1a2b3c4d

	fileNgOptEnd      = 0
	fileNgOptTsResol  = 9
	fileNgOptTsOffset = 14
)

type fileFormat uint8

const (
	fileFormatPcap fileFormat = iota + 1
	fileFormatPcapng
)

// FileStats describes one input of a FileSource.
type FileStats struct {
	Path       string        // as given to OpenFiles; "-" is standard input
	Format     string        // "pcap", "pcap-nsec" or "pcapng"; "" until the file is opened
	Compressed bool          // gzip
	LinkType   flow.LinkType // pcap: the file's; pcapng: the first interface's (each packet carries its own)
	Packets    int64         // records returned so far
	Err        error         // the error that ended the file early, nil if it was read to its end
	Done       bool          // the file has been read (to its end or to Err)
}

// FileError is damage found in one input file, or the reason it could not
// be opened. It wraps capture.ErrCorrupt when the file's contents are damaged
// (errors.Is(err, capture.ErrCorrupt)), ErrNotCapture when the file is not a capture
// file of a known kind, and io.ErrUnexpectedEOF when the file ends inside a
// record.
type FileError struct {
	Path   string // as given to OpenFiles; "-" is standard input
	Record int64  // 1-based number of the packet record being read; 0: the file header
	Offset int64  // byte offset of the damaged record or block (of the decompressed stream for gzip)
	Err    error  // what is wrong

	corrupt    bool
	notCapture bool
}

func (e *FileError) Error() string {
	msg := "capture: " + e.Path + ": "
	if e.Record > 0 {
		msg += fmt.Sprintf("record %d at offset %d: ", e.Record, e.Offset)
	}
	if e.notCapture {
		msg += "not a pcap or pcapng file: "
	}
	return msg + e.Err.Error()
}

// Unwrap returns capture.ErrCorrupt and ErrNotCapture where they apply, and Err.
func (e *FileError) Unwrap() []error {
	errs := make([]error, 0, 3)
	if e.corrupt {
		errs = append(errs, capture.ErrCorrupt)
	}
	if e.notCapture {
		errs = append(errs, ErrNotCapture)
	}
	return append(errs, e.Err)
}

// fileIface is what a pcapng interface description block says about its
// packets.
type fileIface struct {
	link     flow.LinkType
	snapLen  uint32
	units    uint64 // timestamp units per second
	tsOffset int64  // seconds added to every timestamp (if_tsoffset)
}

// timeNs converts a pcapng timestamp to Unix nanoseconds. Garbage in a
// damaged file wraps around rather than failing: the framing is intact.
func (ifc *fileIface) timeNs(ts uint64) int64 {
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

// fileTsUnits decodes an if_tsresol value: timestamp units per second.
func fileTsUnits(v byte) (uint64, bool) {
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

// FileSource is a capture.Source that reads pcap and pcapng files, plain or
// gzip-compressed, one after another in the order given to OpenFiles.
//
// Each file's format is told by its first bytes, never by its name: pcap
// with microsecond or nanosecond timestamps in either byte order, pcapng
// (any number of sections, either byte order, several interfaces with their
// own link types and timestamp resolutions), and either of them inside gzip.
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
// ends inside a record (or a gzip stream that fails) make Next return a
// *FileError that wraps capture.ErrCorrupt and names the file, the record number and
// the offset. Records longer than the snap length the file declares, but
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
// Current and Files tell which file is being read and how each one ended.
// A FileSource is used by one goroutine.
//
// The records are framed here rather than by gopacket's pcapgo readers,
// which FuzzFileSource uses as the reference decoder instead. In pcapgo
// v1.7.7 the pcap reader reports a file cut right after a record header as
// a clean io.EOF, and the pcapng reader trusts a packet block's captured
// length without checking it against the block, growing a buffer to it (a
// 4-byte packet claiming 100 MiB, in a 50 MiB file, allocated 127 MiB) and
// reading on through the following blocks; it also allocates per packet
// for link types above 255 when asked for each interface's link type.
// Framing both formats here is little code, and reads a record in half the
// time pcapgo takes.
type FileSource struct {
	paths []string
	stats []FileStats

	next    int  // index of the next file to open
	cur     int  // index of the file being read, -1 before the first
	probed  bool // OpenFiles has accepted every file
	open    bool
	closed  bool
	file    *os.File
	stdin   io.Reader // standard input, with the bytes OpenFiles looked at put back
	raw     *bufio.Reader
	gz      *gzip.Reader
	in      *bufio.Reader // the decompressed stream records are read from
	spill   []byte        // holds a packet whose block is too big for in
	ifaces  []fileIface
	format  fileFormat
	big     bool          // big-endian file or pcapng section
	fracMul int64         // pcap: nanoseconds per unit of the fraction field
	link    flow.LinkType // pcap: the file's link type

	records  int64 // records returned from the current file
	offset   int64 // offset of the next record or block in the current file
	pending  int   // bytes of the last returned record still in the buffer
	lastTime int64 // timestamp of the last packet, for simple packet blocks
	sawIface bool  // an interface description block has been read
}

var _ capture.Source = (*FileSource)(nil)

// OpenFiles returns a FileSource that reads the files at paths in order;
// "-" reads standard input (at most once). Every file is opened and its
// header checked up front, then closed again until its turn, so a missing
// or unrecognised file is reported before any packet is read and a long
// list does not hold one descriptor per file. The error joins one
// *FileError per bad path: ErrNotCapture for a file of another kind, the
// fs error (such as fs.ErrNotExist) otherwise.
func OpenFiles(paths ...string) (*FileSource, error) {
	return fileOpenFiles(os.Stdin, paths...)
}

// fileOpenFiles is OpenFiles with stdin standing for standard input.
func fileOpenFiles(stdin io.Reader, paths ...string) (*FileSource, error) {
	if len(paths) == 0 {
		return nil, errors.New("capture: no capture files given")
	}
	s := &FileSource{
		paths: slices.Clone(paths),
		stats: make([]FileStats, len(paths)),
		raw:   bufio.NewReaderSize(nil, fileRawBufSize),
		in:    bufio.NewReaderSize(nil, fileBufSize),
	}
	var errs []error
	for i, path := range paths {
		s.stats[i].Path = path
		if err := s.fileProbe(i, stdin); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s.cur, s.probed = -1, true
	return s, nil
}

// fileProbe checks that paths[i] is a capture file. Standard input cannot be
// opened twice: only its magic number is checked here, its header when its
// turn comes.
func (s *FileSource) fileProbe(i int, stdin io.Reader) error {
	path := s.paths[i]
	if path != "-" {
		err := s.fileOpen(i)
		s.fileCloseInput()
		return err
	}
	if s.stdin != nil {
		return &FileError{Path: path, Err: errors.New("standard input given more than once")}
	}
	var head [4]byte
	n, err := io.ReadFull(stdin, head[:])
	s.stdin = io.MultiReader(bytes.NewReader(head[:n]), stdin)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return &FileError{Path: path, Err: fmt.Errorf("%d bytes are too short for a header", n), notCapture: true}
	case err != nil:
		return &FileError{Path: path, Err: fmt.Errorf("read: %w", err)}
	}
	if binary.BigEndian.Uint16(head[:]) == fileGzipMagic {
		return nil
	}
	switch magic := binary.BigEndian.Uint32(head[:]); magic {
	case filePcapMicroBE, filePcapMicroLE, filePcapNanoBE, filePcapNanoLE, fileNgSectionHeader:
		return nil
	default:
		return &FileError{Path: path, Err: fmt.Errorf("unknown magic number %#08x", magic), notCapture: true}
	}
}

// fileOpen opens paths[i] and reads its header, leaving the source at its
// first record.
func (s *FileSource) fileOpen(i int) error {
	path := s.paths[i]
	s.cur = i
	s.records, s.offset, s.pending, s.lastTime = 0, 0, 0, 0
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
			return &FileError{Path: path, Err: err}
		}
		s.file, src = f, f
	}
	s.open = true

	s.raw.Reset(src)
	if m, _ := s.raw.Peek(2); len(m) == 2 && binary.BigEndian.Uint16(m) == fileGzipMagic {
		var err error
		if s.gz == nil {
			s.gz, err = gzip.NewReader(s.raw)
		} else {
			err = s.gz.Reset(s.raw)
		}
		if err != nil {
			return s.fileHeaderErr(fmt.Errorf("gzip: %w", err))
		}
		s.in.Reset(s.gz)
		st.Compressed = true
	} else {
		s.in.Reset(s.raw)
	}

	h, err := s.in.Peek(4)
	if err != nil {
		if len(h) == 0 && err == io.EOF {
			return s.fileHeaderErr(errors.New("empty file"))
		}
		return s.fileHeaderErr(fmt.Errorf("reading the header: %w", s.fileReadErr(err)))
	}
	switch magic := binary.BigEndian.Uint32(h); magic {
	case filePcapMicroBE, filePcapMicroLE, filePcapNanoBE, filePcapNanoLE:
		return s.filePcapHeader(magic)
	case fileNgSectionHeader:
		s.format = fileFormatPcapng
		st.Format = "pcapng"
		if err := s.fileNgSection(); err != nil {
			var fe *FileError
			if errors.As(err, &fe) {
				err = fe.Err
			}
			return s.fileHeaderErr(err)
		}
		return nil
	default:
		if st.Compressed {
			return s.fileHeaderErr(fmt.Errorf("unknown magic number %#08x in gzip data", magic))
		}
		return s.fileHeaderErr(fmt.Errorf("unknown magic number %#08x", magic))
	}
}

// fileHeaderErr reports a file whose header is unusable: not a capture
// file, unless the operating system failed to read it. Once OpenFiles has
// accepted the file (it changed since, or it is standard input), that is
// also corruption.
func (s *FileSource) fileHeaderErr(err error) error {
	var pe *fs.PathError
	damaged := !errors.As(err, &pe)
	return &FileError{Path: s.paths[s.cur], Err: err, notCapture: damaged, corrupt: damaged && s.probed}
}

// filePcapHeader reads the 24-byte pcap file header.
func (s *FileSource) filePcapHeader(magic uint32) error {
	h, err := s.in.Peek(24)
	if err != nil {
		return s.fileHeaderErr(fmt.Errorf("pcap header: %w", s.fileReadErr(err)))
	}
	s.format = fileFormatPcap
	s.big = magic == filePcapMicroBE || magic == filePcapNanoBE
	s.fracMul = 1e3
	st := &s.stats[s.cur]
	st.Format = "pcap"
	if magic == filePcapNanoBE || magic == filePcapNanoLE {
		s.fracMul = 1
		st.Format = "pcap-nsec"
	}
	if major, minor := s.u16(h[4:]), s.u16(h[6:]); major != 2 {
		return s.fileHeaderErr(fmt.Errorf("pcap version %d.%d not supported", major, minor))
	}
	// The upper bits of the link type field carry FCS information; libpcap
	// keeps the low 26 bits as the link type.
	s.link = flow.LinkType(s.u32(h[20:]) & 0x03ffffff)
	st.LinkType = s.link
	s.in.Discard(24)
	s.offset = 24
	return nil
}

// Next reads the next record into p; see FileSource for the errors.
func (s *FileSource) Next(p *capture.Packet) error {
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
			if err := s.fileOpen(i); err != nil {
				s.fileEnd(err)
				return err
			}
		}
		var err error
		if s.format == fileFormatPcap {
			err = s.filePcapNext(p)
		} else {
			err = s.fileNgNext(p)
		}
		if err == nil {
			s.records++
			return nil
		}
		if err == io.EOF {
			s.fileEnd(nil)
			continue
		}
		s.fileEnd(err)
		return err
	}
}

// fileEnd closes the current file and records how it ended.
func (s *FileSource) fileEnd(err error) {
	st := &s.stats[s.cur]
	st.Packets, st.Err, st.Done = s.records, err, true
	s.fileCloseInput()
}

func (s *FileSource) fileCloseInput() error {
	s.open, s.pending = false, 0
	s.raw.Reset(nil)
	s.in.Reset(nil)
	if s.file == nil {
		return nil
	}
	err := s.file.Close()
	s.file = nil
	return err
}

// Close closes the file being read. Next then returns capture.ErrClosed. Standard
// input is left open.
func (s *FileSource) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.fileCloseInput()
	s.raw, s.in, s.gz, s.spill, s.stdin = nil, nil, nil, nil, nil
	return err
}

// Current returns the path of the file the last call to Next read from or
// failed in ("" before the first call).
func (s *FileSource) Current() string {
	if s.cur < 0 {
		return ""
	}
	return s.paths[s.cur]
}

// Files returns the state of every input file, in order. The caller owns
// the returned slice.
func (s *FileSource) Files() []FileStats {
	out := append([]FileStats(nil), s.stats...)
	if s.open {
		out[s.cur].Packets = s.records
	}
	return out
}

func (s *FileSource) u16(b []byte) uint16 {
	if s.big {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

func (s *FileSource) u32(b []byte) uint32 {
	if s.big {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

func (s *FileSource) u64(b []byte) uint64 {
	if s.big {
		return binary.BigEndian.Uint64(b)
	}
	return binary.LittleEndian.Uint64(b)
}

// fileRelease consumes the record the last Next returned. Its bytes were
// handed out from a Peek, valid until this read call.
func (s *FileSource) fileRelease() {
	if s.pending > 0 {
		s.in.Discard(s.pending) // buffered: cannot fail
		s.offset += int64(s.pending)
		s.pending = 0
	}
}

// fileReadErr turns the error of a read that came up short into what it
// means inside a record: io.EOF there is io.ErrUnexpectedEOF.
func (s *FileSource) fileReadErr(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// fileShort reports a read that came up short inside what.
func (s *FileSource) fileShort(what string, err error) error {
	err = s.fileReadErr(err)
	var pe *fs.PathError
	if errors.As(err, &pe) { // the operating system failed, not the file
		return s.fileErr(fmt.Errorf("reading %s: %w", what, err), false)
	}
	if err == io.ErrUnexpectedEOF {
		return s.fileErr(fmt.Errorf("file ends inside %s: %w", what, err), true)
	}
	return s.fileErr(fmt.Errorf("%s: %w", what, err), true)
}

func (s *FileSource) fileCorrupt(format string, args ...any) error {
	return s.fileErr(fmt.Errorf(format, args...), true)
}

func (s *FileSource) fileErr(err error, corrupt bool) error {
	return &FileError{Path: s.paths[s.cur], Record: s.records + 1, Offset: s.offset, Err: err, corrupt: corrupt}
}

// filePcapNext reads a pcap record: a 16-byte header (seconds, fraction,
// captured length, original length) and the captured bytes.
func (s *FileSource) filePcapNext(p *capture.Packet) error {
	s.fileRelease()
	h, err := s.in.Peek(16)
	if err != nil {
		if len(h) == 0 && err == io.EOF {
			return io.EOF
		}
		return s.fileShort("the record header", err)
	}
	caplen := s.u32(h[8:])
	if caplen > MaxCaptureLength {
		return s.fileCorrupt("captured length %d exceeds %d", caplen, MaxCaptureLength)
	}
	n := 16 + int(caplen)
	rec, err := s.in.Peek(n)
	if err != nil {
		return s.fileShort("the record", err)
	}
	p.Data = rec[16:n:n]
	p.WireLen = int(max(s.u32(rec[12:]), caplen))
	p.TimeNs = int64(s.u32(rec[0:]))*1e9 + int64(s.u32(rec[4:]))*s.fracMul
	p.LinkType = s.link
	s.pending = n
	return nil
}

// fileNgNext reads pcapng blocks up to and including the next packet block.
func (s *FileSource) fileNgNext(p *capture.Packet) error {
	s.fileRelease()
	for {
		h, err := s.in.Peek(8)
		if err != nil {
			if len(h) == 0 && err == io.EOF {
				return io.EOF
			}
			return s.fileShort("a block header", err)
		}
		typ := s.u32(h)
		if typ == fileNgSectionHeader {
			if err := s.fileNgSection(); err != nil {
				return err
			}
			continue
		}
		total, err := s.fileNgLength(typ, s.u32(h[4:]))
		if err != nil {
			return err
		}
		switch typ {
		case fileNgEnhancedPacket, fileNgPacketObsolete, fileNgSimplePacket:
			return s.fileNgPacket(p, typ, total)
		case fileNgInterface:
			err = s.fileNgInterface(total)
		default:
			err = s.fileNgSkip(typ, total)
		}
		if err != nil {
			return err
		}
	}
}

// fileNgLength checks a block's total length against its type's minimum
// and fileNgMaxBlock.
func (s *FileSource) fileNgLength(typ, total uint32) (int, error) {
	least := uint32(12)
	switch typ {
	case fileNgSectionHeader:
		least = 28
	case fileNgInterface:
		least = 20
	case fileNgSimplePacket:
		least = 16
	case fileNgEnhancedPacket, fileNgPacketObsolete:
		least = 32
	}
	if total < least || total%4 != 0 || total > fileNgMaxBlock {
		return 0, s.fileCorrupt("block type %#x: invalid length %d", typ, total)
	}
	return int(total), nil
}

// fileNgTrailer checks the length that closes a block against the one that
// opens it: the check that catches a block read out of step.
func (s *FileSource) fileNgTrailer(typ uint32, total int, trailer []byte) error {
	if t := s.u32(trailer); t != uint32(total) {
		return s.fileCorrupt("block type %#x: trailing length %d differs from leading length %d", typ, t, total)
	}
	return nil
}

// fileNgSkip consumes a block the reader has no use for.
func (s *FileSource) fileNgSkip(typ uint32, total int) error {
	if total <= s.in.Size() {
		b, err := s.in.Peek(total)
		if err != nil {
			return s.fileShort(fmt.Sprintf("a block of type %#x", typ), err)
		}
		if err := s.fileNgTrailer(typ, total, b[total-4:]); err != nil {
			return err
		}
		s.in.Discard(total)
		s.offset += int64(total)
		return nil
	}
	if _, err := s.in.Discard(total - 4); err != nil {
		return s.fileShort(fmt.Sprintf("a block of type %#x", typ), err)
	}
	b, err := s.in.Peek(4)
	if err != nil {
		return s.fileShort(fmt.Sprintf("a block of type %#x", typ), err)
	}
	if err := s.fileNgTrailer(typ, total, b); err != nil {
		return err
	}
	s.in.Discard(4)
	s.offset += int64(total)
	return nil
}

// fileNgSection reads a section header block: it sets the byte order of
// the section and forgets the previous section's interfaces.
func (s *FileSource) fileNgSection() error {
	h, err := s.in.Peek(16)
	if err != nil {
		return s.fileShort("the section header block", err)
	}
	switch binary.BigEndian.Uint32(h[8:]) {
	case fileNgByteOrderMagic:
		s.big = true
	case bits.ReverseBytes32(fileNgByteOrderMagic):
		s.big = false
	default:
		return s.fileCorrupt("section header block: invalid byte-order magic %#08x", binary.BigEndian.Uint32(h[8:]))
	}
	total, err := s.fileNgLength(fileNgSectionHeader, s.u32(h[4:]))
	if err != nil {
		return err
	}
	if major, minor := s.u16(h[12:]), s.u16(h[14:]); major != 1 {
		return s.fileCorrupt("pcapng version %d.%d not supported", major, minor)
	}
	s.ifaces = s.ifaces[:0]
	return s.fileNgSkip(fileNgSectionHeader, total)
}

// fileNgInterface reads an interface description block: link type, snap
// length and the options that scale timestamps.
func (s *FileSource) fileNgInterface(total int) error {
	if total > s.in.Size() {
		return s.fileCorrupt("interface description block of %d bytes is too long", total)
	}
	b, err := s.in.Peek(total)
	if err != nil {
		return s.fileShort("an interface description block", err)
	}
	if err := s.fileNgTrailer(fileNgInterface, total, b[total-4:]); err != nil {
		return err
	}
	if len(s.ifaces) >= fileNgMaxIfaces {
		return s.fileCorrupt("more than %d interfaces in a section", fileNgMaxIfaces)
	}
	ifc := fileIface{
		link:    flow.LinkType(s.u16(b[8:])),
		snapLen: s.u32(b[12:]),
		units:   1e6, // the default resolution is microseconds
	}
	for opts := b[16 : total-4]; len(opts) >= 4; {
		code, n := s.u16(opts), int(s.u16(opts[2:]))
		if code == fileNgOptEnd {
			break
		}
		opts = opts[4:]
		if n > len(opts) {
			return s.fileCorrupt("interface description block: option %d of %d bytes overruns the block", code, n)
		}
		v := opts[:n]
		opts = opts[min((n+3)&^3, len(opts)):]
		switch {
		case code == fileNgOptTsResol && n >= 1:
			units, ok := fileTsUnits(v[0])
			if !ok {
				return s.fileCorrupt("interface description block: timestamp resolution %#02x out of range", v[0])
			}
			ifc.units = units
		case code == fileNgOptTsOffset && n >= 8:
			ifc.tsOffset = int64(s.u64(v))
		}
	}
	s.ifaces = append(s.ifaces, ifc)
	if !s.sawIface {
		s.sawIface = true
		s.stats[s.cur].LinkType = ifc.link
	}
	s.in.Discard(total)
	s.offset += int64(total)
	return nil
}

// fileNgPacket reads an enhanced, simple or obsolete packet block of total
// bytes. The header is checked before the block is read: the captured
// length must fit both the block and MaxCaptureLength.
func (s *FileSource) fileNgPacket(p *capture.Packet, typ uint32, total int) error {
	hdr := 28
	if typ == fileNgSimplePacket {
		hdr = 12
	}
	h, err := s.in.Peek(hdr)
	if err != nil {
		return s.fileShort("a packet block header", err)
	}
	var (
		ifc             *fileIface
		caplen, wirelen uint32
		ts              uint64
	)
	room := uint32(total - hdr - 4)
	if typ == fileNgSimplePacket {
		if len(s.ifaces) == 0 {
			return s.fileCorrupt("simple packet block before any interface description block")
		}
		ifc = &s.ifaces[0]
		wirelen = s.u32(h[8:])
		caplen = min(wirelen, room)
		if ifc.snapLen != 0 {
			caplen = min(caplen, ifc.snapLen)
		}
	} else {
		id := s.u32(h[8:])
		if typ == fileNgPacketObsolete {
			id = uint32(s.u16(h[8:]))
		}
		if id >= uint32(len(s.ifaces)) {
			return s.fileCorrupt("packet block on interface %d; the section describes %d", id, len(s.ifaces))
		}
		ifc = &s.ifaces[id]
		ts = uint64(s.u32(h[12:]))<<32 | uint64(s.u32(h[16:]))
		caplen, wirelen = s.u32(h[20:]), s.u32(h[24:])
		if caplen > room {
			return s.fileCorrupt("captured length %d overruns the %d-byte packet block", caplen, total)
		}
	}
	if caplen > MaxCaptureLength {
		return s.fileCorrupt("captured length %d exceeds %d", caplen, MaxCaptureLength)
	}
	end := hdr + int(caplen)
	if total <= s.in.Size() {
		b, err := s.in.Peek(total)
		if err != nil {
			return s.fileShort("a packet block", err)
		}
		if err := s.fileNgTrailer(typ, total, b[total-4:]); err != nil {
			return err
		}
		p.Data = b[hdr:end:end]
		s.pending = total
	} else {
		// Options too long for the buffer: copy the packet out, then skip.
		if s.spill == nil {
			s.spill = make([]byte, MaxCaptureLength)
		}
		s.in.Discard(hdr)
		data := s.spill[:caplen:caplen]
		if _, err := io.ReadFull(s.in, data); err != nil {
			return s.fileShort("a packet block", err)
		}
		if _, err := s.in.Discard(total - end - 4); err != nil {
			return s.fileShort("a packet block", err)
		}
		b, err := s.in.Peek(4)
		if err != nil {
			return s.fileShort("a packet block", err)
		}
		if err := s.fileNgTrailer(typ, total, b); err != nil {
			return err
		}
		s.in.Discard(4)
		s.offset += int64(total)
		p.Data = data
	}
	if typ == fileNgSimplePacket {
		p.TimeNs = s.lastTime // the block has no timestamp
	} else {
		p.TimeNs = ifc.timeNs(ts)
		s.lastTime = p.TimeNs
	}
	p.WireLen = int(max(wirelen, caplen))
	p.LinkType = ifc.link
	return nil
}

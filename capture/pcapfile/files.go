package pcapfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// Magic numbers, as the first four bytes of a file read big-endian.
const (
	pcapMicroBE = 0xa1b2c3d4
	pcapMicroLE = 0xd4c3b2a1
	pcapNanoBE  = 0xa1b23c4d
	pcapNanoLE  = 0x4d3cb2a1
	gzipMagic   = 0x1f8b // first two bytes only
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
		in:    newBuffer(bufSize),
	}
	s.pool = s.in.pool
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
	if err := s.stream(src, st); err != nil {
		return err
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

// endFile closes the current file and records how it ended.
func (s *Reader) endFile(err error) {
	st := &s.stats[s.cur]
	st.Packets, st.Err, st.Done = s.records, err, true
	if i := damageReason(err); i >= 0 {
		s.damaged[i].Add(1)
	}
	s.closeInput()
}

// DamageReasons are the reasons Damaged counts damaged files under: a file
// with no data at all (capture.ErrEmpty), one that ends inside its header
// or a record (io.ErrUnexpectedEOF, tcpdump's "truncated dump file"), one
// whose framing is wrong (any other capture.ErrCorrupt).
var DamageReasons = [...]string{"empty", "truncated", "damaged"}

// damageReason returns the index in DamageReasons of the error a file
// ended with, or -1 if it is not damage (nil, or an error of the reading
// rather than of the file).
func damageReason(err error) int {
	switch {
	case !errors.Is(err, capture.ErrCorrupt):
		return -1
	case errors.Is(err, capture.ErrEmpty):
		return 0
	case errors.Is(err, io.ErrUnexpectedEOF):
		return 1
	default:
		return 2
	}
}

// Damaged returns how many of the input files have been found damaged so
// far, by reason (DamageReasons; reasons with none are left out). Unlike
// Files it may be called while another goroutine reads: it is the one
// count of damaged files a run keeps (replay's totals and --strict).
func (s *Reader) Damaged() map[string]uint64 {
	m := make(map[string]uint64)
	for i := range s.damaged {
		if n := s.damaged[i].Load(); n != 0 {
			m[DamageReasons[i]] = n
		}
	}
	return m
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
// the returned slice. It must not be called while another goroutine reads
// (see Damaged).
func (s *Reader) Files() []Stats {
	out := append([]Stats(nil), s.stats...)
	if s.open {
		out[s.cur].Packets = s.records
	}
	return out
}

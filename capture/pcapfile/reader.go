package pcapfile

import (
	"bufio"
	"encoding/binary"
	"io"
	"os"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// MaxCaptureLength is the longest record a capture file may hold: libpcap's
// MAXIMUM_SNAPLEN, the bound tcpdump and Wireshark also apply. A record
// header that claims more is taken as damage rather than trusted, so a
// Reader never allocates according to a length read from a file.
const MaxCaptureLength = 262144

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

type kind uint8

const (
	kindPcap kind = iota + 1
	kindPcapng
)

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
	// damaged counts the files found damaged, by reason (DamageReasons);
	// atomic, for Damaged while another goroutine reads.
	damaged [len(DamageReasons)]atomic.Uint64

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
	in   *buffer  // the decompressed stream records are read from
	pool *bufPool // in's, for ReleaseBatch
	// carry is the first record of the next batch, read when the buffer
	// of the batch being read ran out (NextBatch).
	carry struct {
		frame capture.Frame
		spill []byte // its buffer, when it was spilled
		set   bool
	}
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

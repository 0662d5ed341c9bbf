package pcapfile

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
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

package pcapfile

import (
	"encoding/binary"

	"github.com/flowdedup/flowdedup/capture"
)

// maxBatch bounds the records of one batch: as many as the smallest
// records (a 16-byte pcap header and no data) fill a buffer.
const maxBatch = bufSize / 16

var _ capture.BatchSource = (*Reader)(nil)

// NextBatch reads records into b as Next does, by reference: the records
// of one read buffer at most (about 4000 of 80 bytes), up to the first
// error, which it returns after them. The buffers b points into are b's
// until ReleaseBatch: the Reader reads on into other buffers meanwhile
// (the number of batches out at once bounds its memory, about 330 KiB
// each). A record whose pcapng block is longer than the buffer is copied
// into a buffer of its own, which b keeps.
func (s *Reader) NextBatch(b *capture.Batch) error {
	b.Frames = b.Frames[:0]
	b.Buffers = b.Buffers[:0]
	if s.closed {
		return capture.ErrClosed
	}
	s.in.pinned = true
	var err error
	if s.carry.set {
		b.Frames = append(b.Frames, s.carry.frame)
		if s.carry.spill != nil {
			b.Buffers = append(b.Buffers, s.carry.spill)
		}
		s.carry.set, s.carry.spill = false, nil
	}
	for len(b.Frames) < maxBatch {
		if s.open && !s.big {
			// The records the window holds whole, in a loop of their
			// own: Next's common cases without a call and a Packet each.
			switch s.format {
			case kindPcap:
				s.pcapBatch(b)
			case kindPcapng:
				s.ngBatch(b)
			}
			if len(b.Frames) == maxBatch {
				break
			}
		}
		held := len(s.in.held)
		var p capture.Packet
		if err = s.Next(&p); err != nil {
			break
		}
		var spill []byte
		if s.spill != nil && len(p.Data) > 0 && &p.Data[0] == &s.spill[0] {
			spill, s.spill = s.spill, nil // the batch keeps it
		}
		f := capture.Frame{Data: p.Data, TimeNs: p.TimeNs, LinkType: p.LinkType}
		if len(s.in.held) != held && len(b.Frames) > 0 {
			// The buffer ran out and the reader moved on to a fresh
			// one: p is the first record of the next batch.
			s.carry.frame, s.carry.spill, s.carry.set = f, spill, true
			break
		}
		b.Frames = append(b.Frames, f)
		if spill != nil {
			b.Buffers = append(b.Buffers, spill)
		}
	}
	if s.carry.set {
		// Every record of b is in the buffers left behind; the current
		// one is the next batch's.
		b.Buffers = s.in.unpin(b.Buffers, false)
	} else if s.in != nil {
		// The last record handed out is consumed now, so that the
		// unread bytes behind it are what moves to a fresh buffer.
		s.release()
		s.unwindow()
		b.Buffers = s.in.unpin(b.Buffers, true)
	}
	return err
}

// pcapBatch appends to b the little-endian pcap records that the window
// holds whole, as Next's common case reads them one at a time, and
// consumes them.
func (s *Reader) pcapBatch(b *capture.Batch) {
	s.release()
	win, pos := s.win, s.pos
	frames := b.Frames
	link, frac := s.link, s.fracMul
	for len(frames) < maxBatch && len(win)-pos >= 16 {
		h := win[pos : pos+16]
		caplen := binary.LittleEndian.Uint32(h[8:])
		end := pos + 16 + int(caplen)
		if caplen > MaxCaptureLength || end > len(win) {
			break // Next says what it is
		}
		t := int64(binary.LittleEndian.Uint32(h[0:]))*1e9 + int64(binary.LittleEndian.Uint32(h[4:]))*frac
		frames = append(frames, capture.Frame{Data: win[pos+16 : end : end], TimeNs: t, LinkType: link})
		pos = end
	}
	s.records += int64(len(frames) - len(b.Frames))
	s.offset += int64(pos - s.pos)
	s.pos = pos
	b.Frames = frames
}

// ngBatch is pcapBatch for little-endian pcapng enhanced packet blocks.
func (s *Reader) ngBatch(b *capture.Batch) {
	s.release()
	win, pos := s.win, s.pos
	frames := b.Frames
	for len(frames) < maxBatch && len(win)-pos >= 32 {
		blk := win[pos:]
		if binary.LittleEndian.Uint32(blk) != blockEnhancedPacket {
			break
		}
		// The checks of ngLength, ngPacket and ngTrailer, as in Next.
		total := int(binary.LittleEndian.Uint32(blk[4:]))
		id, caplen := binary.LittleEndian.Uint32(blk[8:]), binary.LittleEndian.Uint32(blk[20:])
		if total < 32 || total%4 != 0 || total > len(blk) || id >= uint32(len(s.ifaces)) ||
			caplen > uint32(total-32) || caplen > MaxCaptureLength || binary.LittleEndian.Uint32(blk[total-4:]) != uint32(total) {
			break
		}
		ifc := &s.ifaces[id]
		end := 28 + int(caplen)
		t := ifc.timeNs(uint64(binary.LittleEndian.Uint32(blk[12:]))<<32 | uint64(binary.LittleEndian.Uint32(blk[16:])))
		frames = append(frames, capture.Frame{Data: blk[28:end:end], TimeNs: t, LinkType: ifc.link})
		s.lastTime = t
		pos += total
	}
	s.records += int64(len(frames) - len(b.Frames))
	s.offset += int64(pos - s.pos)
	s.pos = pos
	b.Frames = frames
}

// ReleaseBatch gives the buffers of b back to the Reader, for the batches
// to come. Safe from any goroutine, concurrently with NextBatch and with
// other ReleaseBatch calls. b's Frames keep pointing into the buffers
// until the next NextBatch into b overwrites them; they are not cleared,
// which would cost a pass over the batch for buffers the Reader keeps
// anyway.
func (s *Reader) ReleaseBatch(b *capture.Batch) {
	s.pool.giveBack(b.Buffers)
	clear(b.Buffers)
	b.Buffers = b.Buffers[:0]
	b.Frames = b.Frames[:0]
}

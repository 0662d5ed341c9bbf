package pcapfile

import (
	"encoding/binary"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
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
//
// The records of a little-endian pcap file are handed out as they are in
// the buffer (b.Records); the others as Frames.
func (s *Reader) NextBatch(b *capture.Batch) error {
	b.Frames = b.Frames[:0]
	b.Records = capture.PcapRecords{Offsets: b.Records.Offsets[:0]}
	b.Buffers = b.Buffers[:0]
	if s.closed {
		return capture.ErrClosed
	}
	s.in.pinned = true
	var err error
	kept := false // a record read is the next batch's first
	if s.carry.set {
		b.Frames = append(b.Frames, s.carry.frame)
		if s.carry.spill != nil {
			b.Buffers = append(b.Buffers, s.carry.spill)
		}
		s.carry.set, s.carry.spill = false, nil
	}
	for b.Len() < maxBatch {
		if s.open && !s.big {
			// The records the window holds whole, in a loop of their
			// own: Next's common cases without a call and a Packet each.
			switch s.format {
			case kindPcap:
				s.pcapBatch(b)
			case kindPcapng:
				s.ngBatch(b)
			}
			if b.Len() == maxBatch {
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
		if b.Records.Len() > 0 || len(s.in.held) != held && len(b.Frames) > 0 {
			// The buffer ran out and the reader moved on to a fresh
			// one (or p comes after b.Records, which come last): p is
			// the first record of the next batch.
			kept = true
			if s.format == kindPcap && !s.big && spill == nil && s.pending == 16+len(p.Data) {
				// Left where it is, for pcapBatch to take with the
				// records after it.
				s.pending = 0
				s.records--
			} else {
				s.carry.frame = capture.Frame{Data: p.Data, TimeNs: p.TimeNs, LinkType: p.LinkType}
				s.carry.spill, s.carry.set = spill, true
			}
			break
		}
		b.Frames = appendFrame(b.Frames, p.Data, p.TimeNs, p.LinkType)
		if spill != nil {
			b.Buffers = append(b.Buffers, spill)
		}
	}
	if kept {
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

// pcapBatch hands out, as b.Records, the little-endian pcap records that
// the window holds whole, after b.Frames, and consumes them; they are
// checked as Next's common case checks a record.
func (s *Reader) pcapBatch(b *capture.Batch) {
	s.release()
	win, start := s.win, s.pos
	offs := b.Records.Offsets
	pos, limit := start, len(offs)+maxBatch-b.Len()
	for len(offs) < limit && len(win)-pos >= 16 {
		caplen := binary.LittleEndian.Uint32(win[pos+8:])
		end := pos + 16 + int(caplen)
		if caplen > MaxCaptureLength || end > len(win) {
			break // Next says what it is
		}
		offs = append(offs, uint32(pos-start))
		pos = end
	}
	if pos == start {
		return
	}
	b.Records = capture.PcapRecords{Data: win[start:pos:pos], Offsets: offs, LinkType: s.link, FracNs: s.fracMul}
	s.records += int64(len(offs))
	s.offset += int64(pos - start)
	s.pos = pos
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
		frames = appendFrame(frames, blk[28:end:end], t, ifc.link)
		s.lastTime = t
		pos += total
	}
	s.records += int64(len(frames) - len(b.Frames))
	s.offset += int64(pos - s.pos)
	s.pos = pos
	b.Frames = frames
}

// appendFrame appends a frame to frames field by field: a Frame built
// first and appended whole is copied with wide loads of what was just
// stored field by field, which the CPU cannot forward (it stalls).
func appendFrame(frames []capture.Frame, data []byte, t int64, link flow.LinkType) []capture.Frame {
	n := len(frames)
	if n == cap(frames) {
		frames = append(frames, capture.Frame{})
	} else {
		frames = frames[:n+1]
	}
	f := &frames[n]
	f.Data, f.TimeNs, f.LinkType = data, t, link
	return frames
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
	b.Records.Offsets = b.Records.Offsets[:0]
}

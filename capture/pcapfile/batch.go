package pcapfile

import (
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
	b.Packets = b.Packets[:0]
	b.Buffers = b.Buffers[:0]
	if s.closed {
		return capture.ErrClosed
	}
	s.in.pinned = true
	var err error
	if s.carry.set {
		b.Packets = append(b.Packets, s.carry.pkt)
		if s.carry.spill != nil {
			b.Buffers = append(b.Buffers, s.carry.spill)
		}
		s.carry.set, s.carry.spill = false, nil
	}
	for len(b.Packets) < maxBatch {
		held := len(s.in.held)
		var p capture.Packet
		if err = s.Next(&p); err != nil {
			break
		}
		var spill []byte
		if s.spill != nil && len(p.Data) > 0 && &p.Data[0] == &s.spill[0] {
			spill, s.spill = s.spill, nil // the batch keeps it
		}
		if len(s.in.held) != held && len(b.Packets) > 0 {
			// The buffer ran out and the reader moved on to a fresh
			// one: p is the first record of the next batch.
			s.carry.pkt, s.carry.spill, s.carry.set = p, spill, true
			break
		}
		b.Packets = append(b.Packets, p)
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

// ReleaseBatch gives the buffers of b back to the Reader, for the batches
// to come. Safe from any goroutine, concurrently with NextBatch and with
// other ReleaseBatch calls.
func (s *Reader) ReleaseBatch(b *capture.Batch) {
	s.pool.giveBack(b.Buffers)
	clear(b.Buffers)
	b.Buffers = b.Buffers[:0]
	clear(b.Packets)
	b.Packets = b.Packets[:0]
}

package capture

import (
	"encoding/binary"

	"github.com/flowdedup/flowdedup/flow"
)

// Batch is a run of frames a BatchSource read in one call, in capture
// order, handed out by reference: Frames, then the frames of Records.
//
// Ownership: the frames' bytes are in buffers of the source (Buffers),
// which stay valid, and are not written, until the batch is given back
// with ReleaseBatch: a batch can be parsed on another goroutine while the
// source reads the next one. Frames and Buffers are reused by the next
// NextBatch into the same Batch.
type Batch struct {
	Frames []Frame
	// Records holds the frames after Frames as the pcap records they were
	// read from, when the source reads pcap files: a 4-byte offset a frame
	// is what the source writes for the goroutine that keys them, against
	// a 40-byte Frame.
	Records PcapRecords
	// Buffers are the source's buffers the frames are in, for
	// ReleaseBatch. Callers leave them alone.
	Buffers [][]byte
}

// Len returns the number of frames in b.
func (b *Batch) Len() int { return len(b.Frames) + len(b.Records.Offsets) }

// Frame is one frame of a Batch: what a pipeline needs to key it in
// capture order. It is smaller than a Packet (40 bytes against 96): a
// file's frames have no key of their source, and the wire length is not
// needed to key them.
type Frame struct {
	Data     []byte        // the captured bytes, in a buffer of the batch
	TimeNs   int64         // capture time, Unix nanoseconds
	LinkType flow.LinkType // how to parse Data
}

// PcapRecords is a run of frames laid out as in a pcap file: records back
// to back, each a 16-byte little-endian header (seconds, fraction of a
// second, captured length, original length) and the captured bytes. The
// source checked every record as it read them.
//
// The offsets give the goroutine that keys the frames every record's
// place at once, so that it can load many records at a time, which it
// could not if it found each record from the length of the one before.
type PcapRecords struct {
	Data     []byte
	Offsets  []uint32      // of each record in Data
	LinkType flow.LinkType // of every frame
	FracNs   int64         // nanoseconds per unit of a header's fraction field: 1000 or 1
}

// Len returns the number of records.
func (r *PcapRecords) Len() int { return len(r.Offsets) }

// Record returns the captured bytes and the time of record i. (Two
// results rather than a Frame: the fields of a struct built in registers
// and then copied as a whole stall the CPU, which cannot forward the
// narrow stores to the wide loads of the copy.)
func (r *PcapRecords) Record(i int) (data []byte, timeNs int64) {
	off := int(r.Offsets[i])
	h := r.Data[off : off+16]
	end := off + 16 + int(binary.LittleEndian.Uint32(h[8:]))
	return r.Data[off+16 : end : end], r.time(h)
}

// Time returns the time of record i.
func (r *PcapRecords) Time(i int) int64 {
	off := int(r.Offsets[i])
	return r.time(r.Data[off : off+16])
}

func (r *PcapRecords) time(h []byte) int64 {
	return int64(binary.LittleEndian.Uint32(h[0:]))*1e9 + int64(binary.LittleEndian.Uint32(h[4:8]))*r.FracNs
}

// BatchSource is a Source that also frames in bulk: replay's files, whose
// records a pipeline can parse on several goroutines while one goroutine
// reads. Next and NextBatch are not mixed on one source.
type BatchSource interface {
	Source
	// NextBatch reads the next frames into b, replacing what it held. The
	// error, if any, comes after the frames in b, with Next's meaning:
	// io.EOF and ErrClosed end the source (b may still hold frames),
	// ErrTimeout is a quiet pipe, an error wrapping ErrCorrupt ends one
	// file and the next call goes on with the next. b must have been given
	// back (ReleaseBatch) or be new.
	NextBatch(b *Batch) error
	// ReleaseBatch gives b's buffers back to the source. Any goroutine may
	// call it, once per NextBatch; b's frames are invalid afterwards.
	ReleaseBatch(b *Batch)
}

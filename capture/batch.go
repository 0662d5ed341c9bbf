package capture

import "github.com/flowdedup/flowdedup/flow"

// Batch is a run of frames a BatchSource read in one call, in capture
// order, handed out by reference.
//
// Ownership: the Data of each Frame points into buffers of the source
// (Buffers), which stay valid, and are not written, until the batch is
// given back with ReleaseBatch: a batch can be parsed on another goroutine
// while the source reads the next one. Frames and Buffers are reused by
// the next NextBatch into the same Batch.
type Batch struct {
	Frames []Frame
	// Buffers are the source's buffers Frames point into, for
	// ReleaseBatch. Callers leave them alone.
	Buffers [][]byte
}

// Frame is one frame of a Batch: what a pipeline needs to key it in
// capture order. It is smaller than a Packet (40 bytes against 96) because
// a batch of thousands is written by the reading goroutine and read by
// another: a file's frames have no key of their source, and the wire
// length is not needed to key them.
type Frame struct {
	Data     []byte        // the captured bytes, in a buffer of the batch
	TimeNs   int64         // capture time, Unix nanoseconds
	LinkType flow.LinkType // how to parse Data
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
	// call it, once per NextBatch; b's Frames are invalid afterwards.
	ReleaseBatch(b *Batch)
}

package capture

// Batch is a run of frames a BatchSource read in one call, in capture
// order, handed out by reference.
//
// Ownership: the Data of each Packet points into buffers of the source
// (Buffers), which stay valid, and are not written, until the batch is
// given back with ReleaseBatch: a batch can be parsed on another goroutine
// while the source reads the next one. Packets and Buffers are reused by
// the next NextBatch into the same Batch.
type Batch struct {
	Packets []Packet
	// Buffers are the source's buffers Packets point into, for
	// ReleaseBatch. Callers leave them alone.
	Buffers [][]byte
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
	// call it, once per NextBatch; b's Packets are invalid afterwards.
	ReleaseBatch(b *Batch)
}

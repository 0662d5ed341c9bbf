package pcapfile

import (
	"errors"
	"io"
)

// errBufferFull is Peek's error for more bytes than the buffer holds, as
// bufio.ErrBufferFull.
var errBufferFull = errors.New("pcapfile: buffer full")

// maxEmptyReads bounds the reads that return nothing and no error before
// fill gives up with io.ErrNoProgress, as bufio does.
const maxEmptyReads = 100

// buffer is the decompressed stream that records are framed in: a
// bufio.Reader that can also leave its bytes where they are. While pinned
// (a batch is being read, NextBatch), a refill does not slide the unread
// bytes to the front of the buffer, over records already handed out: it
// moves them to a fresh buffer and keeps the old one in held, for the
// batch that points into it. Buffers come back through free
// (Reader.ReleaseBatch, from any goroutine).
type buffer struct {
	buf    []byte
	r, w   int
	rd     io.Reader
	err    error
	pinned bool
	dirty  bool     // bytes of buf were consumed: a batch may point to them
	held   [][]byte // buffers left behind while pinned
	pool   *bufPool
}

func newBuffer(size int) *buffer {
	return &buffer{buf: make([]byte, size), pool: &bufPool{size: size, free: make(chan []byte, freeBuffers)}}
}

// bufPool keeps the buffers batches gave back. Any goroutine.
type bufPool struct {
	size int
	free chan []byte
}

// freeBuffers bounds the buffers kept for reuse; more are left to the GC.
const freeBuffers = 64

// Reset discards the buffered bytes and reads from rd. The bytes stay
// where they are (dirty): a batch may point to them.
func (b *buffer) Reset(rd io.Reader) {
	b.dirty = b.dirty || b.w > 0 // records may have been handed out of the window without a Discard
	b.r, b.w, b.rd, b.err = 0, 0, rd, nil
}

// Size is the length of the buffer: the longest Peek.
func (b *buffer) Size() int { return len(b.buf) }

// Buffered is the number of bytes that can be read without a read call.
func (b *buffer) Buffered() int { return b.w - b.r }

func (b *buffer) readErr() error {
	err := b.err
	b.err = nil
	return err
}

// fill reads more of the stream into the buffer.
func (b *buffer) fill() {
	if b.pinned && b.dirty {
		b.move(&b.held)
	} else if b.r > 0 {
		copy(b.buf, b.buf[b.r:b.w])
		b.w -= b.r
		b.r = 0
	}
	for range maxEmptyReads {
		n, err := b.rd.Read(b.buf[b.w:])
		b.w += n
		if err != nil {
			b.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	b.err = io.ErrNoProgress
}

// fresh returns a buffer given back, or a new one.
func (b *buffer) fresh() []byte {
	select {
	case nb := <-b.pool.free:
		return nb
	default:
		return make([]byte, b.pool.size)
	}
}

// move puts b's unread bytes in a fresh buffer, and the old one in *held.
func (b *buffer) move(held *[][]byte) {
	nb := b.fresh()
	*held = append(*held, b.buf)
	b.w = copy(nb, b.buf[b.r:b.w])
	b.r = 0
	b.buf = nb
	b.dirty = false
}

// unpin ends a batch: it hands over the buffers the batch points into,
// the current one too when asked and the batch may point into it (dirty), whose
// unread bytes then move to a fresh buffer.
func (b *buffer) unpin(held [][]byte, current bool) [][]byte {
	b.pinned = false
	held = append(held, b.held...)
	clear(b.held)
	b.held = b.held[:0]
	if current && b.dirty {
		b.move(&held)
	}
	return held
}

// giveBack keeps buffers a batch held, for reuse.
func (p *bufPool) giveBack(bufs [][]byte) {
	for _, nb := range bufs {
		if len(nb) != p.size {
			continue // a spilled record's
		}
		select {
		case p.free <- nb:
		default:
		}
	}
}

// Peek returns the next n bytes without consuming them, as
// bufio.Reader.Peek.
func (b *buffer) Peek(n int) ([]byte, error) {
	for b.w-b.r < n && b.w-b.r < len(b.buf) && b.err == nil {
		b.fill()
	}
	if n > len(b.buf) {
		return b.buf[b.r:b.w], errBufferFull
	}
	var err error
	if avail := b.w - b.r; avail < n {
		n = avail
		err = b.readErr()
		if err == nil {
			err = errBufferFull
		}
	}
	return b.buf[b.r : b.r+n], err
}

// Discard skips the next n bytes, as bufio.Reader.Discard.
func (b *buffer) Discard(n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	remain := n
	for {
		skip := b.Buffered()
		if skip == 0 {
			b.fill()
			skip = b.Buffered()
		}
		skip = min(skip, remain)
		b.r += skip
		b.dirty = b.dirty || skip > 0
		remain -= skip
		if remain == 0 {
			return n, nil
		}
		if b.err != nil {
			return n - remain, b.readErr()
		}
	}
}

// Read reads into p, as bufio.Reader.Read.
func (b *buffer) Read(p []byte) (int, error) {
	if len(p) == 0 {
		if b.Buffered() > 0 {
			return 0, nil
		}
		return 0, b.readErr()
	}
	if b.r == b.w {
		if b.err != nil {
			return 0, b.readErr()
		}
		if len(p) >= len(b.buf) {
			return b.rd.Read(p)
		}
		b.fill()
		if b.r == b.w {
			return 0, b.readErr()
		}
	}
	n := copy(p, b.buf[b.r:b.w])
	b.r += n
	b.dirty = true
	return n, nil
}

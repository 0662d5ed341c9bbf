package pcapfile

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/klauspost/compress/gzip"
)

// PollInterval bounds how long Next waits for data on a pipe (standard
// input or a named pipe, not gzip-compressed) before it returns
// capture.ErrTimeout, so that the caller can hand on what it holds while
// the writer is quiet, and notice a stop.
const PollInterval = 100 * time.Millisecond

// pollable returns the file being read if it is a pipe whose reads can
// time out, uncompressed: gzip keeps the error of a read that timed out
// and fails for good, so a compressed pipe is read without timeouts.
func (s *Reader) pollable() *os.File {
	if s.stats[s.cur].Compressed {
		return nil
	}
	if s.paths[s.cur] == "-" {
		return s.stdinFile
	}
	if fi, err := s.file.Stat(); err != nil || fi.Mode().IsRegular() {
		return nil
	}
	if s.file.SetReadDeadline(time.Time{}) != nil {
		return nil // a device, or a system where pipes take no deadlines
	}
	return s.file
}

// setDeadline sets the deadline of the next reads of a pipe; the zero
// time waits as long as it takes.
func (s *Reader) setDeadline(t time.Time) {
	if s.poll != nil {
		s.poll.SetReadDeadline(t)
	}
}

// peekSlow is peek through in, which reads more of the stream, and makes
// what in then holds the window.
func (s *Reader) peekSlow(n int) ([]byte, error) {
	s.unwindow()
	if s.poll != nil {
		s.setDeadline(time.Now().Add(PollInterval))
	}
	b, err := s.in.Peek(n)
	s.win, _ = s.in.Peek(s.in.Buffered()) // no read: the bytes are buffered
	return b, err
}

// stream makes src, or what it inflates to when it is gzip, the stream
// records are read from (in).
func (s *Reader) stream(src io.Reader, st *Stats) error {
	s.raw.Reset(src)
	m, _ := s.raw.Peek(10) // a gzip header's fixed part
	if len(m) == 1 && m[0] == gzipMagic>>8 {
		st.Compressed = true
		return s.cutHeader(&truncated{what: "the gzip header", got: 1, want: 10})
	}
	if len(m) < 2 || binary.BigEndian.Uint16(m) != gzipMagic {
		s.in.Reset(s.raw)
		return nil
	}
	st.Compressed = true
	if len(m) < 10 {
		return s.cutHeader(&truncated{what: "the gzip header", got: len(m), want: 10})
	}
	var err error
	if s.gz == nil {
		s.gz, err = gzip.NewReader(s.raw)
	} else {
		err = s.gz.Reset(s.raw)
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return s.cutHeader(&truncated{what: "the gzip header", got: -1})
	}
	if err != nil {
		return s.headerErr(fmt.Errorf("gzip: %w", err))
	}
	s.in.Reset(s.gz)
	return nil
}

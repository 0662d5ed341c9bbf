package report

import (
	"errors"
	"io"
	"strconv"
)

// A WriteError reports output that could not be written. The writer that
// returned it is stopped: every later call returns the same error.
type WriteError struct {
	Op  string // "records", "summary" or "totals"
	Err error  // the destination's error

	// Lost counts the records (or summary lines) that were accepted but
	// not written: those buffered when the write failed.
	Lost int

	// Partial is true when the destination kept part of a record that it
	// could not take back: it accepted some bytes of the failed write and
	// is not a regular file that can be truncated. Otherwise the output
	// ends at a record boundary.
	Partial bool
}

func (e *WriteError) Error() string {
	s := "report: writing " + e.Op + ": " + e.Err.Error()
	switch {
	case e.Lost > 0 && e.Partial:
		s += " (" + strconv.Itoa(e.Lost) + " not written; the output ends inside a record)"
	case e.Lost > 0:
		s += " (" + strconv.Itoa(e.Lost) + " not written)"
	case e.Partial:
		s += " (the output ends inside a record)"
	}
	return s
}

func (e *WriteError) Unwrap() error { return e.Err }

// truncater is the part of *os.File that lets a failed write be taken back.
type truncater interface {
	Seek(offset int64, whence int) (int64, error)
	Truncate(size int64) error
}

// wholeWriter is the only path from this package to its destinations. Each
// chunk it is given ends at a record boundary and goes to the destination
// in one Write call, so a destination that takes all of a write or none of
// it (a pipe for small writes, /dev/full, most writers that fail) never
// holds a partial record. A file on a full disk can take part of a write;
// wholeWriter then truncates it back to the start of the chunk.
//
// The first error is kept and returned by every later write: once output is
// lost, writing more would leave a gap that nothing else reports.
type wholeWriter struct {
	w   io.Writer
	op  string
	err error
}

// write writes chunk, which holds n whole records.
func (ww *wholeWriter) write(chunk []byte, n int) error {
	if ww.err != nil {
		return ww.err
	}
	if len(chunk) == 0 {
		return nil
	}
	written, err := ww.w.Write(chunk)
	if err == nil && written < len(chunk) {
		err = io.ErrShortWrite // a broken io.Writer; treat it as a failed write
	}
	if err == nil {
		return nil
	}
	we := &WriteError{Op: ww.op, Err: err, Lost: n}
	if written > 0 && written < len(chunk) {
		we.Partial = !unwrite(ww.w, written)
	}
	ww.err = we
	return we
}

// unwrite removes the last n bytes written to w, when w is a file that
// supports it, and reports whether it did. The end of the data is read from
// the file offset after the write rather than remembered from before it, so
// that a file opened with O_APPEND (whose offset moves only when it is
// written) is cut at the right place.
func unwrite(w io.Writer, n int) bool {
	t, ok := w.(truncater)
	if !ok {
		return false
	}
	end, err := t.Seek(0, io.SeekCurrent)
	if err != nil || end < int64(n) {
		return false
	}
	if err := t.Truncate(end - int64(n)); err != nil {
		return false
	}
	_, err = t.Seek(end-int64(n), io.SeekStart)
	return err == nil
}

// errFirst returns the first non-nil error of errs.
func errFirst(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

var errClosed = errors.New("report: Reporter is closed")

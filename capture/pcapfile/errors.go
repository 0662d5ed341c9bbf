package pcapfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/flowdedup/flowdedup/capture"
)

// ErrNotCapture reports a file that is neither pcap nor pcapng, plain or
// gzip-compressed. Open returns it (wrapped in a *Error).
var ErrNotCapture = errors.New("capture: not a pcap or pcapng file")

// Error is damage found in one input file, or the reason it could not be
// opened. It wraps capture.ErrCorrupt when the file's contents are damaged
// (errors.Is(err, capture.ErrCorrupt)), ErrNotCapture when the file is not
// a capture file of a known kind, and io.ErrUnexpectedEOF when the file
// ends inside its header or a record (a truncated file).
type Error struct {
	Path       string // as given to Open; "-" is standard input
	Record     int64  // 1-based number of the packet record being read; 0: the file header
	Offset     int64  // byte offset of the damaged record or block (of the decompressed stream for gzip)
	Compressed bool   // the file is gzip: Offset counts decompressed bytes
	Err        error  // what is wrong

	corrupt    bool
	notCapture bool
}

func (e *Error) Error() string {
	msg := "capture: " + e.Path + ": "
	if e.Record > 0 || e.corrupt {
		msg += e.Where() + ": "
	}
	if e.notCapture {
		msg += "not a pcap or pcapng file: "
	}
	return msg + e.Err.Error()
}

// Where says where the damage is: "record 4 at offset 1234" ("... of the
// decompressed data" in a gzip file), or "file header at offset 0".
func (e *Error) Where() string {
	var s string
	if e.Record > 0 {
		s = fmt.Sprintf("record %d at offset %d", e.Record, e.Offset)
	} else {
		s = fmt.Sprintf("file header at offset %d", e.Offset)
	}
	if e.Compressed {
		s += " of the decompressed data"
	}
	return s
}

// truncated is what is wrong with a file that ends inside its header or a
// record: what it was reading, and how much of it there was. It wraps
// io.ErrUnexpectedEOF.
type truncated struct {
	what      string // e.g. "the record data"; "": the file is empty
	got, want int    // bytes of it present (-1: not known), and its length (0: not known yet)
	gzip      bool   // the bytes are decompressed ones
	cut       bool   // gzip: the compressed stream itself ends early
}

func (e *truncated) Error() string {
	if e.what == "" {
		if e.gzip {
			return "empty gzip data"
		}
		return "empty file"
	}
	subject := "file ends"
	switch {
	case e.gzip && e.cut:
		subject = "gzip stream cut short"
	case e.gzip:
		subject = "gzip data ends"
	}
	switch {
	case e.got < 0:
		return fmt.Sprintf("%s inside %s", subject, e.what)
	case e.want > 0:
		return fmt.Sprintf("%s inside %s after %d of its %d bytes", subject, e.what, e.got, e.want)
	}
	return fmt.Sprintf("%s inside %s after %d bytes", subject, e.what, e.got)
}

func (e *truncated) Unwrap() error { return io.ErrUnexpectedEOF }

// Is makes an empty file's error wrap capture.ErrEmpty too.
func (e *truncated) Is(target error) bool { return target == capture.ErrEmpty && e.what == "" }

// Unwrap returns capture.ErrCorrupt and ErrNotCapture where they apply, and
// Err.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 3)
	if e.corrupt {
		errs = append(errs, capture.ErrCorrupt)
	}
	if e.notCapture {
		errs = append(errs, ErrNotCapture)
	}
	return append(errs, e.Err)
}

// headerErr reports a file whose header is unusable: not a capture
// file, unless the operating system failed to read it. Once Open has
// accepted the file (it changed since, or it is standard input), that is
// also corruption.
func (s *Reader) headerErr(err error) error {
	var pe *fs.PathError
	damaged := !errors.As(err, &pe)
	return &Error{Path: s.paths[s.cur], Compressed: s.stats[s.cur].Compressed, Err: err, notCapture: damaged, corrupt: damaged && s.probed}
}

// cutHeader reports a file that ends inside its header: a truncated
// capture, not a file of another kind (see Open).
func (s *Reader) cutHeader(t *truncated) error {
	return &Error{Path: s.paths[s.cur], Compressed: t.gzip, Err: t, corrupt: true}
}

// truncatedHeader reports whether err is cutHeader's: a file Open
// accepts, whose damage Next reports.
func truncatedHeader(err error) bool {
	var fe *Error
	return errors.As(err, &fe) && fe.Record == 0 && fe.corrupt && errors.Is(fe.Err, io.ErrUnexpectedEOF)
}

// readErr turns the error of a read that came up short into what it
// means inside a record: io.EOF there is io.ErrUnexpectedEOF.
func (s *Reader) readErr(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// short reports a read that came up short inside what, after got of its
// want bytes (want 0: its length is not known yet).
func (s *Reader) short(what string, got, want int, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// A pipe with nothing more for now. What was read stays in the
		// buffer: the record is read whole at a later call.
		return capture.ErrTimeout
	}
	gz := s.stats[s.cur].Compressed
	// gzip.Reader returns io.ErrUnexpectedEOF for a stream cut short and
	// io.EOF at its proper end; a file ends with io.EOF.
	cut := gz && err == io.ErrUnexpectedEOF
	err = s.readErr(err)
	var pe *fs.PathError
	if errors.As(err, &pe) { // the operating system failed, not the file
		return s.recordErr(fmt.Errorf("reading %s: %w", what, err), false)
	}
	if err == io.ErrUnexpectedEOF {
		return s.recordErr(&truncated{what: what, got: got, want: want, gzip: gz, cut: cut}, true)
	}
	return s.recordErr(fmt.Errorf("%s: %w", what, err), true)
}

func (s *Reader) corrupt(format string, args ...any) error {
	return s.recordErr(fmt.Errorf(format, args...), true)
}

func (s *Reader) recordErr(err error, corrupt bool) error {
	return &Error{Path: s.paths[s.cur], Record: s.records + 1, Offset: s.offset,
		Compressed: s.stats[s.cur].Compressed, Err: err, corrupt: corrupt}
}

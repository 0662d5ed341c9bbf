package outfile

import (
	"fmt"
	"os"
	"sync/atomic"
)

// Reopener is a plain output file that can be reopened at its path, the
// logrotate convention: after the file is moved away, a SIGHUP makes the
// process write to a new file at the old path. Reopen only asks for it, from
// any goroutine (a signal handler's); the writer reopens at its next Write,
// which starts at a record boundary when the caller writes whole records
// (report's writers do), so no record is split between the two files.
//
// Write, Seek, Truncate and Close are used from one goroutine. Seek and
// Truncate act on the current file, so report's writers can still take back
// a partly written record after a full disk.
type Reopener struct {
	path string
	f    *os.File
	want atomic.Bool
}

// Create creates or truncates the file at path, as os.Create does.
func Create(path string) (*Reopener, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &Reopener{path: path, f: f}, nil
}

// Reopen asks for the file to be reopened before the next write. Safe for
// concurrent use.
func (r *Reopener) Reopen() { r.want.Store(true) }

// reopen closes the current file and opens path again, appending to what is
// there (a new file after logrotate's move, the same file after its
// copytruncate). On failure the old file is kept and the error returned.
func (r *Reopener) reopen() error {
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("outfile: reopening %s: %w", r.path, err)
	}
	old := r.f
	r.f = f
	if err := old.Close(); err != nil {
		return fmt.Errorf("outfile: closing the file %s was: %w", r.path, err)
	}
	return nil
}

// Write writes p to the file, reopening it first when asked to.
func (r *Reopener) Write(p []byte) (int, error) {
	if r.want.Load() && r.want.CompareAndSwap(true, false) {
		if err := r.reopen(); err != nil {
			return 0, err
		}
	}
	return r.f.Write(p)
}

// Seek and Truncate act on the current file.
func (r *Reopener) Seek(offset int64, whence int) (int64, error) { return r.f.Seek(offset, whence) }
func (r *Reopener) Truncate(size int64) error                    { return r.f.Truncate(size) }

// Name returns the path.
func (r *Reopener) Name() string { return r.path }

// Close closes the current file.
func (r *Reopener) Close() error { return r.f.Close() }

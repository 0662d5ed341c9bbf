package outfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// Suffixes of the names a file has before it is committed.
const (
	// TempSuffix marks a file still being written: NAME.tmp.
	TempSuffix = ".tmp"
	// PartialSuffix marks the temporary file of an earlier process that
	// stopped without committing it (a crash, SIGKILL), found when the
	// same name is opened again: NAME.partial (NAME.partial.N when taken).
	// It holds what that process wrote, up to its last whole write.
	PartialSuffix = ".partial"
)

// maxSuffix bounds the search for a free name.
const maxSuffix = 999

// Files writes the files of a time Pattern, one per period: each is written
// under a temporary name (NAME.tmp) and renamed into place by Commit, so a
// reader never sees a partial file under its final name. With a retention
// count N, Commit then removes the committed files of the pattern whose
// periods are older than the newest N periods: a period's file and its
// suffixed copies count as one, and go together.
//
// A committed name is never overwritten: when NAME already exists (an
// earlier run wrote the same period), the file becomes NAME with ".1",
// ".2"... inserted before its extension ("flows-10.1.jsonl").
//
// Files is used from one goroutine.
type Files struct {
	pat    Pattern
	m      matcher
	retain int
	notice io.Writer
	open   map[string]*File
}

// A File is an open file of a Files, under its temporary name until
// committed. Its *os.File is for writing; do not close it directly.
type File struct {
	*os.File
	Name string    // the final path, before any collision suffix
	t    time.Time // the period's time, for the suffixed name
}

// NewFiles returns the Files of p, keeping the newest retain committed
// periods' files (0 keeps all). Retention needs a pattern whose names give
// an unambiguous time (Pattern.Sortable). Notices (a temporary file left by
// an earlier process, a removed file) are written to notice, one line each,
// without a prefix: the caller puts its name before them
// ("flowdedup replay: removed ..."); nil discards them.
func NewFiles(p Pattern, retain int, notice io.Writer) (*Files, error) {
	switch {
	case !p.HasTime():
		return nil, fmt.Errorf("%w %q: has no time conversion (%s)", ErrPattern, p, Conversions)
	case retain < 0:
		return nil, fmt.Errorf("outfile: negative retention %d", retain)
	case retain > 0 && !p.Sortable():
		return nil, fmt.Errorf("%w %q: keeping the newest %d files needs names that put them in time order: a year with every coarser field of the finest one used (e.g. %%Y%%m%%dT%%H), or %%s", ErrPattern, p, retain)
	}
	if notice == nil {
		notice = io.Discard
	}
	return &Files{pat: p, m: p.matcher(), retain: retain, notice: notice, open: map[string]*File{}}, nil
}

// Open returns the file of the period of t, creating its temporary file
// (and its directory) if it is not open yet. A temporary file of the same
// name that no File of this process holds was left by an earlier process:
// it is renamed to NAME.partial first, with a notice.
func (w *Files) Open(t time.Time) (*File, error) {
	name := w.pat.Expand(t)
	if f := w.open[name]; f != nil {
		return f, nil
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return nil, fmt.Errorf("outfile: %w", err)
	}
	tmp := name + TempSuffix
	osf, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		partial, perr := w.keepPartial(tmp, name)
		if perr != nil {
			return nil, perr
		}
		fmt.Fprintf(w.notice, "%s was left by an earlier process that did not finish it; kept as %s\n", tmp, partial)
		osf, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	}
	if err != nil {
		return nil, fmt.Errorf("outfile: %w", err)
	}
	f := &File{File: osf, Name: name, t: t}
	w.open[name] = f
	return f, nil
}

// keepPartial renames a left-over temporary file to a free NAME.partial[.N].
func (w *Files) keepPartial(tmp, name string) (string, error) {
	for i := 0; i <= maxSuffix; i++ {
		cand := name + PartialSuffix
		if i > 0 {
			cand += "." + strconv.Itoa(i)
		}
		err := claim(tmp, cand)
		if err == nil {
			return cand, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("outfile: keeping %s: %w", tmp, err)
		}
	}
	return "", fmt.Errorf("outfile: keeping %s: %s.partial to .partial.%d all exist", tmp, name, maxSuffix)
}

// Name returns the final path of the period of t.
func (w *Files) Name(t time.Time) string { return w.pat.Expand(t) }

// IsOpen reports whether the file of the period of t is open.
func (w *Files) IsOpen(t time.Time) bool { return w.open[w.pat.Expand(t)] != nil }

// Commit syncs and closes f and renames it to its final name (or a free
// suffixed one), then applies the retention. It returns the name given.
// f is no longer open afterwards, whatever the outcome; on an error its
// data stays under the temporary name.
func (w *Files) Commit(f *File) (string, error) {
	delete(w.open, f.Name)
	tmp := f.File.Name()
	serr := f.File.Sync()
	cerr := f.File.Close()
	if err := errors.Join(serr, cerr); err != nil {
		return "", fmt.Errorf("outfile: %w", err)
	}
	final, err := w.place(tmp, f)
	if err != nil {
		return "", err
	}
	syncDir(filepath.Dir(final))
	return final, w.applyRetention()
}

// place renames tmp to the first free name of f's period.
func (w *Files) place(tmp string, f *File) (string, error) {
	for i := 0; i <= maxSuffix; i++ {
		cand := f.Name
		if i > 0 {
			cand = w.pat.suffixed(f.t, i)
		}
		err := claim(tmp, cand)
		if err == nil {
			return cand, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("outfile: committing %s: %w", tmp, err)
		}
	}
	return "", fmt.Errorf("outfile: committing %s: %s and its suffixes to .%d all exist", tmp, f.Name, maxSuffix)
}

// claim moves the file old to the name new unless new exists (an error
// wrapping os.ErrExist, and old stays). A hard link and the removal of old
// do that atomically for readers of new; on a file system without hard
// links it falls back to a rename after checking, which a concurrent writer
// of the same name could race.
func claim(old, new string) error {
	err := os.Link(old, new)
	switch {
	case err == nil:
		return os.Remove(old)
	case errors.Is(err, os.ErrExist):
		return err
	}
	if _, serr := os.Lstat(new); serr == nil {
		return fmt.Errorf("%s: %w", new, os.ErrExist)
	}
	return os.Rename(old, new)
}

// syncDir makes a rename in dir durable; errors are ignored (not every
// file system syncs directories, and the data itself is already synced).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// committed is a committed file of the pattern found in its directory.
type committed struct {
	name   string
	t      time.Time
	suffix int
}

// List returns the committed files of the pattern in its directory, oldest
// first (by the time in the name, then the suffix).
func (w *Files) List() ([]string, error) {
	c, err := w.committed()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(c))
	for i := range c {
		names[i] = c[i].name
	}
	return names, nil
}

func (w *Files) committed() ([]committed, error) {
	dir := w.pat.Dir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("outfile: %w", err)
	}
	var c []committed
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		t, suffix, ok := w.m.parse(e.Name())
		if !ok {
			continue
		}
		c = append(c, committed{name: filepath.Join(dir, e.Name()), t: t, suffix: suffix})
	}
	slices.SortFunc(c, func(a, b committed) int {
		if d := a.t.Compare(b.t); d != 0 {
			return d
		}
		return a.suffix - b.suffix
	})
	return c, nil
}

// applyRetention removes the files of the oldest periods beyond the
// retention count, with a notice each. A period is a time in the names: a
// file and its suffixed copies (NAME, NAME.1, ..., of a run that wrote the
// same period again) are one period, kept or removed together, so that a
// rerun in the same directory does not push out the originals of newer
// periods, nor keep a copy whose original it removed.
func (w *Files) applyRetention() error {
	if w.retain == 0 {
		return nil
	}
	c, err := w.committed()
	if err != nil {
		return err
	}
	periods := 0
	for i := range c {
		if i == 0 || !c[i].t.Equal(c[i-1].t) {
			periods++
		}
	}
	var errs []error
	for ; periods > w.retain; periods-- {
		oldest := c[0].t
		for len(c) > 0 && c[0].t.Equal(oldest) {
			if err := os.Remove(c[0].name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("outfile: retention: %w", err))
			} else {
				fmt.Fprintf(w.notice, "removed %s (keeping the newest %d periods)\n", c[0].name, w.retain)
			}
			c = c[1:]
		}
	}
	return errors.Join(errs...)
}

// CommitAll commits every open file, oldest period first.
func (w *Files) CommitAll() error {
	open := make([]*File, 0, len(w.open))
	for _, f := range w.open {
		open = append(open, f)
	}
	slices.SortFunc(open, func(a, b *File) int { return a.t.Compare(b.t) })
	var errs []error
	for _, f := range open {
		if _, err := w.Commit(f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close closes every open file without committing it: their data stays
// under the temporary names (a run that failed leaves no file that looks
// whole).
func (w *Files) Close() error {
	var errs []error
	for name, f := range w.open {
		errs = append(errs, f.File.Close())
		delete(w.open, name)
	}
	return errors.Join(errs...)
}

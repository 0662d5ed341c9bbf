package export

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flowdedup/flowdedup/record"
)

// ErrSpoolFull is wrapped by the error of a spool write that would take the
// spool past its bound (--spool-max), or that the file system refused for
// want of room (ENOSPC, EDQUOT).
var ErrSpoolFull = errors.New("export: spool full")

// ErrSpoolInUse: another process holds the spool directory.
var ErrSpoolInUse = errors.New("export: spool directory in use")

// Spool names and extensions of the files in a destination's directory.
const (
	spoolExt     = ".spool"
	spoolTmp     = ".tmp-"
	spoolCorrupt = "corrupt"
	// spoolRejected is the directory, in a destination's, of what the
	// destination rejected, kept for the operator (destSpool.keepRejected).
	spoolRejected = "rejected"
	rejectedLog   = "errors.log"
	spoolLock     = ".lock"
)

// A Spool is the --spool directory: the batches and summaries that export
// destinations could not take yet, on disk, at most Max bytes in all. Each
// destination has a directory of its own in it, named after the
// destination, and each of its files names the destination again (see the
// spool file format in spoolfile.go), so that destinations
// never read each other's files.
//
// A Spool is opened once per run and shared by the run's Queues
// (QueueConfig.Spool); it is safe for concurrent use. A lock file keeps a
// second process from using the same directory at the same time.
type Spool struct {
	dir  string
	max  int64
	used atomic.Int64
	lock *os.File

	mu      sync.Mutex
	claimed map[string]bool
}

// OpenSpool opens (creating it, mode 0700, when missing) the spool
// directory dir, bounded by max bytes. It takes the directory's lock,
// removes the temporary files a crash left (they were never complete) and
// counts the size of the files left by an earlier run, which the Queues of
// their destinations send first.
func OpenSpool(dir string, max int64) (*Spool, error) {
	if max <= 0 {
		return nil, fmt.Errorf("export: spool %s: the bound must be positive, not %d bytes", dir, max)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("export: spool: %w", err)
	}
	lock, err := lockDir(filepath.Join(dir, spoolLock))
	if err != nil {
		return nil, fmt.Errorf("export: spool %s: %w", dir, err)
	}
	s := &Spool{dir: dir, max: max, lock: lock, claimed: make(map[string]bool)}
	ents, err := os.ReadDir(dir)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("export: spool: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			lock.Close()
			return nil, fmt.Errorf("export: spool: %w", err)
		}
		for _, f := range files {
			path := filepath.Join(dir, e.Name(), f.Name())
			switch {
			case strings.HasPrefix(f.Name(), spoolTmp):
				os.Remove(path)
			case strings.HasSuffix(f.Name(), spoolExt) && f.Type().IsRegular():
				if fi, err := f.Info(); err == nil {
					s.used.Add(fi.Size())
				}
			}
		}
		_, size := rejectedFiles(filepath.Join(dir, e.Name(), spoolRejected))
		s.used.Add(size)
	}
	return s, nil
}

// rejectedFiles returns the files a destination's rejected directory
// holds (its errors.log aside) and the bytes they all take, the log
// included: they count against the bound until the operator removes them.
func rejectedFiles(dir string) (files int, size int64) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, f := range ents {
		if !f.Type().IsRegular() {
			continue
		}
		if strings.HasPrefix(f.Name(), spoolTmp) {
			os.Remove(filepath.Join(dir, f.Name()))
			continue
		}
		if fi, err := f.Info(); err == nil {
			size += fi.Size()
		}
		if f.Name() != rejectedLog {
			files++
		}
	}
	return files, size
}

// Dir returns the spool directory.
func (s *Spool) Dir() string { return s.dir }

// Max returns the spool's bound in bytes.
func (s *Spool) Max() int64 { return s.max }

// Used returns the bytes the spool's files take now.
func (s *Spool) Used() int64 { return s.used.Load() }

// Close releases the spool directory's lock. The Queues using it must be
// closed first.
func (s *Spool) Close() error { return s.lock.Close() }

// Unclaimed returns the destinations that have files in the spool but no
// Queue in this run, with how many files each: they count against the
// bound, and wait for a run that exports there. Call it once every Queue
// is made; the CLI says it once on stderr. A destination is named as its
// files name it (a directory whose files cannot be read is named by the
// directory).
func (s *Spool) Unclaimed() map[string]int {
	s.mu.Lock()
	claimed := make(map[string]bool, len(s.claimed))
	for d := range s.claimed {
		claimed[destDirName(d)] = true
	}
	s.mu.Unlock()
	out := make(map[string]int)
	ents, _ := os.ReadDir(s.dir)
	for _, e := range ents {
		if !e.IsDir() || claimed[e.Name()] {
			continue
		}
		dir := filepath.Join(s.dir, e.Name())
		files, _ := filepath.Glob(filepath.Join(dir, "*"+spoolExt))
		if len(files) == 0 {
			continue
		}
		name := dir
		if data, err := os.ReadFile(files[0]); err == nil && len(data) >= spoolHeaderLen {
			if n := int(data[28])<<8 | int(data[29]); spoolHeaderLen+n <= len(data) {
				name = string(data[spoolHeaderLen : spoolHeaderLen+n])
			}
		}
		out[name] += len(files)
	}
	return out
}

// reserve takes n bytes of the bound, or reports that they do not fit.
func (s *Spool) reserve(n int64) bool {
	for {
		used := s.used.Load()
		if used+n > s.max {
			return false
		}
		if s.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// destDirName is the directory of a destination in the spool: its URL made
// safe as a file name, for people, and a hash of it, so that two URLs that
// read alike never share one.
func destDirName(dest string) string {
	var b strings.Builder
	for _, c := range dest {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 64 {
			break
		}
	}
	sum := sha256.Sum256([]byte(dest))
	return b.String() + "-" + hex.EncodeToString(sum[:6])
}

// spoolEntry is one file of a destination's spool.
type spoolEntry struct {
	seq     uint64
	size    int64
	records int  // records of a batch (0 for a summary or an unreadable header)
	summary bool // a summary
	known   bool // its header was read: summary and records are what it says
}

// lost returns what a file found corrupt counts as lost (spool_corrupt):
// 1 for a summary; for a batch, the records its header says, at most as
// many as its size can hold; and 1, "at least one", when the header
// could not be read (known false).
func (e spoolEntry) lost() (n int, known bool) {
	switch {
	case !e.known:
		return 1, false
	case e.summary:
		return 1, true
	}
	n = min(e.records, int(max(e.size-spoolHeaderLen-spoolCRCLen, 0)/spoolRecordLen))
	if n == 0 {
		return 1, false
	}
	return n, true
}

// destSpool is one destination's part of the spool, used by its Queue's
// manager goroutine only.
type destSpool struct {
	s    *Spool
	dest string
	dir  string

	entries []spoolEntry // oldest first
	nextSeq uint64
	buf     []byte
	head    []byte // the file load read last, for markAttempted
	headSeq uint64 // its sequence number
	records int    // records of the batches in entries
	windows int    // summaries in entries
}

// firstSeq is the sequence number of the first file of an empty spool: far
// from zero, so that a file can be put before the oldest (putHead).
const firstSeq = 1 << 40

// claim returns dest's part of the spool, with the files an earlier run
// left, oldest first. A destination is claimed once per run.
func (s *Spool) claim(dest string) (*destSpool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimed[dest] {
		return nil, fmt.Errorf("export: spool: destination %s is exported to twice", dest)
	}
	d := &destSpool{s: s, dest: dest, dir: filepath.Join(s.dir, destDirName(dest)), nextSeq: firstSeq}
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return nil, fmt.Errorf("export: spool: %w", err)
	}
	files, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("export: spool: %w", err)
	}
	for _, f := range files {
		name, ok := strings.CutSuffix(f.Name(), spoolExt)
		if !ok || !f.Type().IsRegular() {
			continue
		}
		seq, err := strconv.ParseUint(name, 16, 64)
		if err != nil || len(name) != 16 {
			continue // not a name this package gives: leave it alone
		}
		e := spoolEntry{seq: seq}
		if fi, err := f.Info(); err == nil {
			e.size = fi.Size()
		}
		if head, err := readHead(filepath.Join(d.dir, f.Name())); err == nil {
			if sum, n, ok := spoolHeader(head); ok {
				e.summary, e.records, e.known = sum, n, true
			}
		}
		d.entries = append(d.entries, e)
		d.count(e, 1)
		d.nextSeq = max(d.nextSeq, seq+1)
	}
	slices.SortFunc(d.entries, func(a, b spoolEntry) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	s.claimed[dest] = true
	return d, nil
}

func readHead(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, spoolHeaderLen)
	_, err = f.ReadAt(b, 0)
	return b, err
}

func (d *destSpool) count(e spoolEntry, sign int) {
	if e.summary {
		d.windows += sign
	} else {
		d.records += sign * e.records
	}
}

// rejectedDir is the directory of what the destination rejected.
func (d *destSpool) rejectedDir() string { return filepath.Join(d.dir, spoolRejected) }

func (d *destSpool) path(seq uint64) string {
	return filepath.Join(d.dir, fmt.Sprintf("%016x%s", seq, spoolExt))
}

// put writes the batch b (or the summary s) as the newest file of the
// spool, or as the oldest when head is set.
func (d *destSpool) put(b *record.Batch, s *record.Summary, attempted, head bool) error {
	if s == nil && len(b.Observer) > record.MaxObserverLen {
		return fmt.Errorf("export: spool: batch %d: %w: %d bytes, want at most %d", b.ID, record.ErrObserver, len(b.Observer), record.MaxObserverLen)
	}
	d.buf = appendSpoolFile(d.buf[:0], d.dest, b, s, attempted)
	size := int64(len(d.buf))
	if !d.s.reserve(size) {
		return fmt.Errorf("%w: %s holds %d of %d bytes", ErrSpoolFull, d.s.dir, d.s.used.Load(), d.s.max)
	}
	seq := d.nextSeq
	if head && len(d.entries) > 0 {
		seq = d.entries[0].seq - 1
	}
	if err := d.write(seq, d.buf); err != nil {
		d.s.used.Add(-size)
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return fmt.Errorf("%w: %w", ErrSpoolFull, err)
		}
		return err
	}
	e := spoolEntry{seq: seq, size: size, summary: s != nil, known: true}
	if s == nil {
		e.records = len(b.Records)
	}
	if head && len(d.entries) > 0 {
		d.entries = slices.Insert(d.entries, 0, e)
	} else {
		d.entries = append(d.entries, e)
		d.nextSeq++
	}
	d.count(e, 1)
	return nil
}

// write writes data to the file of seq (writeFileSync): a crash leaves
// either the whole file or a temporary one, which OpenSpool removes.
func (d *destSpool) write(seq uint64, data []byte) error {
	return writeFileSync(d.dir, d.path(seq), data)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("export: spool: %w", err)
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return fmt.Errorf("export: spool: %w", err)
	}
	return nil
}

// load reads the oldest file into f (a batch's records into recs). A
// corrupt file is an error wrapping ErrSpoolCorrupt; the caller moves it
// aside (dropHead).
func (d *destSpool) load(recs []record.Record, f *spoolFile) error {
	e := d.entries[0]
	path := d.path(e.seq)
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %v", ErrSpoolCorrupt, err) // removed under us
		}
		return fmt.Errorf("export: spool: %w", err)
	}
	if fi.Size() > maxSpoolFile {
		return fmt.Errorf("%w: %d bytes, more than any spool file", ErrSpoolCorrupt, fi.Size())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("export: spool: %w", err)
	}
	d.head, d.headSeq = data, e.seq
	return decodeSpoolFile(data, d.dest, recs, f)
}

// openForMark opens a spool file for markAttempted (a test makes it fail).
var openForMark = os.OpenFile

// markAttempted sets the "attempted" flag of the oldest file, which load
// read last, and syncs it, before its batch or summary is given to the
// destination: a crash (kill -9, power loss) after the destination took
// it but before remove leaves a file the next run knows may have landed,
// and sends with record.Batch.Retry set, so that the destination reads
// back what it holds rather than writing it twice.
//
// The file is changed in place, its flags byte and checksum, and needs no
// room on the disk (a spool on a full disk still drains). The two writes
// are each whole against a process's death; against a power loss in
// between, decodeSpoolFile also takes the checksum of the file with the
// flag set as a file with the flag set (the mark was under way, so the
// batch was not sent: either reading of it is safe).
func (d *destSpool) markAttempted() error {
	seq := d.entries[0].seq
	if d.head == nil || d.headSeq != seq { // put at the head since load
		data, err := os.ReadFile(d.path(seq))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%w: %v", ErrSpoolCorrupt, err) // removed under us
			}
			return fmt.Errorf("export: spool: %w", err)
		}
		d.head, d.headSeq = data, seq
	}
	data := d.head
	if len(data) < spoolHeaderLen+spoolCRCLen {
		return fmt.Errorf("%w: %d bytes, shorter than a header", ErrSpoolCorrupt, len(data))
	}
	if data[11]&spoolAttempted != 0 {
		return nil
	}
	// The new flags and checksum, written into data only once they are
	// on disk: a mark that failed is made again in full.
	flags := []byte{data[11] | spoolAttempted}
	body := len(data) - spoolCRCLen
	crc := binary.BigEndian.AppendUint32(nil, toggledChecksum(data[:body]))
	f, err := openForMark(d.path(seq), os.O_WRONLY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %v", ErrSpoolCorrupt, err) // removed under us
		}
		return fmt.Errorf("export: spool: %w", err)
	}
	_, err = f.WriteAt(crc, int64(body)) // the checksum first: see decodeSpoolFile
	if err == nil {
		_, err = f.WriteAt(flags, 11)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("export: spool: marking %s attempted: %w", d.path(seq), err)
	}
	data[11] = flags[0]
	copy(data[body:], crc)
	return nil
}

// remove deletes the oldest file: it was delivered or rejected.
func (d *destSpool) remove() {
	e := d.entries[0]
	if d.headSeq == e.seq {
		d.head = nil // keep no copy of a file that is gone
	}
	d.entries = d.entries[1:]
	d.count(e, -1)
	if err := os.Remove(d.path(e.seq)); err == nil || errors.Is(err, fs.ErrNotExist) {
		d.s.used.Add(-e.size)
	}
}

// moveAside moves the oldest file, found corrupt, into the corrupt
// directory of the destination, where it no longer counts against the
// bound, and returns its new path and its entry.
func (d *destSpool) moveAside() (string, spoolEntry, error) {
	e := d.entries[0]
	d.entries = d.entries[1:]
	d.count(e, -1)
	d.s.used.Add(-e.size)
	aside := filepath.Join(d.dir, spoolCorrupt)
	if err := os.MkdirAll(aside, 0o700); err != nil {
		os.Remove(d.path(e.seq))
		return "", e, fmt.Errorf("export: spool: %w (the file was removed)", err)
	}
	to := filepath.Join(aside, filepath.Base(d.path(e.seq)))
	if err := os.Rename(d.path(e.seq), to); err != nil {
		os.Remove(d.path(e.seq))
		return "", e, fmt.Errorf("export: spool: %w (the file was removed)", err)
	}
	return to, e, nil
}

// keepRejected writes what the destination rejected for good (a batch, or
// the summary s) into the destination's rejected directory, where the
// operator can read it, and adds a line to the directory's errors.log:
// when, which file, and what the destination said (cause). A batch is
// written as JSON lines, the records of --format jsonl; a summary as its
// --summary line; a batch whose records cannot be written so (a key of no
// valid kind), in the spool file format. The files count against the
// spool's bound until the operator removes them: what does not fit is not
// kept (an error wrapping ErrSpoolFull). It returns the file's path.
func (d *destSpool) keepRejected(b *record.Batch, s *record.Summary, cause error, now time.Time) (string, error) {
	dir := d.rejectedDir()
	var data []byte
	var name, what string
	switch {
	case s != nil:
		data = record.AppendSummary(nil, s)
		name = "summary-" + time.Unix(0, s.StartNs).UTC().Format("20060102T150405Z")
		what = "window summary " + time.Unix(0, s.StartNs).UTC().Format(time.RFC3339)
	default:
		name = fmt.Sprintf("batch-%016x", b.ID)
		what = fmt.Sprintf("batch %d of %d records", b.ID, len(b.Records))
		if b.Observer != "" {
			what += " of observer " + strconv.Quote(b.Observer)
		}
		data = appendJSONLines(nil, b.Records)
	}
	ext := ".jsonl"
	if data == nil {
		data, ext = appendSpoolFile(nil, d.dest, b, nil, false), spoolExt
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("export: spool: %w", err)
	}
	path := filepath.Join(dir, name+ext)
	for i := 1; fileExists(path); i++ {
		path = filepath.Join(dir, fmt.Sprintf("%s.%d%s", name, i, ext))
	}
	line := fmt.Sprintf("%s %s: %s: %v\n", now.UTC().Format(time.RFC3339), filepath.Base(path), what, cause)
	size := int64(len(data) + len(line))
	if !d.s.reserve(size) {
		return "", fmt.Errorf("%w: %s holds %d of %d bytes", ErrSpoolFull, d.s.dir, d.s.used.Load(), d.s.max)
	}
	err := writeFileSync(dir, path, data)
	if err == nil {
		err = appendFile(filepath.Join(dir, rejectedLog), line)
	}
	if err != nil {
		d.s.used.Add(-size)
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return "", fmt.Errorf("%w: %w", ErrSpoolFull, err)
		}
		return "", err
	}
	return path, nil
}

// appendJSONLines appends recs as JSON lines, as --out's jsonl has them
// (record.AppendJSON).
func appendJSONLines(b []byte, recs []record.Record) []byte {
	for i := range recs {
		b = record.AppendJSON(b, &recs[i])
	}
	return b
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// writeFileSync writes data to path in dir: under a temporary name,
// synced, then renamed and the directory synced, so that a crash leaves
// either the whole file or a temporary one.
func writeFileSync(dir, path string, data []byte) error {
	tmp := filepath.Join(dir, spoolTmp+filepath.Base(path))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("export: spool: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("export: spool: %w", err)
	}
	return syncDir(dir)
}

func appendFile(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("export: spool: %w", err)
	}
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("export: spool: %w", err)
	}
	return nil
}

package report

import (
	"errors"
	"fmt"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/report/outfile"
)

// ErrNoWindows: a time-pattern output was given records or summaries of a
// run without windows (record.Record.Windowed, WindowSummary.Windowed
// false), which have no window time to name a file by. A window at any
// time has one: one that ends at the epoch, or starts before 1970, is
// named by its start like any other (package outfile).
var ErrNoWindows = errors.New("report: a time pattern in an output file name needs windows (--window)")

// RecordFiles is a Destination that writes records into one file per period of a
// time pattern (--out 'flows-%Y%m%dT%H.jsonl'): each record goes to the file
// its window's start names, in the format of a RecordWriter (a csv file
// starts with its header). A file is written under a temporary name and
// committed (renamed into place, see package report/outfile) when the
// window closes whose end falls in a later period, or at the final window,
// so that a reader never sees a partial file. A period whose windows had no
// record still gets its file, empty: "seen nothing" and "was not running"
// look different.
//
// Close flushes but does not commit: a run that ends without its final
// window (an error) leaves its open files under their temporary names.
type RecordFiles struct {
	files  *outfile.Files
	format string
	kind   flow.KeyKind
	byWin  map[int64]*fileRecords // by window start: the file its records go to
	byName map[string]*fileRecords
	names  ObserverNames // SetObservers
	segs   bool          // SetSegments
	err    error
}

// fileRecords is one open file of a RecordFiles.
type fileRecords struct {
	f  *outfile.File
	rw *RecordWriter
}

var _ record.Destination = (*RecordFiles)(nil)

// NewRecordFiles returns a RecordFiles writing into files, in format,
// records of kind.
func NewRecordFiles(files *outfile.Files, format string, kind flow.KeyKind) (*RecordFiles, error) {
	// Check format and kind once, as NewRecordWriter will for each file.
	if _, err := NewRecordWriter(nil, format, kind); err != nil {
		return nil, err
	}
	return &RecordFiles{files: files, format: format, kind: kind, byWin: map[int64]*fileRecords{}, byName: map[string]*fileRecords{}}, nil
}

// SetSegments gives every file's csv a vni column
// (RecordWriter.SetSegments). Call it before the first record.
func (rf *RecordFiles) SetSegments() { rf.segs = true }

// file returns the open file of the window starting at startNs, opening it
// when it is the first of its period.
func (rf *RecordFiles) file(startNs int64) (*fileRecords, error) {
	if fr := rf.byWin[startNs]; fr != nil {
		return fr, nil
	}
	t := time.Unix(0, startNs)
	name := rf.files.Name(t)
	fr := rf.byName[name]
	if fr == nil {
		f, err := rf.files.Open(t)
		if err != nil {
			return nil, fmt.Errorf("report: records: %w", err)
		}
		rw, err := NewRecordWriter(f, rf.format, rf.kind)
		if err != nil {
			return nil, err
		}
		if rf.names != nil {
			rw.SetObservers(rf.names) // a new writer: cannot fail
		}
		if rf.segs {
			rw.SetSegments() // a new writer: cannot fail
		}
		fr = &fileRecords{f: f, rw: rw}
		rf.byName[name] = fr
	}
	rf.byWin[startNs] = fr
	return fr, nil
}

// Records writes each record of b to the file of its window.
func (rf *RecordFiles) Records(b *record.Batch) error {
	if rf.err != nil {
		return rf.err
	}
	for i := range b.Records {
		r := &b.Records[i]
		if !r.Windowed {
			rf.err = ErrNoWindows
			return rf.err
		}
		fr, err := rf.file(r.WindowNs)
		if err == nil {
			err = fr.rw.Record(r)
		}
		if err != nil {
			rf.err = err
			return err
		}
	}
	return nil
}

// Window flushes every open file and commits those whose period the
// closed window ends; the final window commits them all.
func (rf *RecordFiles) Window(s *record.Summary) error {
	if rf.err != nil {
		return rf.err
	}
	if !s.Windowed {
		rf.err = ErrNoWindows
		return rf.err
	}
	// The file of the closed window exists even when it had no record.
	fr, err := rf.file(s.StartNs)
	if err != nil {
		rf.err = err
		return err
	}
	if fr.rw.format == formatText && s.Spread != nil && fr.rw.out.err == nil {
		fr.rw.buf = appendSpreadText(fr.rw.buf, s) // after the window's records, in its file
	}
	if err := rf.Flush(); err != nil {
		return err
	}
	name := rf.files.Name(time.Unix(0, s.StartNs))
	var done []string
	if s.Final {
		for n := range rf.byName {
			done = append(done, n)
		}
	} else if rf.files.Name(time.Unix(0, s.EndNs)) != name {
		done = append(done, name)
	}
	for _, n := range done {
		if rf.err = rf.commit(n); rf.err != nil {
			return rf.err
		}
	}
	return nil
}

// commit commits the file of name and forgets it.
func (rf *RecordFiles) commit(name string) error {
	fr := rf.byName[name]
	delete(rf.byName, name)
	for w, x := range rf.byWin {
		if x == fr {
			delete(rf.byWin, w)
		}
	}
	if _, err := rf.files.Commit(fr.f); err != nil {
		return fmt.Errorf("report: records: %w", err)
	}
	return nil
}

// Flush writes every open file's buffered records.
func (rf *RecordFiles) Flush() error {
	if rf.err != nil {
		return rf.err
	}
	for _, fr := range rf.byName {
		if err := fr.rw.Flush(); err != nil {
			rf.err = err
			return err
		}
	}
	return nil
}

// Close flushes and closes the files still open without committing them.
func (rf *RecordFiles) Close() error {
	err := rf.Flush()
	rf.byName, rf.byWin = map[string]*fileRecords{}, map[int64]*fileRecords{}
	return errors.Join(err, rf.files.Close())
}

// SummaryFiles is a Destination that writes window summaries into one file per
// period of a time pattern (--summary 'summary-%Y%m%d.jsonl'): each summary
// goes to the file its window's start names, and the file is committed as
// RecordFiles commits its files, but for the final window's file: it takes
// the run totals line too (Totals), after the exports' drain, and is
// committed then, or by Close.
type SummaryFiles struct {
	files *outfile.Files
	open  map[string]*outfile.File
	last  *outfile.File // the final window's file, committed by Totals or Close
	err   error
}

var _ record.Destination = (*SummaryFiles)(nil)

// NewSummaryFiles returns a SummaryFiles writing into files.
func NewSummaryFiles(files *outfile.Files) *SummaryFiles {
	return &SummaryFiles{files: files, open: map[string]*outfile.File{}}
}

// Records does nothing: summary files hold no records.
func (sf *SummaryFiles) Records(*record.Batch) error { return sf.err }

// Window writes the summary s to the file of its window, and commits the
// file when s ends its period or is the final window.
func (sf *SummaryFiles) Window(s *record.Summary) error {
	if sf.err != nil {
		return sf.err
	}
	if !s.Windowed {
		sf.err = ErrNoWindows
		return sf.err
	}
	t := time.Unix(0, s.StartNs)
	f, err := sf.files.Open(t)
	if err != nil {
		sf.err = fmt.Errorf("report: summary: %w", err)
		return sf.err
	}
	sf.open[f.Name] = f
	out := wholeWriter{w: f, op: "summary"}
	if sf.err = out.write(record.AppendSummary(nil, s), 1); sf.err != nil {
		return sf.err
	}
	if !s.Final && sf.files.Name(time.Unix(0, s.EndNs)) == f.Name {
		return nil
	}
	cur := f.Name
	for name, f := range sf.open {
		if s.Final || name == cur {
			delete(sf.open, name)
			if s.Final && name == cur {
				sf.last = f // Totals or Close commits it
				continue
			}
			if _, err := sf.files.Commit(f); err != nil {
				sf.err = fmt.Errorf("report: summary: %w", err)
				return sf.err
			}
		}
	}
	return nil
}

// Totals writes the run totals line into the final window's file and
// commits it. Without a final window it does nothing: there is no file
// that is complete.
func (sf *SummaryFiles) Totals(t *RunTotals) error {
	if sf.err != nil || sf.last == nil {
		return sf.err
	}
	out := wholeWriter{w: sf.last, op: "summary"}
	if sf.err = out.write(AppendRunTotals(nil, t), 1); sf.err != nil {
		return sf.err
	}
	return sf.commitLast()
}

func (sf *SummaryFiles) commitLast() error {
	f := sf.last
	sf.last = nil
	if _, err := sf.files.Commit(f); err != nil {
		sf.err = fmt.Errorf("report: summary: %w", err)
	}
	return sf.err
}

// Flush returns the first error, if any: nothing is buffered.
func (sf *SummaryFiles) Flush() error { return sf.err }

// Close commits the final window's file if Totals did not, and closes the
// files still open without committing them.
func (sf *SummaryFiles) Close() error {
	if sf.last != nil && sf.err == nil {
		sf.commitLast()
	}
	sf.open = map[string]*outfile.File{}
	return errors.Join(sf.err, sf.files.Close())
}

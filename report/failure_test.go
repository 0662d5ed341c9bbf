package report

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/record"
)

// fullWriter takes writes until limit bytes are used, then fails with
// ENOSPC. It takes a write whole or not at all unless partial is set, in
// which case it takes what fits, as a file on a filling disk does.
type fullWriter struct {
	buf     bytes.Buffer
	limit   int
	partial bool
}

func (w *fullWriter) Write(p []byte) (int, error) {
	room := w.limit - w.buf.Len()
	if len(p) <= room {
		return w.buf.Write(p)
	}
	if !w.partial {
		return 0, syscall.ENOSPC
	}
	w.buf.Write(p[:room])
	return room, syscall.ENOSPC
}

// fakeFile is a fullWriter that can be truncated, as *os.File can.
type fakeFile struct {
	fullWriter
	truncated int // calls to Truncate
}

func (f *fakeFile) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		return int64(f.buf.Len()) + offset, nil
	case io.SeekStart:
		return offset, nil
	}
	return 0, errors.ErrUnsupported
}

func (f *fakeFile) Truncate(size int64) error {
	f.truncated++
	f.buf.Truncate(int(size))
	return nil
}

// testRecords are 5-tuple records of varying lengths.
func testRecords() (recs []record.Record, lines []string) {
	for _, tc := range recordCases {
		if tc.rec.Key.Kind() == flow.Key5Tuple {
			recs = append(recs, tc.rec)
			lines = append(lines, tc.jsonl+"\n")
		}
	}
	return recs, lines
}

// fillUntilError writes records to rw until a call fails, flushing after
// every flushEvery-th one (never when 0), and returns the records handed to
// rw (the failing call included), the expected text of each, and the error.
func fillUntilError(t *testing.T, rw *RecordWriter, flushEvery int) (accepted int, lines []string, err error) {
	t.Helper()
	recs, golden := testRecords()
	for i := range 1 << 20 {
		lines = append(lines, golden[i%len(recs)])
		if err = rw.Record(&recs[i%len(recs)]); err == nil && flushEvery > 0 && i%flushEvery == 0 {
			err = rw.Flush()
		}
		if err != nil {
			return i + 1, lines, err
		}
	}
	t.Fatal("no write error after 1M records")
	return
}

// checkFailure checks that err reports the failure, that every later call
// returns it, and that out holds the first records and nothing else.
func checkFailure(t *testing.T, rw *RecordWriter, accepted int, lines []string, err error, out []byte, wantPartial bool) {
	t.Helper()
	var we *WriteError
	if !errors.As(err, &we) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("error %v: want a *WriteError wrapping ENOSPC", err)
	}
	if we.Partial != wantPartial {
		t.Errorf("Partial = %v, want %v (%v)", we.Partial, wantPartial, err)
	}
	recs, _ := testRecords()
	if err2 := rw.Record(&recs[0]); err2 != err {
		t.Errorf("Record after the failure: %v, want the same error", err2)
	}
	if err2 := rw.Flush(); err2 != err {
		t.Errorf("Flush after the failure: %v, want the same error", err2)
	}
	if wantPartial {
		return
	}
	// The output is exactly the first `written` records; the rest were
	// counted as lost.
	written := accepted - we.Lost
	if written < 0 {
		t.Fatalf("Lost = %d of %d records", we.Lost, accepted)
	}
	if want := strings.Join(lines[:written], ""); string(out) != want {
		t.Errorf("output is %d bytes ending %q; want %d whole records (%d bytes), %d lost",
			len(out), tail(out), written, len(want), we.Lost)
	}
}

func tail(b []byte) string { return string(b[max(0, len(b)-40):]) }

// TestWriteFailureWhole: a destination that takes a write whole or not at
// all (a pipe, /dev/full) ends at a record boundary, for every limit.
func TestWriteFailureWhole(t *testing.T) {
	for _, limit := range []int{0, 1, 100, bufSize - 1, bufSize, bufSize + 1, 3*bufSize + 777} {
		for _, flushEvery := range []int{0, 7} {
			w := &fullWriter{limit: limit}
			rw, err := NewRecordWriter(w, "jsonl", flow.Key5Tuple)
			if err != nil {
				t.Fatal(err)
			}
			accepted, lines, err := fillUntilError(t, rw, flushEvery)
			checkFailure(t, rw, accepted, lines, err, w.buf.Bytes(), false)
		}
	}
}

// TestWriteFailureTruncated: a file that takes part of the failing write
// is truncated back to the last whole record.
func TestWriteFailureTruncated(t *testing.T) {
	for _, limit := range []int{1, 100, bufSize - 1, bufSize + 1, 3*bufSize + 777} {
		f := &fakeFile{fullWriter: fullWriter{limit: limit, partial: true}}
		rw, err := NewRecordWriter(f, "jsonl", flow.Key5Tuple)
		if err != nil {
			t.Fatal(err)
		}
		accepted, lines, err := fillUntilError(t, rw, 0)
		if f.truncated != 1 {
			t.Errorf("limit %d: %d truncations, want 1", limit, f.truncated)
		}
		checkFailure(t, rw, accepted, lines, err, f.buf.Bytes(), false)
	}
}

// TestWriteFailurePartial: a writer that keeps part of a write and cannot
// be truncated still reports the failure, and says the output is cut.
func TestWriteFailurePartial(t *testing.T) {
	w := &fullWriter{limit: 1000, partial: true}
	rw, err := NewRecordWriter(w, "csv", flow.Key5Tuple)
	if err != nil {
		t.Fatal(err)
	}
	accepted, lines, err := fillUntilError(t, rw, 0)
	checkFailure(t, rw, accepted, lines, err, w.buf.Bytes(), true)
	if !strings.Contains(err.Error(), "ends inside a record") {
		t.Errorf("error %q does not say the output is cut", err)
	}
}

// shortWriter breaks the io.Writer contract: a short write without an
// error.
type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }

func TestShortWriteIsAnError(t *testing.T) {
	rw, err := NewRecordWriter(shortWriter{}, "text", flow.KeySrc)
	if err != nil {
		t.Fatal(err)
	}
	rec := recordCases[0].rec
	if err := rw.Record(&rec); err != nil {
		t.Fatal(err)
	}
	if err := rw.Flush(); !errors.Is(err, io.ErrShortWrite) {
		t.Errorf("Flush: %v, want io.ErrShortWrite", err)
	}
}

func TestWriteErrorMessage(t *testing.T) {
	err := &WriteError{Op: "records", Err: syscall.ENOSPC, Lost: 12}
	if got, want := err.Error(), "report: writing records: no space left on device (12 not written)"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestTotalsAfterWriteError (issue 10): when --out fails, the run stops
// with the error, and the totals line counts every packet read and every
// window closed, not "packets 0".
func TestTotalsAfterWriteError(t *testing.T) {
	src, err := pcapfile.Open("../testdata/pcaps/windows.pcap")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var totals bytes.Buffer
	r, err := New(Config{Out: &fullWriter{limit: 1000}, Kind: flow.Key5Tuple, Totals: &totals})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(pipeline.Config{Workers: 2, Filter: "exact", Key: flow.Key5Tuple, Window: time.Minute}, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(t.Context(), src); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Run: %v, want ENOSPC", err)
	}
	st := p.Stats()
	if st.Packets == 0 || st.Windows == 0 {
		t.Fatalf("the pipeline read %d packets in %d windows", st.Packets, st.Windows)
	}
	line := totals.String()
	m := regexp.MustCompile(`^totals: packets (\d+), .*, windows (\d+)\n$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("totals %q: not the totals line", line)
	}
	if m[1] != strconv.FormatUint(st.Packets, 10) || m[2] != strconv.FormatUint(st.Windows, 10) {
		t.Errorf("totals %q: want packets %d, windows %d (the pipeline's)", line, st.Packets, st.Windows)
	}
}

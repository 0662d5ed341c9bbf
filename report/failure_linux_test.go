//go:build linux

package report

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/record"
)

// TestDevFull writes to /dev/full, where every write fails with ENOSPC: the
// first flush fails, and Reporter returns that error from every call.
func TestDevFull(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		testutil.SkipOrFail(t, "no /dev/full: %v", err)
	}
	defer f.Close()

	var totals bytes.Buffer
	r, err := New(Config{Out: f, Format: "jsonl", Kind: flow.Key5Tuple, Totals: &totals})
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := testRecords()
	var first error
	for i := 0; first == nil && i < 1<<20; i++ {
		first = r.Record(&recs[i%len(recs)])
	}
	if !errors.Is(first, syscall.ENOSPC) {
		t.Fatalf("writing to /dev/full: %v, want ENOSPC", first)
	}
	var we *WriteError
	if !errors.As(first, &we) || we.Partial || we.Lost == 0 {
		t.Errorf("error %#v: want a *WriteError with records lost and no partial record", first)
	}
	if !strings.Contains(first.Error(), "/dev/full") {
		t.Errorf("error %q does not name the file", first)
	}
	if err := r.Window(&record.WindowSummary{Final: true}); err != first {
		t.Errorf("Window after the failure: %v, want the first error", err)
	}
	if err := r.Close(); err != first {
		t.Errorf("Close: %v, want the first error", err)
	}
	if !strings.HasPrefix(totals.String(), "totals: ") {
		t.Errorf("totals not written after the failure: %q", totals.String())
	}

	sw := NewSummaryWriter(f)
	if err := sw.Window(&record.Summary{}); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("summary to /dev/full: %v, want ENOSPC", err)
	}
}

// TestFileSizeLimit fills a real file up to RLIMIT_FSIZE, the closest a
// test gets to a full disk: the kernel takes part of the write that
// crosses the limit, then fails with EFBIG. The file must be cut back to
// the last whole record.
func TestFileSizeLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rw, err := NewRecordWriter(f, "jsonl", flow.Key5Tuple)
	if err != nil {
		t.Fatal(err)
	}

	// The limit is process-wide: hold it only around the writes. Go
	// ignores the SIGXFSZ that comes with EFBIG.
	const limit = 3*bufSize + 12345
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	if old.Cur != ^uint64(0) && old.Cur < limit+bufSize {
		t.Skipf("RLIMIT_FSIZE is already %d", old.Cur)
	}
	lim := old
	lim.Cur = limit
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	accepted, lines, werr := fillUntilError(t, rw, 0)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatalf("restoring RLIMIT_FSIZE: %v", err)
	}

	if !errors.Is(werr, syscall.EFBIG) {
		t.Fatalf("writing past RLIMIT_FSIZE: %v, want EFBIG", werr)
	}
	var we *WriteError
	if !errors.As(werr, &we) || we.Partial {
		t.Fatalf("error %v: want a *WriteError without a partial record", werr)
	}
	out, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	written := accepted - we.Lost
	if want := strings.Join(lines[:written], ""); string(out) != want {
		t.Errorf("file is %d bytes ending %q; want %d whole records (%d bytes)", len(out), tail(out), written, len(want))
	}
	if len(out) >= limit {
		t.Errorf("file is %d bytes; the write that crossed %d should have been taken back", len(out), limit)
	}
}

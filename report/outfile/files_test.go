package outfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func newFiles(t *testing.T, pattern string, retain int) (*Files, *bytes.Buffer, string) {
	t.Helper()
	dir := t.TempDir()
	p, err := ParsePattern(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	var notice bytes.Buffer
	w, err := NewFiles(p, retain, &notice)
	if err != nil {
		t.Fatal(err)
	}
	return w, &notice, dir
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func hour(h int) time.Time { return time.Date(2026, 11, 25, h, 0, 0, 0, time.UTC) }

// A file is written under NAME.tmp and appears under NAME, whole, only when
// committed; a period's file is opened once however often it is asked for.
func TestCommitRenames(t *testing.T) {
	w, _, dir := newFiles(t, "f-%Y%m%dT%H.jsonl", 0)
	a, err := w.Open(hour(10).Add(5 * time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := w.Open(hour(10).Add(50 * time.Minute))
	if a != b || !w.IsOpen(hour(10)) {
		t.Fatalf("two opens of one period gave two files")
	}
	a.WriteString("one\n")
	if got := dirNames(t, dir); !slices.Equal(got, []string{"f-20261125T10.jsonl.tmp"}) {
		t.Fatalf("before commit the directory holds %v", got)
	}
	name, err := w.Commit(a)
	if err != nil {
		t.Fatal(err)
	}
	if name != filepath.Join(dir, "f-20261125T10.jsonl") || w.IsOpen(hour(10)) {
		t.Fatalf("committed as %q, still open %v", name, w.IsOpen(hour(10)))
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"f-20261125T10.jsonl"}) {
		t.Fatalf("after commit the directory holds %v", got)
	}
	if b, _ := os.ReadFile(name); string(b) != "one\n" {
		t.Fatalf("committed file holds %q", b)
	}
}

// A committed name is never overwritten: a second file of the same period
// (a restarted run) takes the next free suffix before the extension.
func TestCommitNeverOverwrites(t *testing.T) {
	w, _, dir := newFiles(t, "f-%Y%m%dT%H.jsonl", 0)
	for i, want := range []string{"f-20261125T10.jsonl", "f-20261125T10.1.jsonl", "f-20261125T10.2.jsonl"} {
		f, err := w.Open(hour(10))
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(strings.Repeat("x", i+1))
		name, err := w.Commit(f)
		if err != nil || filepath.Base(name) != want {
			t.Fatalf("commit %d: %q, %v; want %q", i, name, err, want)
		}
	}
	for i, name := range []string{"f-20261125T10.jsonl", "f-20261125T10.1.jsonl", "f-20261125T10.2.jsonl"} {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); len(b) != i+1 {
			t.Errorf("%s holds %q, want %d bytes", name, b, i+1)
		}
	}
	got, _ := w.List()
	if len(got) != 3 || filepath.Base(got[2]) != "f-20261125T10.2.jsonl" {
		t.Errorf("List = %v, want the three in suffix order", got)
	}
}

// A temporary file left by a killed process is kept as NAME.partial (then
// NAME.partial.1) with a notice, never overwritten or committed.
func TestLeftoverTempKeptAsPartial(t *testing.T) {
	w, notice, dir := newFiles(t, "f-%Y%m%dT%H.jsonl", 0)
	tmp := filepath.Join(dir, "f-20261125T10.jsonl.tmp")
	for i, want := range []string{"f-20261125T10.jsonl.partial", "f-20261125T10.jsonl.partial.1"} {
		if err := os.WriteFile(tmp, []byte{byte('a' + i)}, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := w.Open(hour(10))
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, want)); string(b) != string(rune('a'+i)) {
			t.Fatalf("left-over %d: %s holds %q", i, want, b)
		}
		if !strings.Contains(notice.String(), want) {
			t.Errorf("no notice naming %s: %q", want, notice.String())
		}
		w.Close() // leaves the new temporary file, as a killed run would
		if _, err := os.Stat(f.File.Name()); err != nil {
			t.Fatalf("Close removed the temporary file: %v", err)
		}
		os.Remove(tmp)
	}
}

// Retention keeps the files of the newest N periods, by the time in their
// names (not by name order, not by mtime), a file and its suffixed copies
// being one period, and ignores temporary, partial and foreign files.
func TestRetention(t *testing.T) {
	w, notice, dir := newFiles(t, "f-%d.%m.%Y-%H.jsonl", 3) // day first: name order is not time order
	for _, name := range []string{"f-25.11.2026-09.jsonl.tmp", "f-25.11.2026-08.jsonl.partial", "other.jsonl", "f-xx.jsonl"} {
		os.WriteFile(filepath.Join(dir, name), nil, 0o644)
	}
	for _, at := range []time.Time{hour(10), hour(8).AddDate(0, 0, 1), hour(9), hour(11), hour(11)} {
		f, err := w.Open(at)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(f); err != nil {
			t.Fatal(err)
		}
	}
	got := dirNames(t, dir)
	// The left-over 09 temporary file became a partial one when 09 was
	// opened. Of the periods 09, 10, 11 (twice) and the next day's 08, the
	// newest 3 stay: 09 went when 11 came; the second 11 is the same period.
	want := []string{"f-25.11.2026-08.jsonl.partial", "f-25.11.2026-09.jsonl.partial", "f-25.11.2026-10.jsonl", "f-25.11.2026-11.1.jsonl", "f-25.11.2026-11.jsonl", "f-26.11.2026-08.jsonl", "f-xx.jsonl", "other.jsonl"}
	if !slices.Equal(got, want) {
		t.Fatalf("after retention of 3 the directory holds\n%v\nwant\n%v", got, want)
	}
	tmp09 := filepath.Join(dir, "f-25.11.2026-09.jsonl")
	if n := notice.String(); n != tmp09+".tmp was left by an earlier process that did not finish it; kept as "+tmp09+".partial\n"+
		"removed "+tmp09+" (keeping the newest 3 periods)\n" {
		t.Errorf("notices %q, want one for the partial file and one for the removed file, without a prefix", n)
	}
}

// TestRetentionRerun: a second run over the same periods in the same
// directory (an import run again) writes NAME.1 beside each NAME; with
// --retain the originals of the kept periods stay beside their copies, and
// a period that goes takes its copies with it (before, x-0005 was removed
// and x-0005.1 kept: copies counted as periods of their own).
func TestRetentionRerun(t *testing.T) {
	dir := t.TempDir()
	for run := range 2 {
		p, err := ParsePattern(filepath.Join(dir, "x-%Y%m%dT%H.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		w, err := NewFiles(p, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		for h := 1; h <= 5; h++ {
			f, err := w.Open(hour(h))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(f, "run %d\n", run)
			if _, err := w.Commit(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []string{
		"x-20261125T03.1.jsonl", "x-20261125T03.jsonl",
		"x-20261125T04.1.jsonl", "x-20261125T04.jsonl",
		"x-20261125T05.1.jsonl", "x-20261125T05.jsonl",
	}
	if got := dirNames(t, dir); !slices.Equal(got, want) {
		t.Fatalf("after two runs with retention 3 the directory holds\n%v\nwant\n%v", got, want)
	}
	for _, name := range want {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		if run := map[bool]string{true: "run 1\n", false: "run 0\n"}[strings.Contains(name, ".1.")]; string(b) != run {
			t.Errorf("%s holds %q, want %q", name, b, run)
		}
	}
}

func TestNewFilesErrors(t *testing.T) {
	for _, c := range []struct {
		pattern string
		retain  int
		says    string
	}{
		{"plain.jsonl", 0, "no time conversion"},
		{"f-%H.jsonl", 24, "time order"},
		{"f-%Y%m%dT%H.jsonl", -1, "negative"},
	} {
		p, err := ParsePattern(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewFiles(p, c.retain, nil); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("NewFiles(%q, %d) = %v, want an error saying %q", c.pattern, c.retain, err, c.says)
		}
	}
}

// CommitAll commits in period order, so retention counts them in order.
func TestCommitAll(t *testing.T) {
	w, _, dir := newFiles(t, "f-%Y%m%dT%H", 2)
	for _, h := range []int{12, 10, 11} {
		if _, err := w.Open(hour(h)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.CommitAll(); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"f-20261125T11", "f-20261125T12"}) {
		t.Fatalf("CommitAll with retention 2 left %v", got)
	}
}

// The directory of a pattern is made when a file is opened; a directory
// that cannot be made is an error, not a panic.
func TestOpenMakesDirectory(t *testing.T) {
	dir := t.TempDir()
	p, _ := ParsePattern(filepath.Join(dir, "a", "b", "f-%H"))
	w, _ := NewFiles(p, 0, nil)
	if _, err := w.Open(hour(1)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	p, _ = ParsePattern(filepath.Join(dir, "file", "f-%H"))
	w, _ = NewFiles(p, 0, nil)
	if _, err := w.Open(hour(1)); err == nil {
		t.Fatal("opening under a regular file succeeded")
	}
}

// After the file is moved away (logrotate), Reopen makes the next write go
// to a new file at the path; the old file keeps what was written before.
// Seek and Truncate act on the current file.
func TestReopener(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	r, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Write([]byte("a\n"))
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	r.Write([]byte("b\n")) // not asked to reopen: still the moved file
	r.Reopen()
	r.Write([]byte("c\nd"))
	if err := r.Truncate(2); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path + ".1"); string(b) != "a\nb\n" {
		t.Errorf("rotated file holds %q", b)
	}
	if b, _ := os.ReadFile(path); string(b) != "c\n" {
		t.Errorf("new file holds %q", b)
	}
	// A path that cannot be reopened is an error of the write.
	os.Remove(path)
	os.Mkdir(path, 0o755)
	r.Reopen()
	if _, err := r.Write([]byte("e\n")); err == nil || !strings.Contains(err.Error(), "reopening") {
		t.Errorf("write after a failed reopen: %v, want the reopen error", err)
	}
}

package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The man pages: one per command and per shell the packages ship a
// completion script for, none for PowerShell's (a Linux package shipped
// flowdedup-completion-powershell(1)); flowdedup(1) describes every input,
// collect's too; a command's page keeps its long description.
func TestManPages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the pages describe the Linux build's commands")
	}
	dir := t.TempDir()
	if err := writeManPages(dir, "1.2.3", time.Unix(1700000000, 0)); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{"flowdedup-collect.1.gz", "flowdedup-completion-bash.1.gz", "flowdedup-completion-fish.1.gz",
		"flowdedup-completion-zsh.1.gz", "flowdedup-completion.1.gz", "flowdedup-eval.1.gz", "flowdedup-filters.1.gz",
		"flowdedup-gen.1.gz", "flowdedup-merge.1.gz", "flowdedup-replay.1.gz", "flowdedup-run.1.gz", "flowdedup-tune.1.gz",
		"flowdedup.1.gz"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("pages %q,\nwant %q", got, want)
	}
	page := func(name string) string {
		t.Helper()
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	root := page("flowdedup.1.gz")
	for _, w := range []string{"NetFlow v5, v9, IPFIX and sFlow", "(collect)", "(replay)", "(run)", "flowdedup-collect(1)"} {
		if !strings.Contains(root, w) {
			t.Errorf("flowdedup(1) lacks %q", w)
		}
	}
	if completion := page("flowdedup-completion.1.gz"); strings.Contains(completion, "powershell") || !strings.Contains(completion, "flowdedup-completion-bash(1)") {
		t.Errorf("flowdedup-completion(1) sees also:\n%s", completion)
	}
	// The long description --help leaves out.
	if replay := page("flowdedup-replay.1.gz"); !strings.Contains(replay, "one warning on stderr") || !bytes.Contains([]byte(replay), []byte(".SH EXAMPLE")) {
		t.Errorf("flowdedup-replay(1) lacks its description or examples")
	}
}

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// flowdedup returns the flowdedup command built once for these tests.
func flowdedup(tb testing.TB) string { return testutil.Flowdedup(tb) }

// TestMain runs the tests with at least testutil.MinParallel parallel
// tests at once and removes the flowdedup build (testutil.MainParallel).
func TestMain(m *testing.M) { testutil.MainParallel(m) }

// pcap returns the path of a testdata capture.
func pcap(name string) string { return filepath.Join("..", "testdata", "pcaps", name) }

// result is what a flowdedup process left.
type result struct {
	code           int
	stdout, stderr string
	cpu            time.Duration // user and system time of the process
}

// flowdedupRun runs flowdedup with args, with a time limit, and returns
// its exit code and output.
func flowdedupRun(tb testing.TB, args ...string) result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, flowdedup(tb), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if cmd.ProcessState != nil {
		r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		tb.Fatalf("flowdedup %q: %v", args, err)
	}
	if ctx.Err() != nil {
		tb.Fatalf("flowdedup %q did not finish in 2 minutes:\n%s", args, r.stderr)
	}
	return r
}

// mustRun runs flowdedup and fails tb unless it exits 0.
func mustRun(tb testing.TB, args ...string) result {
	tb.Helper()
	r := flowdedupRun(tb, args...)
	if r.code != 0 {
		tb.Fatalf("flowdedup %q: exit %d:\n%s", args, r.code, r.stderr)
	}
	return r
}

// record is a jsonl record, the fields the tests compare.
type record struct {
	TS     time.Time `json:"ts"`
	Window time.Time `json:"window"`
	Src    string    `json:"src"`
	Dst    string    `json:"dst"`
	Proto  uint8     `json:"proto"`
	Sport  uint16    `json:"sport"`
	Dport  uint16    `json:"dport"`
}

// readRecords reads a jsonl record file.
func readRecords(tb testing.TB, path string) []record {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var recs []record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			tb.Fatalf("%s: record %q: %v", path, sc.Text(), err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return recs
}

// countLines returns the number of lines of a file: the records of a
// jsonl record file, where a test compares only how many there are.
func countLines(tb testing.TB, path string) int {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// exactRecords replays files with the exact filter and args (--key,
// --window) and returns the records: the ground truth.
func exactRecords(tb testing.TB, args ...string) []record {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "exact.jsonl")
	mustRun(tb, append([]string{"replay", "--filter", "exact", "--out", out}, args...)...)
	return readRecords(tb, out)
}

// gen writes a capture with `flowdedup gen` and returns its path.
func gen(tb testing.TB, dir, name string, args ...string) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	mustRun(tb, append([]string{"gen", "-o", path}, args...)...)
	return path
}

// lines splits text into its non-empty lines.
func lines(text string) []string {
	var out []string
	for l := range strings.Lines(text) {
		if l = strings.TrimRight(l, "\n"); l != "" {
			out = append(out, l)
		}
	}
	return out
}

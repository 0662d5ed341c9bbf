package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// rssHelperEnv makes the test binary a helper that runs the command of its
// arguments and says that command's largest resident set (see maxRSS).
const rssHelperEnv = "FLOWDEDUP_E2E_MAXRSS_HELPER"

func init() {
	if os.Getenv(rssHelperEnv) == "" {
		return
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(125)
	}
	fmt.Fprintf(os.Stderr, "\nmaxrss-kib %d\n", cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
	os.Exit(cmd.ProcessState.ExitCode())
}

// maxRSS runs flowdedup with args and returns its output and its largest
// resident set in bytes. The rusage of a process that Go starts is no
// measure of it: Go starts processes with vfork, and the kernel counts the
// parent's resident set (this test binary's, which grows with the tests
// before) in the child's ru_maxrss when the child execs. So the test
// binary starts itself afresh, small, as a helper (rssHelperEnv) that
// starts flowdedup and reports its ru_maxrss: at most the helper's few MiB
// of its own, or flowdedup's.
func maxRSS(tb testing.TB, args ...string) (stdout string, rss int64) {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(self, append([]string{flowdedup(tb)}, args...)...)
	cmd.Env = append(os.Environ(), rssHelperEnv+"=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		tb.Fatalf("flowdedup %q: %v\n%s", args, err, errb.String())
	}
	_, tail, ok := strings.Cut(errb.String(), "\nmaxrss-kib ")
	kib, err := strconv.ParseInt(strings.TrimSpace(tail), 10, 64)
	if !ok || err != nil {
		tb.Fatalf("flowdedup %q: the helper did not say the max RSS:\n%s", args, errb.String())
	}
	return out.String(), kib << 10
}

// maxMergeRSS is issue 21's bound on merge's memory for three routers of
// 8000 one-minute windows each.
const maxMergeRSS = 64 << 20

// TestMergeMemory: `flowdedup merge` of three routers' summaries of 8000
// one-minute windows each (about 5 MB a file, as a router writes in five
// and a half days) stays within 64 MiB of resident memory, measured as the
// merge process's ru_maxrss, in each output format and by the hour. Before
// merge streamed it held a sketch per window: 300 MiB.
//
// The inputs are fixed (gen's seed), so the only thing that varies between
// runs is when the garbage collector runs; the bound leaves room for that
// (about 40 MiB measured, most of it the runtime and the binary).
func TestMergeMemory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var files []string
	for i := 1; i <= 3; i++ {
		capture := gen(t, dir, fmt.Sprintf("r%d.pcap", i), "--seed", "5", "--flows", fmt.Sprint(15000+5000*i), "--packets", "240000",
			"--ipv6", "0.2", "--duration", "480000s")
		summary := filepath.Join(dir, fmt.Sprintf("r%d.jsonl", i))
		mustRun(t, "replay", "--key", "src", "--window", "1m", "--observer", fmt.Sprintf("r%d", i), "--summary-sketch",
			"--summary", summary, "--out", "/dev/null", capture)
		files = append(files, summary)
	}
	for _, c := range []struct {
		args []string
		rows int // lines of output
	}{
		{[]string{"--format", "json"}, 8000},
		{nil, 8002}, // text: the key line and the header
		{[]string{"--by", "1h", "--format", "csv"}, 135},
	} {
		out, rss := maxRSS(t, append(append([]string{"merge"}, c.args...), files...)...)
		if n := strings.Count(out, "\n"); n != c.rows {
			t.Errorf("merge %q: %d lines, want %d", c.args, n, c.rows)
		}
		if rss > maxMergeRSS || rss <= 0 {
			t.Errorf("merge %q: max RSS %.1f MiB, want at most %d MiB", c.args, float64(rss)/(1<<20), maxMergeRSS>>20)
		}
		t.Logf("merge %q of 3 x 8000 windows: max RSS %.1f MiB", c.args, float64(rss)/(1<<20))
	}
}

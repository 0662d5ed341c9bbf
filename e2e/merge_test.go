package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

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
		r := mustRun(t, append(append([]string{"merge"}, c.args...), files...)...)
		if n := strings.Count(r.stdout, "\n"); n != c.rows {
			t.Errorf("merge %q: %d lines, want %d", c.args, n, c.rows)
		}
		if r.maxRSS > maxMergeRSS || r.maxRSS <= 0 {
			t.Errorf("merge %q: max RSS %.1f MiB, want at most %d MiB", c.args, float64(r.maxRSS)/(1<<20), maxMergeRSS>>20)
		}
		t.Logf("merge %q of 3 x 8000 windows: max RSS %.1f MiB, CPU %v", c.args, float64(r.maxRSS)/(1<<20), r.cpu)
	}
}

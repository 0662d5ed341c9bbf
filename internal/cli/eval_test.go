package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEvalMemSweep(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fig.svg")
	code, out, errs := run("eval", "--filter", "qht", "--filter", "exact", "--mem", "8KiB,16KiB",
		"--stream", "uniform:n=2000,universe=3000", "--seed", "1", "--format", "csv", "--plot", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+3 || !strings.HasPrefix(lines[1], `"qht:mem=8KiB,`) ||
		!strings.HasPrefix(lines[2], `"qht:mem=16KiB,`) || !strings.HasPrefix(lines[3], "exact,") {
		t.Errorf("csv:\n%s", out)
	}
	if !strings.Contains(errs, "exact") || !strings.Contains(errs, "not swept") {
		t.Errorf("no note that exact is not swept: %q", errs)
	}
	for _, p := range []string{path, filepath.Join(filepath.Dir(path), "fig-fpr.svg")} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestEvalMemUsageErrors(t *testing.T) {
	base := []string{"eval", "--filter", "qht", "--stream", "distinct:n=10"}
	for _, extra := range [][]string{
		{"--mem", "8kb"},
		{"--mem", ""},
		{"--mem", "8KiB,,16KiB"},
		{"--mem", "-8KiB"},
		{"--plot", "fig.svg"},                          // nothing swept to plot
		{"--mem", "8KiB", "--plot", "fig.pdf"},         // unknown format
		{"--mem", "8KiB", "--filter", "lru:entries=9"}, // size fixed by entries=
	} {
		args := append(append([]string(nil), base...), extra...)
		code, _, errs := run(args...)
		if code != ExitUsage || errs == "" {
			t.Errorf("%q: exit %d, stderr %q; want %d (usage)", args, code, errs, ExitUsage)
		}
	}
}

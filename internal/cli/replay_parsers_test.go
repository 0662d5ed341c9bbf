package cli

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReplayWorkersSameRecords: with --filter exact, replay --workers 1
// (the reader keys the frames) and --workers 2 (the reader keys the frames
// and runs both workers, the default) write the same distinct records, and
// the same totals, for every testdata capture; so do --workers 2 with
// --parsers 0, 2 and 3 (parse goroutines).
func TestReplayWorkersSameRecords(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../testdata/pcaps/*.pcap*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata captures: %v", err)
	}
	for _, file := range files {
		for _, key := range []string{"src", "5tuple"} {
			var want []string
			var wantTotals string
			for _, extra := range [][]string{{"--workers", "1"}, {"--workers", "2"}, {"--workers", "2", "--parsers", "0"}, {"--workers", "2", "--parsers", "2"}, {"--workers", "2", "--parsers", "3"}} {
				args := append([]string{"replay", "--filter", "exact", "--key", key, "--window", "1m", "--seed", "7", "--format", "csv"}, extra...)
				code, out, errs := run(append(args, file)...)
				if code != ExitOK {
					t.Fatalf("%s %v: exit %d: %s", file, extra, code, errs)
				}
				lines := strings.Split(strings.TrimSpace(out), "\n")
				slices.Sort(lines)
				totals := errs[strings.Index(errs, "totals:"):]
				if want == nil {
					if len(lines) < 2 {
						t.Fatalf("%s: %d lines of records: the comparison would prove nothing", file, len(lines))
					}
					want, wantTotals = lines, totals
					continue
				}
				if !slices.Equal(lines, want) {
					t.Errorf("%s --key %s %v: %d records differ from the %d of --workers 1", file, key, extra, len(lines), len(want))
				}
				if totals != wantTotals {
					t.Errorf("%s --key %s %v: totals %q, want %q", file, key, extra, totals, wantTotals)
				}
			}
		}
	}
}

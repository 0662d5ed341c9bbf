//go:build linux && release

package packaging

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// Routers are often 32-bit ARM or big-endian MIPS. flowdedup built for
// them, run under qemu-user on this machine, must give byte for byte the
// records and summaries it gives here: the same keys, the same hashes (so
// the same false positives of a qht at 64 KiB, a sharp test of hashing and
// filter arithmetic in 32-bit ints and in big-endian byte order), the same
// window counts and HyperLogLog estimates. Live capture is not built for
// big-endian Linux (the XDP objects are little-endian): run says so.
func TestRouterPlatformsGiveTheSameAnswers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cross-platform test: skipped in -short mode")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("runs the amd64 build as the reference; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	// The release builds (make test builds them once, for this test and
	// packaging's; testutil.Release).
	platforms := []struct {
		arch, qemu string
		bigEndian  bool
	}{
		{"mips", "qemu-mips", true},  // big-endian, 32-bit (ath79 and other MIPS routers)
		{"armv7", "qemu-arm", false}, // 32-bit ARMv7 (most other routers)
	}
	captures := []string{"small.pcap", "small.pcapng", "ipv6.pcap", "vlan.pcap", "fragments.pcap", "malformed.pcap", "windows.pcap", "zipf.pcap.gz"}
	native := testutil.Flowdedup(t)
	for _, p := range platforms {
		t.Run(p.arch, func(t *testing.T) {
			qemu, err := exec.LookPath(p.qemu)
			if err != nil {
				testutil.SkipOrFail(t, "%s not installed (Debian package qemu-user; .ci/run installs it)", p.qemu)
			}
			bin := testutil.Release(t, p.arch)
			for _, c := range captures {
				for _, key := range []string{"src", "5tuple"} {
					// One worker: with more, records of different workers
					// interleave in no fixed order.
					args := []string{"replay", "--workers", "1", "--key", key, "--window", "1m", "--filter", "qht:mem=64KiB",
						"--seed", "3", "--observer", "r1", "--summary-sketch", filepath.Join("..", "testdata", "pcaps", c)}
					want := replayOn(t, []string{native}, args)
					got := replayOn(t, []string{qemu, bin}, args)
					if want.records != got.records || want.summaries != got.summaries {
						t.Errorf("%s --key %s: %s output differs from amd64's:\nrecords equal %v, summaries equal %v\namd64 summaries:\n%s\n%s summaries:\n%s",
							c, key, p.arch, want.records == got.records, want.summaries == got.summaries, want.summaries, p.arch, got.summaries)
					}
					if want.records == "" || !strings.Contains(want.summaries, `"sketch":"`) {
						t.Fatalf("%s --key %s: the reference gave no records or no sketch:\n%s", c, key, want.summaries)
					}
				}
			}
			if p.bigEndian {
				r := runUnder(t, []string{qemu, bin}, []string{"run", "-i", "lo"})
				if r.code != 1 || !strings.Contains(r.stderr, "not built for big-endian mips") {
					t.Errorf("run on big-endian mips: exit %d, %q; want 1 and the reason", r.code, r.stderr)
				}
			}
		})
	}
}

// platformOutput is what one process wrote.
type platformOutput struct {
	code                       int
	records, summaries, stderr string
}

// replayOn runs flowdedup replay with args under the command prefix (the
// binary, or qemu and the binary), with --out and --summary files in a
// temporary directory, and returns what it wrote; a failing replay fails t.
func replayOn(t *testing.T, prefix []string, args []string) platformOutput {
	t.Helper()
	dir := t.TempDir()
	out, sum := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "summary.jsonl")
	o := runUnder(t, prefix, append(append([]string{}, args...), "--out", out, "--summary", sum))
	if o.code != 0 {
		t.Fatalf("%q %q: exit %d:\n%s", prefix, args, o.code, o.stderr)
	}
	r, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	o.records, o.summaries = string(r), string(s)
	return o
}

// runUnder runs flowdedup with args under the command prefix, with a time
// limit, and returns its exit code and standard error.
func runUnder(t *testing.T, prefix []string, args []string) platformOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append(append([]string{}, prefix...), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	o := platformOutput{stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%q did not finish in 2 minutes", argv)
	case errors.As(err, &ee):
		o.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%q: %v", argv, err)
	}
	return o
}

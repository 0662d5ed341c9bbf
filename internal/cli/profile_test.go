package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// goTool returns the go command of the toolchain that runs the tests, for
// `go tool pprof`.
func goTool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		testutil.SkipOrFail(t, "no go command on PATH to run go tool pprof: %v", err)
	}
	return p
}

// pprofRaw returns `go tool pprof -raw` of the profile at path: the sample
// types and every sample with its stack, as pprof itself decodes the file.
func pprofRaw(t *testing.T, path string, args ...string) string {
	t.Helper()
	out, err := exec.Command(goTool(t), append(append([]string{"tool", "pprof"}, args...), path)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof %s: %v\n%s", path, err, out)
	}
	return string(out)
}

// --cpuprofile and --memprofile write profiles that go tool pprof reads:
// a CPU profile, and a heap profile holding the allocations of the run.
func TestReplayProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof")
	code, _, errs := run("replay", "--out", os.DevNull, "--key", "5tuple", "--cpuprofile", cpu, "--memprofile", mem, pcapPath("zipf.pcap.gz"))
	if code != ExitOK {
		t.Fatalf("replay: exit %d: %s", code, errs)
	}
	if raw := pprofRaw(t, cpu, "-raw"); !strings.Contains(raw, "PeriodType: cpu nanoseconds") {
		t.Errorf("--cpuprofile: not a CPU profile:\n%.500s", raw)
	}
	raw := pprofRaw(t, mem, "-raw")
	if !strings.Contains(raw, "alloc_space/bytes") || !strings.Contains(raw, "inuse_space/bytes") {
		t.Errorf("--memprofile: not a heap profile:\n%.500s", raw)
	}
	// The run's filters and rings, megabytes of them, are in it. The heap
	// profile samples one allocation per 512 KiB allocated on average (an
	// allocation of s bytes is missed with probability exp(-s/512KiB)), so
	// the pipeline's 5 MiB or more are all missed with probability below
	// exp(-10).
	top := pprofRaw(t, mem, "-top", "-sample_index=alloc_space", "-nodecount=1000")
	if !strings.Contains(top, "flowdedup/pipeline.") {
		t.Errorf("--memprofile: no allocation of the pipeline in it:\n%s", top)
	}
}

// A profile that cannot be written stops replay before anything is read or
// written, rather than after the work it was meant to measure.
func TestReplayProfileUnwritable(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	for _, flag := range []string{"--cpuprofile", "--memprofile"} {
		code, _, errs := run("replay", "--out", out, flag, filepath.Join(dir, "missing", "p.pprof"), pcapPath("small.pcap"))
		if code == ExitOK || !strings.Contains(errs, flag) {
			t.Errorf("%s into a missing directory: exit %d, stderr %q; want a failure naming the flag", flag, code, errs)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s failed, yet --out was created (%v)", flag, err)
		}
	}
}

// The profiling flags are in the help of both capture commands.
func TestProfileFlagsInHelp(t *testing.T) {
	for _, cmd := range []string{"replay", "run"} {
		_, stdout, _ := run(cmd, "--help")
		for _, flag := range []string{"--cpuprofile FILE", "--memprofile FILE"} {
			if !strings.Contains(stdout, flag) {
				t.Errorf("%s --help lacks %s", cmd, flag)
			}
		}
	}
}

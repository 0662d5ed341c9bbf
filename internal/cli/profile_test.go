package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// readProfile parses the profile at path with the parser go tool pprof
// itself uses (github.com/google/pprof/profile), so a file it accepts is
// one pprof reads, without building the pprof command from an empty build
// cache (20 CPU-seconds of make test's, for three reads).
func readProfile(t *testing.T, path string) *profile.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("%s: not a profile pprof reads: %v", path, err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// sampleTypes lists a profile's sample types as pprof prints them,
// "type/unit".
func sampleTypes(p *profile.Profile) []string {
	var out []string
	for _, st := range p.SampleType {
		out = append(out, st.Type+"/"+st.Unit)
	}
	return out
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
	if p := readProfile(t, cpu); p.PeriodType == nil || p.PeriodType.Type != "cpu" || p.PeriodType.Unit != "nanoseconds" {
		t.Errorf("--cpuprofile: not a CPU profile: period type %v, sample types %v", p.PeriodType, sampleTypes(p))
	}
	heap := readProfile(t, mem)
	types := sampleTypes(heap)
	alloc := slices.Index(types, "alloc_space/bytes")
	if alloc < 0 || !slices.Contains(types, "inuse_space/bytes") {
		t.Fatalf("--memprofile: not a heap profile: sample types %v", types)
	}
	// The run's filters and rings, megabytes of them, are in it. The heap
	// profile samples one allocation per 512 KiB allocated on average (an
	// allocation of s bytes is missed with probability exp(-s/512KiB)), so
	// the pipeline's 5 MiB or more are all missed with probability below
	// exp(-10).
	var pipelineBytes int64
	for _, s := range heap.Sample {
		for _, loc := range s.Location {
			if slices.ContainsFunc(loc.Line, func(l profile.Line) bool {
				return l.Function != nil && strings.Contains(l.Function.Name, "flowdedup/pipeline.")
			}) {
				pipelineBytes += s.Value[alloc]
				break
			}
		}
	}
	if pipelineBytes == 0 {
		t.Errorf("--memprofile: no allocation of the pipeline in its %d samples", len(heap.Sample))
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

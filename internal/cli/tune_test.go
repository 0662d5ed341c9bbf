package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// tuneText is what the tests read from tune's text output.
type tuneText struct {
	spec    string
	seed    uint64
	fp, fn  int
	workers int
	seeds   string // as printed: "1, 1045..., 1375..."
	ranked  int    // rows of the ranked table
}

var (
	tuneBest    = regexp.MustCompile(`(?m)^best: (\S+)$`)
	tuneExactly = regexp.MustCompile(`replay --seed (\d+) makes exactly FP (\d+), FN (\d+)`)
	tuneSetting = regexp.MustCompile(`(?m)^key \S+, window \S+, (\d+) workers, .*, seeds ([0-9, ]+)$`)
	tuneRow     = regexp.MustCompile(`(?m)^\s+\d+\s+[a-z0-9]+:mem=\S+\s`)
	tunePaste   = regexp.MustCompile(`(?m)^  paste: --filter (\S+)$`)
)

// parseTune reads the pick and its predicted errors from tune's text.
func parseTune(t *testing.T, out string) tuneText {
	t.Helper()
	best, exactly, setting, paste := tuneBest.FindStringSubmatch(out), tuneExactly.FindStringSubmatch(out), tuneSetting.FindStringSubmatch(out), tunePaste.FindStringSubmatch(out)
	if best == nil || exactly == nil || setting == nil || paste == nil || paste[1] != best[1] {
		t.Fatalf("tune's output lacks the pick, its errors, the settings or the spec to paste:\n%s", out)
	}
	var r tuneText
	r.spec = best[1]
	r.seed, _ = strconv.ParseUint(exactly[1], 10, 64)
	r.fp, _ = strconv.Atoi(exactly[2])
	r.fn, _ = strconv.Atoi(exactly[3])
	r.workers, _ = strconv.Atoi(setting[1])
	r.seeds = setting[2]
	r.ranked = len(tuneRow.FindAllString(out, -1))
	return r
}

// replayErrors replays file with spec and counts its errors against the
// exact filter's records, by key and window: a key's first packet in a
// window that made no record is a false positive, every other record of
// it a false negative. Records are matched by packet time (ts), which
// tells the first packet of a key from its repeats.
func replayErrors(t *testing.T, file, spec string, seed uint64, workers int, args ...string) (fp, fn int) {
	t.Helper()
	type kw struct{ key, window string }
	key := func(r map[string]any) kw {
		return kw{fmt.Sprint(r["src"], r["dst"], r["proto"], r["sport"], r["dport"]), fmt.Sprint(r["window"])}
	}
	common := append([]string{"--workers", strconv.Itoa(workers), "--seed", strconv.FormatUint(seed, 10), file}, args...)
	first := map[kw]string{}
	for _, r := range replayRecords(t, append([]string{"--filter", "exact"}, common...)...) {
		first[key(r)] = r["ts"].(string)
	}
	got := map[kw][]string{}
	for _, r := range replayRecords(t, append([]string{"--filter", spec}, common...)...) {
		k := key(r)
		if _, ok := first[k]; !ok {
			t.Fatalf("%s reported %v, a key the exact filter never saw in that window", spec, k)
		}
		got[k] = append(got[k], r["ts"].(string))
	}
	for k, ts := range first {
		hit := 0
		for _, g := range got[k] {
			if g == ts {
				hit = 1
			}
		}
		fp += 1 - hit
		fn += len(got[k]) - hit
	}
	return fp, fn
}

// The command prints a ranked table and a spec, and replay with
// that spec and seed makes exactly the errors tune predicted; a second,
// smaller memory makes the pick err both ways, so that the comparison is
// not only of zeros. Sample files are taken as --sample or as arguments.
// Keys by network (--prefix) too: replay with the same --prefix makes the
// errors tune predicted, and the replay command tune prints says it.
func TestTunePredictsReplay(t *testing.T) {
	t.Parallel()
	file := pcapPath("zipf.pcap.gz")
	for _, c := range []struct {
		name   string
		args   []string
		seed   uint64
		errors bool
		key    []string // replay's key flags
	}{
		{"issue", []string{"--sample", file, "--key", "5tuple", "--window", "1m", "--mem", "64KiB"}, DefaultTuneSeed, false, []string{"--key", "5tuple"}},
		{"small", []string{file, "--key", "5tuple", "--window", "1m", "--mem", "512B", "--objective", "min-fpr:fnr<=5%", "--seed", "7"}, 7, true, []string{"--key", "5tuple"}},
		{"prefix", []string{file, "--key", "pair", "--prefix", "16,48", "--window", "1m", "--mem", "128B", "--seed", "5"}, 5, true, []string{"--key", "pair", "--prefix", "16,48"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := run(append([]string{"tune"}, c.args...)...)
			if code != ExitOK {
				t.Fatalf("exit %d: %s\n%s", code, errs, out)
			}
			r := parseTune(t, out)
			if r.ranked < 2 || !strings.Contains(out, "FPR %") || !strings.Contains(out, "FNR %") {
				t.Errorf("no ranked table (%d rows):\n%s", r.ranked, out)
			}
			if r.seed != c.seed || !strings.HasPrefix(r.seeds, strconv.FormatUint(c.seed, 10)+", ") || strings.Count(r.seeds, ",") != 2 {
				t.Errorf("seeds %q, predicted for seed %d: want %d first of 3", r.seeds, r.seed, c.seed)
			}
			if c.errors && r.fp+r.fn == 0 {
				t.Fatalf("%s: no error predicted at this memory; the comparison would prove little\n%s", r.spec, out)
			}
			if want := "e.g.:  flowdedup replay " + strings.Join(c.key, " ") + " --window 1m0s"; !strings.Contains(out, want) {
				t.Errorf("tune's replay command does not start %q:\n%s", want, out)
			}
			fp, fn := replayErrors(t, file, r.spec, r.seed, r.workers, append(c.key, "--window", "1m")...)
			if fp != r.fp || fn != r.fn {
				t.Errorf("replay --filter %s --seed %d: FP %d, FN %d; tune predicted FP %d, FN %d", r.spec, r.seed, fp, fn, r.fp, r.fn)
			}
		})
	}
}

// Without --seed, tune uses the same seeds every time, and prints them.
func TestTuneReproducible(t *testing.T) {
	t.Parallel()
	plot := filepath.Join(t.TempDir(), "tune.svg")
	args := []string{"tune", "--sample", "zipf:n=20000,universe=5000,s=1.1", "--mem", "1KiB", "--workers", "1", "--format", "json"}
	type result struct {
		Seeds   []uint64
		Default struct {
			Seeds []struct{ FalsePositives, FalseNegatives int } `json:"seeds"`
		} `json:"replay_default"`
		Ranked []struct{ Spec string }
	}
	var got [2]result
	for i := range got {
		a := args
		if i == 1 {
			a = append(a, "--plot", plot)
		}
		code, out, errs := run(a...)
		if code != ExitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
		if err := json.Unmarshal([]byte(out), &got[i]); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
	}
	a, b := got[0], got[1]
	if len(a.Seeds) != 3 || a.Seeds[0] != DefaultTuneSeed || fmt.Sprint(a.Seeds) != fmt.Sprint(b.Seeds) {
		t.Errorf("seeds %v and %v: want the same three, %d first", a.Seeds, b.Seeds, DefaultTuneSeed)
	}
	if len(a.Default.Seeds) != 3 || fmt.Sprint(a.Default) != fmt.Sprint(b.Default) || len(a.Ranked) == 0 {
		t.Errorf("two runs of the same command: replay default's errors %v and %v", a.Default, b.Default)
	}
	if data, err := os.ReadFile(plot); err != nil || !strings.Contains(string(data), "<svg") {
		t.Errorf("--plot %s: %v, %.40q", plot, err, data)
	}
}

func TestTuneUsageErrors(t *testing.T) {
	withMemory(t, memoryBudget{machine: 256 << 20, machineFrom: "MemAvailable"})
	file := pcapPath("small.pcap")
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--mem", "64KiB"}, "no sample given"},
		{[]string{file}, "--mem is required"},
		{[]string{file, "--mem", "lots"}, "--mem"},
		{[]string{file, "--mem", "64KiB", "--objective", "min-fun"}, "objective"},
		{[]string{file, "--mem", "64KiB", "--objective", "min-fnr"}, "needs a bound"},
		{[]string{file, "--mem", "64KiB", "--format", "xml"}, "--format"},
		{[]string{file, "--mem", "64KiB", "--plot", "x.pdf"}, ".svg or .png"},
		{[]string{file, "--mem", "64KiB", "--workers", "0"}, "--workers"},
		{[]string{file, "--mem", "64KiB", "--workers", "100000"}, "--workers"},
		{[]string{file, "--mem", "64KiB", "--seeds", "0"}, "--seeds"},
		{[]string{file, "--mem", "64KiB", "--seeds", "1000"}, "seeds"},
		{[]string{file, "--mem", "64KiB", "--budget", "0s"}, "--budget"},
		{[]string{file, "--mem", "64KiB", "--key", "mac"}, "--key"},
		{[]string{file, "--mem", "64KiB", "--window", "1x"}, "duration"},
		{[]string{"--sample", "zipf:n=ten", "--mem", "64KiB"}, "zipf"},
		{[]string{file, "--mem", "100MiB", "--workers", "3"}, "more than the 256MiB this machine can give"},
	} {
		code, _, errs := run(append([]string{"tune"}, c.args...)...)
		if code != ExitUsage || !strings.Contains(errs, c.says) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, errs, ExitUsage, c.says)
		}
	}
	// What the command could not do is a runtime error.
	code, _, errs := run("tune", "--mem", "64KiB", "/nonexistent/x.pcap")
	if code != ExitError || !strings.Contains(errs, "/nonexistent/x.pcap") {
		t.Errorf("missing sample: exit %d, stderr %q; want %d and the path", code, errs, ExitError)
	}
	code, out, errs := run("tune", "--mem", "1KiB", "--budget", "1ns", file)
	if code != ExitError || !strings.Contains(errs, "no filter finished") || !strings.Contains(out, "cut by the budget") {
		t.Errorf("--budget 1ns: exit %d, stdout %q, stderr %q; want %d, the search and why", code, out, errs, ExitError)
	}
}

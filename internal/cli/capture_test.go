package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/record"
)

// withMemory makes the machine look like budget for the test's duration.
func withMemory(t *testing.T, budget memoryBudget) {
	t.Helper()
	saved := systemMemory
	systemMemory = func() memoryBudget { return budget }
	t.Cleanup(func() { systemMemory = saved })
}

// A spec's missing parameters take the product defaults in replay, the
// spec in effect is printed once at start, and eval keeps the papers'.
func TestReplayFilterSpecInEffect(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"qht:mem=64KiB", "filter qht:mem=64KiB,buckets=4,fpbits=12,"},
		{"qht:mem=64KiB,buckets=1,fpbits=3", "filter qht:mem=64KiB,buckets=1,fpbits=3,"},
		{"qht:fpbits=8,mem=8KiB", "filter qht:mem=8KiB,buckets=4,fpbits=8,"}, // canonical order
		{"sbf:mem=8KiB", "filter sbf:mem=8KiB,max=1,k=2,p=19,"},              // fps=0.01 is P=19
		{"exact", "filter exact,"},
	} {
		out := filepath.Join(t.TempDir(), "out.jsonl")
		code, _, errs := run("replay", "--filter", c.spec, "--workers", "1", "--out", out, pcapPath("small.pcap"))
		if code != ExitOK {
			t.Fatalf("%s: exit %d: %s", c.spec, code, errs)
		}
		if strings.Count(errs, "filter ") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("--filter %s: stderr %q, want %q once", c.spec, errs, c.want)
		}
	}
	// The summaries carry it too.
	summary := filepath.Join(t.TempDir(), "summary.jsonl")
	if code, _, errs := run("replay", "--filter", "qht:mem=64KiB", "--window", "1m", "--summary", summary, "--out", filepath.Join(t.TempDir(), "o"), pcapPath("windows.pcap")); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(data)) {
		var s struct{ Filter string }
		if err := json.Unmarshal([]byte(line), &s); err != nil || s.Filter != "qht:mem=64KiB,buckets=4,fpbits=12" {
			t.Errorf("summary %q: filter %q, %v", line, s.Filter, err)
		}
		n++
	}
	if n < 2 {
		t.Errorf("%d summaries", n)
	}
	// mem=auto is resolved to this machine's L2 cache size.
	_, _, errs := run("replay", "--workers", "1", "--out", filepath.Join(t.TempDir(), "o"), pcapPath("small.pcap"))
	if !strings.Contains(errs, "filter qht:mem=") || strings.Contains(errs, "mem=auto") || !strings.Contains(errs, "buckets=4,fpbits=12") {
		t.Errorf("default filter: stderr %q", errs)
	}
	// eval keeps the papers' defaults, so that it reproduces the papers.
	code, out, errs := run("eval", "--filter", "qht:mem=64KiB", "--stream", "distinct:n=10", "--seed", "1")
	if code != ExitOK || !strings.Contains(out, "qht:mem=64KiB,buckets=1,fpbits=3") {
		t.Errorf("eval: exit %d\n%s%s", code, out, errs)
	}
}

// The trap of issue 10: `--filter qht:mem=...` took the papers' 1 bucket
// of 3 bits and lost keys. 2000 distinct 5-tuples into 1KiB, one worker:
// the papers' setting has N = 8192/3 = 2730 rows of one 3-bit fingerprint,
// and an unseen key is lost when its row holds its fingerprint (1/7 of
// occupied rows): about sum_i (1-(1-1/N)^i)/7 = (2000 - N(1-e^(-2000/N)))/7
// = 83 lost keys (sd about 9); the product's 4 buckets of 12 bits lose
// each key with probability at most 4/4095, about 2 of 2000.
func TestReplayProductDefaultsLoseFewerKeys(t *testing.T) {
	file := pcapPath("zipf.pcap.gz")
	// The keys reported at least once: a product filter may report a key
	// again (a false negative), which is not a loss.
	distinct := func(spec string) int {
		keys := map[string]bool{}
		for _, r := range replayRecords(t, "--filter", spec, "--key", "5tuple", "--workers", "1", "--seed", "1", file) {
			keys[fmt.Sprint(r["src"], r["dst"], r["proto"], r["sport"], r["dport"])] = true
		}
		return len(keys)
	}
	all := distinct("exact")
	product, papers := all-distinct("qht:mem=1KiB"), all-distinct("qht:mem=1KiB,buckets=1,fpbits=3")
	t.Logf("of %d distinct 5-tuples, the product defaults lost %d, the papers' %d", all, product, papers)
	if all != 2000 || product > 8 || papers < 40 {
		t.Errorf("of %d distinct 5-tuples, the product defaults lost %d (want <= 8), the papers' %d (want >= 40)", all, product, papers)
	}
}

func TestCheckFootprint(t *testing.T) {
	// Sizes a 32-bit build accepts too (at most 128MiB per filter); the
	// rounded figures when they differ, exact bytes when rounding would
	// make need and limit look equal.
	machine := memoryBudget{machine: 256 << 20, machineFrom: "MemAvailable"}
	contained := memoryBudget{machine: 8 << 30, machineFrom: "MemAvailable", cgroup: 256 << 20}
	for _, c := range []struct {
		spec          string
		workers, open int
		budget        memoryBudget
		refused       string // a part of the message; "" when accepted
	}{
		{"qht:mem=50MiB", 2, 2, machine, ""}, // 200MiB
		{"qht:mem=64MiB", 2, 2, machine, "the filters need 256.1MiB (64MiB per filter x 2 workers x 2 open windows)"}, // and 4 x 16KiB of fixed parts: over
		{"qht:mem=128MiB", 64, 64, memoryBudget{}, ""},                                                                // nothing known: no check
		{"exact", 64, 64, machine, ""},                                                                                // unbounded: no check
		{"lru:mem=64MiB", 1, 1, contained, ""},                                                                        // 192MiB
		{"lru:mem=128MiB", 1, 1, contained, "384MiB"},                                                                 // 3x its mem=: an LRU holds more than it counts
		{"qht:mem=120MiB", 1, 1, contained, ""},
		{"qht:mem=100MiB", 2, 2, contained, "400.1MiB (100MiB per filter x 2 workers x 2 open windows), more than the 256MiB this machine can give (MemAvailable 8GiB in /proc/meminfo; cgroup memory limit 256MiB)"},
		{"qht:mem=100MiB", 3, 1, machine, "more than the 256MiB this machine can give (MemAvailable 256MiB in /proc/meminfo; no cgroup memory limit)"},
		{"qht:mem=128MiB", 2, 1, machine, "the filters need 268468224 bytes (128MiB per filter x 2 workers x 1 open windows), more than the 268435456 bytes"}, // 32KiB over: exact bytes
		{"qht:mem=100MiB", 1, 1, memoryBudget{cgroup: 64 << 20}, "more than the 64MiB this machine can give (cgroup memory limit 64MiB)"},
	} {
		err := checkFootprint(c.spec, c.workers, c.open, c.budget)
		var ue usageError
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s x %d x %d in %v: %v", c.spec, c.workers, c.open, c.budget, err)
		case c.refused != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%s x %d x %d in %v: %v, want a usage error with %q", c.spec, c.workers, c.open, c.budget, err, c.refused)
		}
	}
}

// A spec too big for the machine is a usage error before anything is
// allocated or opened: the capture file does not even exist.
func TestReplayRefusesFiltersTooBig(t *testing.T) {
	withMemory(t, memoryBudget{machine: 256 << 20, machineFrom: "MemAvailable"})
	code, _, errs := run("replay", "--filter", "qht:mem=100MiB", "--workers", "3", "/nonexistent.pcap")
	if code != ExitUsage || !strings.Contains(errs, "300MiB (100MiB per filter x 3 workers x 1 open windows)") ||
		!strings.Contains(errs, "MemAvailable 256MiB") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	// The open windows count: 1h windows, 5s late: 2 filters per worker.
	code, _, errs = run("replay", "--filter", "qht:mem=100MiB", "--workers", "2", "--window", "1h", "/nonexistent.pcap")
	if code != ExitUsage || !strings.Contains(errs, "x 2 workers x 2 open windows") {
		t.Errorf("windows: exit %d, stderr %q", code, errs)
	}
}

// On the real machine: 128GiB per filter in 64 open windows is more than
// any machine has (8TiB a worker), and is refused with its numbers rather
// than dying of Go's fatal out of memory.
func TestReplayRefusesFiltersTooBigForThisMachine(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("a 32-bit build takes at most 128MiB per filter: no spec it accepts is sure to exceed this machine's memory")
	}
	code, _, errs := run("replay", "--filter", "qht:mem=128GiB", "--workers", "1", "--window", "1s", "--lateness", "63s", pcapPath("small.pcap"))
	if code != ExitUsage || !strings.Contains(errs, "(128GiB per filter x 1 workers x 64 open windows)") ||
		!strings.Contains(errs, "in /proc/meminfo") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

// A cgroup's memory limit (a systemd unit's MemoryMax=, a container's) is
// read and enforced: flowdedup run in a cgroup of 64MiB refuses 80MiB of
// filters and names the limit, and takes 32MiB.
func TestReplayHonoursCgroupLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("cgroups are Linux's")
	}
	testutil.RequireRoot(t)
	dir := newMemoryCgroup(t, 64<<20)
	bin := filepath.Join(flowdedupBinary(t), "flowdedup")
	inCgroup := func(args ...string) (int, string) {
		// The shell moves itself into the cgroup, then becomes flowdedup.
		cmd := exec.Command("sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, dir, bin}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stderr.String()
	}
	out := filepath.Join(t.TempDir(), "out.jsonl")
	code, errs := inCgroup("replay", "--filter", "qht:mem=40MiB", "--workers", "2", "--out", out, pcapPath("small.pcap"))
	if code != ExitUsage || !strings.Contains(errs, "cgroup memory limit 64MiB") {
		t.Errorf("80MiB of filters in a 64MiB cgroup: exit %d, stderr %q", code, errs)
	}
	code, errs = inCgroup("replay", "--filter", "qht:mem=16MiB", "--workers", "2", "--out", out, pcapPath("small.pcap"))
	if code != ExitOK {
		t.Errorf("32MiB of filters in a 64MiB cgroup: exit %d, stderr %q", code, errs)
	}
}

// newMemoryCgroup makes a memory cgroup limited to limit bytes (v2 where
// the memory controller is there, else v1) and returns its directory; it
// is removed when the test ends.
func newMemoryCgroup(t *testing.T, limit int) string {
	t.Helper()
	name := fmt.Sprintf("flowdedup-test-%d", os.Getpid())
	dir, file := filepath.Join("/sys/fs/cgroup", name), "memory.max"
	if ctl, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err != nil || !strings.Contains(string(ctl), "memory") {
		dir, file = filepath.Join("/sys/fs/cgroup/memory", name), "memory.limit_in_bytes"
	}
	if file == "memory.max" {
		// v2: children get the memory controller only where the parent
		// delegates it (systemd does at the root; enabling it twice is a
		// no-op).
		if err := os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+memory"), 0o644); err != nil {
			testutil.SkipOrFail(t, "cannot delegate the cgroup v2 memory controller: %v", err)
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		testutil.SkipOrFail(t, "cannot make a memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		// The processes have exited; the kernel may take a moment to
		// let go of an emptied cgroup.
		deadline := time.Now().Add(5 * time.Second)
		for os.Remove(dir) != nil && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.Itoa(limit)), 0o644); err != nil {
		t.Fatalf("setting %s: %v", file, err)
	}
	return dir
}

func TestWorkersBound(t *testing.T) {
	most := maxWorkersPerCPU * runtime.NumCPU()
	code, _, errs := run("replay", "--workers", strconv.Itoa(most+1), pcapPath("small.pcap"))
	if code != ExitUsage || !strings.Contains(errs, fmt.Sprintf("more than %d per CPU (%d here)", maxWorkersPerCPU, most)) {
		t.Errorf("--workers %d: exit %d, stderr %q", most+1, code, errs)
	}
	if recs := replayRecords(t, "--workers", strconv.Itoa(most), "--filter", "exact", pcapPath("small.pcap")); len(recs) == 0 {
		t.Errorf("--workers %d: no records", most)
	}
}

// The CLI says the pipeline's bound on open windows as a usage error:
// 64 windows open is accepted, 65 refused, by the pipeline and the CLI.
func TestLatenessBoundIsThePipelines(t *testing.T) {
	sink := discard{}
	for open := pipeline.MaxOpenWindows; open <= pipeline.MaxOpenWindows+1; open++ {
		_, err := pipeline.New(pipeline.Config{Workers: 1, Filter: "exact", Key: flow.KeySrc, Window: time.Second, Lateness: time.Duration(open-1) * time.Second}, sink)
		if (err == nil) != (open <= pipeline.MaxOpenWindows) {
			t.Errorf("pipeline with %d windows open: %v", open, err)
		}
	}
	code, _, errs := run("replay", "--filter", "exact", "--window", "1s", "--lateness", "64s", pcapPath("small.pcap"))
	if code != ExitUsage || !strings.Contains(errs, "keeps 65 windows open: at most 64 (a lateness of up to 1m3s)") {
		t.Errorf("--lateness 64s: exit %d, stderr %q", code, errs)
	}
	if recs := replayRecords(t, "--filter", "exact", "--window", "1s", "--lateness", "63s", pcapPath("small.pcap")); len(recs) == 0 {
		t.Error("--lateness 63s: no records")
	}
}

// discard is a pipeline.Sink that keeps nothing.
type discard struct{}

func (discard) Record(*record.Record) error        { return nil }
func (discard) Window(*record.WindowSummary) error { return nil }
func (discard) Close() error                       { return nil }

func TestLatenessFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // on stderr; an exit 2 when it is an error
		code int
	}{
		{[]string{"--lateness", "5s"}, "--lateness needs --window", ExitUsage},
		{[]string{"--window", "1m", "--lateness", "-1s"}, "--lateness must not be negative", ExitUsage},
		{[]string{"--window", "1m"}, "window 1m0s, lateness 5s (2 windows open)", ExitOK},
		{[]string{"--window", "1s"}, "window 1s, lateness 1s (2 windows open)", ExitOK}, // the default is at most a window
		{[]string{"--window", "1s", "--lateness", "2500ms"}, "window 1s, lateness 2.5s (4 windows open)", ExitOK},
		{[]string{"--window", "1m", "--lateness", "0"}, "window 1m0s, lateness 0s (1 windows open)", ExitOK},
	} {
		args := append([]string{"replay", "--filter", "exact", "--out", filepath.Join(t.TempDir(), "o"), pcapPath("small.pcap")}, c.args...)
		code, _, errs := run(args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// writeTimedPcap writes one UDP frame per source address at the given
// times, in that order.
func writeTimedPcap(t *testing.T, path string, frames []timedFrame) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for _, fr := range frames {
		data := testutil.UDP4Frame(netip.MustParseAddr(fr.src), netip.MustParseAddr("192.0.2.1"), 1000, 53, 60)
		ci := gopacket.CaptureInfo{Timestamp: fr.at, CaptureLength: len(data), Length: len(data)}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

type timedFrame struct {
	src string
	at  time.Time
}

// A packet whose time goes back across a window boundary (interfaces
// interleaved in a capture) lands in its own window under the default
// lateness, and is late, reported in no window, without it: never in the
// wrong window.
func TestDefaultLatenessKeepsReorderedPacketsInTheirWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "reordered.pcap")
	writeTimedPcap(t, path, []timedFrame{
		{"10.0.0.1", t0.Add(1 * time.Second)},
		{"10.0.0.2", t0.Add(11 * time.Second)},
		{"10.0.0.3", t0.Add(9 * time.Second)}, // 2s back, into the window before
		{"10.0.0.4", t0.Add(30 * time.Second)},
	})
	windows := func(args ...string) map[string]string {
		got := map[string]string{}
		for _, r := range replayRecords(t, append([]string{"--filter", "exact", "--window", "10s", path}, args...)...) {
			got[r["src"].(string)] = r["window"].(string)
		}
		return got
	}
	w0, w1, w3 := t0.Format(time.RFC3339), t0.Add(10*time.Second).Format(time.RFC3339), t0.Add(30*time.Second).Format(time.RFC3339)
	want := map[string]string{"10.0.0.1": w0, "10.0.0.2": w1, "10.0.0.3": w0, "10.0.0.4": w3}
	if got := windows(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("default lateness: windows %v, want %v", got, want)
	}
	delete(want, "10.0.0.3")
	if got := windows("--lateness", "0"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("--lateness 0: windows %v, want %v (10.0.0.3 late)", got, want)
	}
}

// `flowdedup filters` lists the product default of each parameter that has
// one next to the papers'.
func TestFiltersListsProductDefaults(t *testing.T) {
	code, out, _ := run("filters")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	var family string
	found := map[string]bool{}
	for sc.Scan() {
		line := sc.Text()
		if f, _, ok := strings.Cut(line, " — "); ok && !strings.HasPrefix(line, " ") {
			family = f
			continue
		}
		fields := strings.Fields(line)
		if len(fields) >= 5 && fields[1] == "default" {
			found[family+" "+fields[0]+" "+strings.Join(fields[2:5], " ")] = true
		}
	}
	for _, want := range []string{
		"qht buckets 4 (papers: 1)", "qht fpbits 12 (papers: 3)", "cuckoo fpbits 12 (papers: 3)",
		"sqf r 12 (papers: 2)", "sbf fps 0.01 (papers: 0.1)", "fpbuffer q 0 (papers: 0.1)",
	} {
		if !found[want] {
			t.Errorf("filters output lacks %q", want)
		}
	}
	if !strings.Contains(out, "replay and run give a parameter a spec leaves out the product default") {
		t.Error("filters output does not say which commands take the product defaults")
	}
}

// Every flowdedup series carries the filter in effect as a label; the Go
// runtime's do not.
func TestMetricsCarryTheFilter(t *testing.T) {
	const spec = "qht:mem=64KiB,buckets=4,fpbits=12"
	reg := metricsRegistry(func() pipeline.Stats { return pipeline.Stats{Packets: 7} }, spec)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var ours, packets int
	for _, f := range families {
		isOurs := strings.HasPrefix(f.GetName(), "flowdedup_")
		for _, m := range f.GetMetric() {
			filter := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "filter" {
					filter = l.GetValue()
				}
			}
			if isOurs != (filter == spec) {
				t.Errorf("%s: filter label %q", f.GetName(), filter)
			}
			if f.GetName() == "flowdedup_packets_total" && m.GetCounter().GetValue() == 7 {
				packets++
			}
		}
		if isOurs {
			ours++
		}
	}
	if ours == 0 || packets != 1 {
		t.Errorf("%d flowdedup families, packets_total seen %d times with 7", ours, packets)
	}
}

// One packet of a capture stamped years ahead (a wrong clock, a corrupt
// record) is counted as late for time_jump in the window it came in. It
// opens no window of its own, so no per-window file for 2035 appears,
// and the packets after it are keyed in their windows instead of all
// being late, as they were before.
func TestReplayIgnoresOneWrongTimestamp(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	path := filepath.Join(dir, "wrongclock.pcap")
	var frames []timedFrame
	for i := range 20 {
		if i == 10 {
			frames = append(frames, timedFrame{"10.9.9.9", t0.AddDate(9, 0, 0)})
		}
		frames = append(frames, timedFrame{fmt.Sprintf("10.0.0.%d", i+1), t0.Add(time.Duration(i) * 30 * time.Second)})
	}
	writeTimedPcap(t, path, frames)
	sum := filepath.Join(dir, "summary.jsonl")
	var stderr bytes.Buffer
	code := Main(context.Background(), []string{"replay", "--filter", "exact", "--window", "1m", "-w", filepath.Join(dir, "src-%Y%m%dT%H%M.jsonl"), "--summary", sum, path}, new(bytes.Buffer), &stderr)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "src-*.jsonl"))
	if len(files) != 10 || filepath.Base(files[9]) != "src-20260101T0009.jsonl" {
		t.Errorf("per-window files %v; want the 10 minutes of 2026-01-01 00:00 to 00:09", files)
	}
	b, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"late_by":{"time_jump":1}`); n != 1 || strings.Contains(string(b), "window_closed") || !strings.Contains(stderr.String(), "late 1 (time_jump 1)") {
		t.Errorf("summaries:\n%s\nstderr: %s\nwant one packet late for time_jump and none for window_closed", b, stderr.String())
	}
	recs := 0
	for _, f := range files {
		data, _ := os.ReadFile(f)
		recs += strings.Count(string(data), "\n")
		if strings.Contains(string(data), "10.9.9.9") {
			t.Errorf("%s holds the packet of the wrong clock", f)
		}
	}
	if recs != 20 {
		t.Errorf("%d records in the files, want 20", recs)
	}
}

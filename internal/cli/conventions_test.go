package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/flowdedup/flowdedup/eval"
)

// replayLines runs replay with args (which must name the output with --out or
// -w out) and returns the sorted record lines of out.
func replayLines(t *testing.T, out string, args ...string) []string {
	t.Helper()
	code, _, errs := run(append([]string{"replay"}, args...)...)
	if code != ExitOK {
		t.Fatalf("replay %q: exit %d: %s", args, code, errs)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	sort.Strings(lines)
	return lines
}

// Flags go anywhere on the line, as --flag value, --flag=value or a short
// form, and all spellings give the same run: the issue's
// `flowdedup replay x.pcap --key dst` failed with "open --key".
func TestFlagsAnywhere(t *testing.T) {
	file := pcapPath("windows.pcap")
	dir := t.TempDir()
	out := func(name string) string { return filepath.Join(dir, name+".jsonl") }
	want := replayLines(t, out("first"), "--key", "dst", "--filter", "exact", "--window", "1m", "--out", out("first"), file)
	if len(want) < 2 {
		t.Fatalf("only %d records: the comparison would prove little", len(want))
	}
	for name, args := range map[string][]string{
		"after":      {file, "--key", "dst", "--filter", "exact", "--window", "1m", "--out", out("after")},
		"between":    {"--key", "dst", file, "--filter", "exact", "--out", out("between"), "--window", "1m"},
		"equals":     {file, "--key=dst", "--filter=exact", "--window=1m", "--out=" + out("equals")},
		"short":      {"-w", out("short"), "--key", "dst", "--filter", "exact", "--window", "1m", "-r", file},
		"shortjoin":  {"-nr", file, "-w" + out("shortjoin"), "--key", "dst", "--filter", "exact", "--window", "1m"},
		"nn":         {"-nn", "-w", out("nn"), file, "--key", "dst", "--filter", "exact", "--window", "1m"},
		"dash-dash":  {"--key", "dst", "--filter", "exact", "--window", "1m", "-w", out("dash-dash"), "--", file},
		"read-equal": {"--read=" + file, "--key", "dst", "--filter", "exact", "--window", "1m", "-w", out("read-equal")},
	} {
		t.Run(name, func(t *testing.T) {
			if got := replayLines(t, out(name), args...); !slices.Equal(got, want) {
				t.Errorf("%q: %d records differ from the flags-first run's %d", args, len(got), len(want))
			}
		})
	}
}

// After --, everything is a file, even what looks like a flag.
func TestDoubleDashEndsFlags(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(pcapPath("small.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "-w.pcap"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	out := filepath.Join(dir, "out.jsonl")
	if lines := replayLines(t, out, "--filter", "exact", "--out", out, "--", "-w.pcap"); len(lines) == 0 {
		t.Error("no records from -w.pcap")
	}
	// "--key" after -- is a file name, and there is no such file: a
	// failure to open it (exit 1), not a flag.
	code, _, errs := run("replay", "--filter", "exact", "--out", out, "--", "--key")
	if code != ExitError || !strings.Contains(errs, "--key") || !strings.Contains(errs, "no such file") {
		t.Errorf("-- --key: exit %d, stderr %q; want %d and the missing file", code, errs, ExitError)
	}
}

// Unknown flags are usage errors that name the flag, say where help is,
// and, for a long flag written with one dash as Go's flag package took
// it, say that long flags take two.
func TestUnknownFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"replay", "--bogus", "x.pcap"}, []string{"unknown flag: --bogus", "run 'flowdedup replay --help' for usage"}},
		{[]string{"replay", "x.pcap", "-x"}, []string{"unknown shorthand flag: 'x'"}},
		{[]string{"replay", "-key", "dst", "x.pcap"}, []string{"long flags take two dashes: --key"}},
		{[]string{"eval", "-filter=exact", "--stream", "distinct:n=9"}, []string{"long flags take two dashes: --filter"}},
		{[]string{"gen", "--packets"}, []string{"flag needs an argument: --packets"}},
		{[]string{"--bogus"}, []string{"unknown flag: --bogus"}},
		{[]string{"replya"}, []string{`unknown command "replya"`, "replay"}}, // with cobra's suggestion
		{[]string{"replay", "--version"}, []string{"unknown flag: --version"}},
	} {
		code, _, errs := run(c.args...)
		if code != ExitUsage {
			t.Errorf("%q: exit %d, want %d", c.args, code, ExitUsage)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%q: stderr %q lacks %q", c.args, errs, w)
			}
		}
	}
}

// Every duration flag says what a duration looks like when it does not
// parse, those bound by the capture package's flag set included.
func TestDurationErrors(t *testing.T) {
	for _, args := range [][]string{
		{"replay", "--window", "1x", "x.pcap"},
		{"replay", "--window", "1", "x.pcap"},
		{"replay", "--window", "1m", "--lateness", "soon", "x.pcap"},
		{"run", "--iface", "lo", "--window", "1x"},
		{"run", "--iface", "lo", "--poll-timeout", "fast"},
		{"run", "--iface", "lo", "--afpacket-block-timeout", "10"},
		{"gen", "--packets", "10", "--flows", "1", "-o", "-", "--duration", "1x"},
	} {
		code, _, errs := run(args...)
		if code != ExitUsage || !strings.Contains(errs, "want a duration such as 30s, 5m, 1h") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errs)
		}
	}
}

// tcpdump's short forms where flowdedup has the flag: -i, -s and -w on
// run, -r and -w on replay, -s and -o on gen.
func TestShortForms(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("run is Linux-only")
	}
	// -i is --iface: the same error for a missing interface.
	for _, iface := range [][]string{{"-i", "nosuchif0"}, {"-inosuchif0"}, {"-ni", "nosuchif0"}} {
		code, _, errs := run(append([]string{"run", "--mode", "afpacket"}, iface...)...)
		if code != ExitError || !strings.Contains(errs, `"nosuchif0"`) {
			t.Errorf("%q: exit %d, stderr %q; want %d and the interface", iface, code, errs, ExitError)
		}
	}
	// -s is --snaplen, an AF_PACKET flag: refused with --mode xdp by name.
	code, _, errs := run("run", "-i", "lo", "--mode", "xdp", "-s", "128")
	if code != ExitUsage || !strings.Contains(errs, "--snaplen applies to --mode afpacket only") {
		t.Errorf("run -s with xdp: exit %d, stderr %q", code, errs)
	}
	// gen -s is --snaplen: the same bytes.
	var long, short bytes.Buffer
	if c := Main(context.Background(), []string{"gen", "--packets", "50", "--flows", "5", "--snaplen", "70", "-o", "-"}, &long, new(bytes.Buffer)); c != ExitOK {
		t.Fatalf("gen --snaplen: exit %d", c)
	}
	if c := Main(context.Background(), []string{"gen", "--packets", "50", "--flows", "5", "-s", "70", "-o", "-"}, &short, new(bytes.Buffer)); c != ExitOK {
		t.Fatalf("gen -s: exit %d", c)
	}
	if !bytes.Equal(long.Bytes(), short.Bytes()) {
		t.Error("gen -s 70 and --snaplen 70 wrote different files")
	}
	// -r and arguments together would leave the order open.
	code, _, errs = run("replay", "-r", pcapPath("small.pcap"), pcapPath("ipv6.pcap"))
	if code != ExitUsage || !strings.Contains(errs, "not both") {
		t.Errorf("-r with an argument: exit %d, stderr %q", code, errs)
	}
}

func TestVersion(t *testing.T) {
	code, out, errs := run("--version")
	if code != ExitOK || errs != "" {
		t.Fatalf("--version: exit %d, stderr %q", code, errs)
	}
	if !strings.HasPrefix(out, "flowdedup ") || !strings.HasSuffix(out, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+"\n") ||
		strings.Count(out, "\n") != 1 {
		t.Errorf("--version printed %q", out)
	}
}

func TestFormatVersion(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.1",
		Main:      debug.Module{Path: "github.com/flowdedup/flowdedup", Version: "v0.0.0-20260102030405-0123456789ab+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	for _, c := range []struct {
		stamped  string
		commit   string
		info     *debug.BuildInfo
		platform string
		want     string
	}{
		// make's stamp wins over the go command's pseudo-version.
		{"1.2.0", "", stamped, "linux/amd64", "flowdedup 1.2.0 (commit 0123456789ab, 2026-01-02T03:04:05Z, modified) go1.26.1 linux/amd64"},
		// make's build with -buildvcs=false: both stamps.
		{"0.0.0~git20260102030405.0123456", "0123456789abcdef0123456789abcdef01234567", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}},
			"linux/mips", "flowdedup 0.0.0~git20260102030405.0123456 (commit 0123456789ab) go1.26.1 linux/mips"},
		// A plain go build in a checkout: the go command's pseudo-version.
		{"", "", stamped, "linux/amd64", "flowdedup v0.0.0-20260102030405-0123456789ab+dirty (commit 0123456789ab, 2026-01-02T03:04:05Z, modified) go1.26.1 linux/amd64"},
		// go install ...@v1.2.0: the module's tag.
		{"", "", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v1.2.0"}}, "linux/arm", "flowdedup v1.2.0 go1.26.1 linux/arm"},
		// No version anywhere: said so, not "(devel)".
		{"", "", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}},
			"linux/arm64", "flowdedup unknown version (commit abc) go1.26.1 linux/arm64"},
		{"", "", &debug.BuildInfo{GoVersion: "go1.26.1"}, "darwin/arm64", "flowdedup unknown version go1.26.1 darwin/arm64"},
	} {
		if got := formatVersion(c.stamped, c.commit, c.info, c.platform); got != c.want {
			t.Errorf("formatVersion(%q, %s): %q, want %q", c.stamped, c.info.Main.Version, got, c.want)
		}
	}
}

// Every subcommand explains itself with examples on --help, -h and
// `flowdedup help NAME`, on stdout.
func TestEveryCommandHelps(t *testing.T) {
	for _, c := range commands() {
		name := strings.Fields(c.use)[0]
		for _, args := range [][]string{{name, "--help"}, {name, "-h"}, {"help", name}} {
			code, out, errs := run(args...)
			if code != ExitOK || errs != "" || !strings.Contains(out, "Usage:\n  flowdedup "+name) ||
				(runtime.GOOS == "linux" || name != "run") && !strings.Contains(out, "Examples:\n  flowdedup "+name) {
				t.Errorf("%q: exit %d, stderr %q\n%s", args, code, errs, out)
			}
		}
	}
	// Without a command: the list of commands on stderr, exit 2.
	code, out, errs := run()
	if code != ExitUsage || out != "" || !strings.Contains(errs, "Commands:") || !strings.Contains(errs, "replay") {
		t.Errorf("no command: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// A flag's help states its default once: pflag adds "(default X)" to
// every flag whose default is not its type's zero value, so a usage text
// that says it too says it twice.
func TestHelpStatesEachDefaultOnce(t *testing.T) {
	for _, c := range commands() {
		cmd := c.cobra()
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			one := pflag.NewFlagSet("", pflag.ContinueOnError)
			one.AddFlag(f)
			if usage := one.FlagUsagesWrapped(0); strings.Count(usage, "(default") > 1 {
				t.Errorf("%s --%s states its default twice: %s", cmd.Name(), f.Name, strings.TrimSpace(usage))
			}
		})
	}
}

// eval --help names every kind of stream eval takes (those its error for
// an unknown kind lists).
func TestEvalHelpNamesEveryStream(t *testing.T) {
	_, err := eval.ParseStream("nosuch:n=1")
	_, known, ok := strings.Cut(fmt.Sprint(err), "(known: ")
	if !ok {
		t.Fatalf("ParseStream of an unknown kind: %v; want it to list the known ones", err)
	}
	kinds := strings.Split(strings.TrimSuffix(known, ")"), ", ")
	code, out, errs := run("eval", "--help")
	if code != ExitOK {
		t.Fatalf("eval --help: exit %d: %s", code, errs)
	}
	for _, k := range kinds {
		if !strings.Contains(out, k+":") {
			t.Errorf("eval --help does not name the stream kind %s:", k)
		}
	}
	if len(kinds) < 5 {
		t.Errorf("known stream kinds %q: want at least distinct, uniform, zipf, file, pcap", kinds)
	}
}

// --help leads with what a reader looks for: the one-line summary, the
// usage and the examples, then the flags, and says where the long
// description is; `flowdedup help NAME` (the man page's text) has it, then
// the same usage. The replay --help had 40 lines of prose before
// its usage and the examples last.
func TestHelpLeadsWithUsageAndExamples(t *testing.T) {
	for _, c := range commands() {
		name := strings.Fields(c.use)[0]
		cmd := c.cobra()
		if !cmd.HasExample() { // run on a platform without live capture
			continue
		}
		_, brief, _ := run(name, "--help")
		lines := strings.Split(brief, "\n")
		if want := "flowdedup " + name + ": " + c.short; lines[0] != want || lines[1] != "" || lines[2] != "Usage:" {
			t.Errorf("%s --help begins %q, want %q, a blank line, Usage:", name, lines[:min(3, len(lines))], want)
		}
		usage, examples, flags := strings.Index(brief, "\nUsage:\n"), strings.Index(brief, "\nExamples:\n"), strings.Index(brief, "\nFlags:\n")
		if usage < 0 || examples < usage || flags < examples {
			t.Errorf("%s --help: Usage at %d, Examples at %d, Flags at %d: want them in that order", name, usage, examples, flags)
		}
		first, _, _ := strings.Cut(strings.TrimSpace(c.long), "\n")
		if strings.Contains(brief, first) {
			t.Errorf("%s --help has the long description (%q)", name, first)
		}
		if pointer := "The full description: 'flowdedup help " + name + "' or 'man flowdedup-" + name + "'.\n"; !strings.HasSuffix(brief, pointer) {
			t.Errorf("%s --help does not end with %q:\n%s", name, pointer, brief)
		}
		code, full, errs := run("help", name)
		if code != ExitOK || errs != "" {
			t.Errorf("help %s: exit %d, stderr %q", name, code, errs)
		}
		long := strings.Index(full, first)
		if long < 0 || !strings.Contains(full[long:], "\nUsage:\n  flowdedup "+name) || !strings.Contains(full, "\nExamples:\n") {
			t.Errorf("help %s lacks its description, then its usage and examples:\n%s", name, full)
		}
	}
	// The root and completion's commands have no examples: their
	// description leads, as before.
	if _, out, _ := run("--help"); !strings.HasPrefix(out, "flowdedup: a packet-rate network flow deduplicator") || !strings.Contains(out, "(collect)") {
		t.Errorf("flowdedup --help:\n%s", out)
	}
	if _, out, _ := run("completion", "bash", "--help"); !strings.Contains(out, "source <(flowdedup completion bash)") {
		t.Errorf("completion bash --help lacks how to load it:\n%s", out)
	}
	if code, _, errs := run("help", "nosuch"); code != ExitUsage || !strings.Contains(errs, `flowdedup help: no command "nosuch"`) {
		t.Errorf("help nosuch: exit %d, stderr %q", code, errs)
	}
	if got := completions(t, "help", "re"); !slices.Equal(got, []string{"replay"}) {
		t.Errorf("__complete help re = %q, want replay", got)
	}
}

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/flowdedup/flowdedup/filters"
)

func run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestEvalText(t *testing.T) {
	code, out, errs := run("eval", "--filter", "lru:entries=100", "--filter", "exact",
		"--stream", "uniform:n=10000,universe=1000", "--seed", "1")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	// Rates in percent, as tune's: LRU's 8018 false negatives of 9000
	// duplicates are 89.0889%.
	for _, want := range []string{"FPR %", "FNR %", "lru:entries=100", "exact", "seed 1", " 8018 ", " 89.0889 "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestEvalJSONSeedReproducible(t *testing.T) {
	args := []string{"eval", "--filter", "lru:entries=100", "--stream", "zipf:n=5000,universe=1000,s=1", "--seed", "7", "--format", "json", "--runs", "2"}
	_, a, _ := run(args...)
	_, b, _ := run(args...)
	var ra, rb map[string]any
	if err := json.Unmarshal([]byte(a), &ra); err != nil {
		t.Fatalf("%v: %q", err, a)
	}
	json.Unmarshal([]byte(b), &rb)
	if ra["fnr"] != rb["fnr"] || ra["distinct"] != rb["distinct"] || ra["seed"] != 7.0 || ra["runs"] != 2.0 {
		t.Errorf("same seed, different results:\n%s%s", a, b)
	}
}

func TestEvalRandomSeedPrinted(t *testing.T) {
	_, a, _ := run("eval", "--filter", "exact", "--stream", "distinct:n=10")
	_, b, _ := run("eval", "--filter", "exact", "--stream", "distinct:n=10")
	if a == b {
		t.Error("without --seed, two runs should use different (printed) seeds")
	}
}

func TestUsageErrors(t *testing.T) {
	cases := [][]string{
		{},
		{"nosuch"},
		{"eval"},
		{"eval", "--filter", "exact"},
		{"eval", "--stream", "distinct:n=10"},
		{"eval", "--filter", "nosuch", "--stream", "distinct:n=10"},
		{"eval", "--filter", "lru:mem=1bit", "--stream", "distinct:n=10"},
		{"eval", "--filter", "exact", "--stream", "distinct:n=ten"},
		{"eval", "--filter", "exact", "--stream", "distinct:n=10", "--format", "xml"},
		{"eval", "--filter", "exact", "--stream", "distinct:n=10", "--seed", "-1"},
		{"eval", "--filter", "exact", "--stream", "distinct:n=10", "--bogus"},
		{"eval", "--filter", "exact", "--stream", "distinct:n=10", "stray"},
		{"eval", "--filter", "exact", "--stream", "pcap:x.pcap,key=mac"},
		{"replay"},
		{"replay", "--key", "mac", "x.pcap"},
		{"replay", "--filter", "nosuch", "x.pcap"},
		{"replay", "--workers", "0", "x.pcap"},
		{"replay", "--format", "xml", "x.pcap"},
		{"replay", "--window", "1x", "x.pcap"},
		{"replay", "--lateness", "5s", "x.pcap"},
		{"replay", "--workers", "100000", "x.pcap"},
		{"replay", "--filter", "qht:mem=128GiB", "--window", "1s", "--lateness", "63s", "x.pcap"},
		{"replay", "x.pcap", "--bogus"},
		{"run"},
		{"run", "--iface", "lo", "--mode", "teleport"},
		{"run", "--iface", "lo", "--mode", "xdp", "--bpf", "tcp"},
		{"run", "--iface", "lo", "--mode", "xdp", "--xdp-ring", "3MiB"},
		{"run", "--iface", "lo", "--mode", "xdp", "--xdp-prefilter", "lots"},
		{"run", "--iface", "lo", "--mode", "afpacket", "--afxdp-queues", "0"},
		{"run", "--iface", "lo", "--mode", "afxdp", "--afxdp-queues", "x"},
		{"run", "--iface", "lo", "--mode", "afxdp", "--xdp-attach", "fast"},
		{"filters", "extra"},
	}
	for _, args := range cases {
		code, _, errs := run(args...)
		if code != ExitUsage {
			t.Errorf("%q: exit %d, want %d (usage)", args, code, ExitUsage)
		}
		if errs == "" {
			t.Errorf("%q: no message on stderr", args)
		}
	}
}

func TestRuntimeErrorExitCode(t *testing.T) {
	code, _, errs := run("eval", "--filter", "exact", "--stream", "file:/nonexistent/keys.txt")
	if code != ExitError || !strings.Contains(errs, "nonexistent") {
		t.Errorf("exit %d, stderr %q; want %d and the path", code, errs, ExitError)
	}
}

func TestRunMissingInterface(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("live capture is Linux-only")
	}
	for _, mode := range []string{"xdp", "afxdp", "afpacket", "auto"} {
		code, _, errs := run("run", "--iface", "nosuchif0", "--mode", mode)
		if code != ExitError || !strings.Contains(errs, `"nosuchif0"`) {
			t.Errorf("--mode %s: exit %d, stderr %q; want %d and the interface", mode, code, errs, ExitError)
		}
	}
}

func TestHelp(t *testing.T) {
	if code, out, _ := run("help"); code != ExitOK || !strings.Contains(out, "eval") {
		t.Errorf("help: exit %d\n%s", code, out)
	}
	// Help that was asked for goes to stdout (so that it pages: `flowdedup
	// eval --help | less`), as with kubectl and gh; Go's flag package sent
	// it to stderr.
	code, out, errs := run("eval", "--help")
	if code != ExitOK || !strings.Contains(out, "--stream") && !strings.Contains(out, "-stream") || !strings.Contains(out, "Examples") || errs != "" {
		t.Errorf("eval --help: exit %d\n%s\nstderr: %s", code, out, errs)
	}
}

func TestFiltersListsEveryFamily(t *testing.T) {
	code, out, _ := run("filters")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	for _, name := range filters.Names() {
		if !strings.Contains(out, "\n"+name+" ") {
			t.Errorf("filters output lacks %q", name)
		}
	}
}

// An error names the command once: packages start their errors with their
// name ("collect: bad listen URL"), and a command of the same name printed
// "flowdedup collect: collect: bad listen URL". Each case gives the lines
// stderr ends with, exactly.
func TestErrorsNameTheCommandOnce(t *testing.T) {
	type errCase struct {
		args []string
		code int
		want []string
	}
	cases := []errCase{
		{[]string{"collect", "--listen", "bogus://x"}, ExitUsage, []string{
			`flowdedup collect: bad listen URL "bogus://x": want netflow://HOST:PORT (NetFlow v5, v9 and IPFIX over UDP), ipfix+tcp://HOST:PORT or sflow://HOST:PORT`,
			`run 'flowdedup collect --help' for usage`}},
		{[]string{"collect", "--listen", "netflow://127.0.0.1:1", "--key", "mac"}, ExitUsage, []string{
			`flowdedup collect: invalid argument "mac" for "--key" flag: flow: invalid key kind "mac": valid kinds are src, dst, pair, 5tuple`,
			`run 'flowdedup collect --help' for usage`}},
		{[]string{"eval", "--filter", "exact", "--stream", "distinct:n=10", "--warmup", "-1"}, ExitError, []string{
			`flowdedup eval: warmup must not be negative`}},
		{[]string{"eval", "--filter", "exact", "--stream", "distinct:n=10", "--mem", ","}, ExitUsage, []string{
			`flowdedup eval: --mem: mem list ",": bad parameter value: empty size`,
			`run 'flowdedup eval --help' for usage`}},
		{[]string{"eval", "--filter", "exact", "--stream", "file:/nonexistent/keys"}, ExitError, []string{
			`flowdedup eval: stream file:/nonexistent/keys: open /nonexistent/keys: no such file or directory`}},
		{[]string{"tune", "--mem", "1KiB", "--objective", "bogus", "x.pcap"}, ExitUsage, []string{
			`flowdedup tune: invalid argument "bogus" for "--objective" flag: objective "bogus": bad objective: want min-errors, min-fnr:fpr<=X or min-fpr:fnr<=X`,
			`run 'flowdedup tune --help' for usage`}},
		{[]string{"tune", "--mem", "1KiB", "--workers", "1", "/nonexistent/x.pcap"}, ExitError, []string{
			`flowdedup tune: sample /nonexistent/x.pcap: capture: /nonexistent/x.pcap: open: no such file or directory`}},
		{[]string{"merge", "/nonexistent/summary.jsonl"}, ExitError, []string{
			`flowdedup merge: open /nonexistent/summary.jsonl: no such file or directory`}},
		{[]string{"merge", "--by", "x", "y"}, ExitUsage, []string{
			`flowdedup merge: invalid argument "x" for "--by" flag: want a duration such as 30s, 5m, 1h (units ns, us, ms, s, m, h)`,
			`run 'flowdedup merge --help' for usage`}},
		{[]string{"gen", "--packets", "10", "--flows", "20", "-o", "-"}, ExitUsage, []string{
			`flowdedup gen: flows 20 exceed the 10 well-formed packets (10 packets, 0 malformed): every flow needs one`,
			`run 'flowdedup gen --help' for usage`}},
		{[]string{"replay", "/nonexistent/x.pcap"}, ExitError, []string{
			`flowdedup replay: capture: /nonexistent/x.pcap: open: no such file or directory`}},
		{[]string{"replay", "--key", "nope", "x.pcap"}, ExitUsage, []string{
			`flowdedup replay: invalid argument "nope" for "--key" flag: flow: invalid key kind "nope": valid kinds are src, dst, pair, 5tuple`,
			`run 'flowdedup replay --help' for usage`}},
	}
	if runtime.GOOS == "linux" {
		cases = append(cases, errCase{[]string{"run"}, ExitUsage, []string{
			`flowdedup run: --iface is required`, `run 'flowdedup run --help' for usage`}})
	}
	for _, c := range cases {
		code, _, errs := run(c.args...)
		lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
		if code != c.code || len(lines) < len(c.want) || !slices.Equal(lines[len(lines)-len(c.want):], c.want) {
			t.Errorf("%q: exit %d, stderr\n%s\nwant exit %d, ending\n%s", c.args, code, errs, c.code, strings.Join(c.want, "\n"))
		}
		for _, line := range lines {
			if name := c.args[0]; strings.Count(line, name+": ") > 1 {
				t.Errorf("%q: %q names %s twice", c.args, line, name)
			}
		}
	}
}

// errorText drops the command's name where a package of that name put it,
// and only there.
func TestErrorText(t *testing.T) {
	collect := &cobra.Command{Use: "collect"}
	for _, c := range []struct{ err, want string }{
		{"collect: bad listen URL", "bad listen URL"},
		{"collect: collect: twice", "twice"},
		{"listen on netflow://x: collect: busy", "listen on netflow://x: busy"},
		{`invalid argument "x" for "--listen" flag: collect: bad listen URL`, `invalid argument "x" for "--listen" flag: bad listen URL`},
		{"collector: not the command", "collector: not the command"},
		{"capture: x.pcap: open", "capture: x.pcap: open"},
		{"collect: ", "collect: "}, // nothing would be left
	} {
		if got := errorText(collect, errors.New(c.err)); got != c.want {
			t.Errorf("errorText(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}

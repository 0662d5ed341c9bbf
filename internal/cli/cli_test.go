package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

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
	for _, want := range []string{"FPR", "FNR", "lru:entries=100", "exact", "seed 1"} {
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

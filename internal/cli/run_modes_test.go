//go:build linux && !(mips || mips64 || ppc64 || s390x)

package cli

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The run flags of each mode are in the mode table, and every flag the
// table names exists: a renamed flag cannot leave a mode check behind.
func TestLiveModeTable(t *testing.T) {
	cmd := runCommand().cobra()
	for _, m := range liveModes {
		for _, g := range m.takes {
			for _, name := range *g {
				if cmd.Flags().Lookup(name) == nil {
					t.Errorf("mode %s takes --%s, which run does not have", m.name, name)
				}
			}
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "xdp", "--bpf", "tcp"}, "--bpf applies to --mode afpacket only"},
		{[]string{"--mode", "afxdp", "--snaplen", "100"}, "--snaplen applies to --mode afpacket only"},
		{[]string{"--mode", "afpacket", "--afxdp-queues", "0"}, "--afxdp-queues applies to --mode afxdp only"},
		{[]string{"--mode", "auto", "--afxdp-frames", "64"}, "--afxdp-frames applies to --mode afxdp only"},
		{[]string{"--mode", "afpacket", "--xdp-ring", "4MiB"}, "--xdp-ring applies to --mode xdp only"},
		{[]string{"--mode", "afpacket", "--xdp-attach", "native"}, "--xdp-attach applies to --mode xdp or afxdp only"},
		{[]string{"--mode", "teleport"}, `--mode "teleport": want xdp, afxdp, afpacket or auto`},
		{[]string{"--mode", "afpacket", "stray"}, `unexpected argument "stray"`},
	} {
		code, _, errs := run(append([]string{"run", "-i", "lo"}, c.args...)...)
		if code != ExitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %q", c.args, code, errs, c.want)
		}
	}
}

// run's modes and interfaces complete (run is built where live capture is).
func TestRunCompletion(t *testing.T) {
	if got := completions(t, "run", "--mode", ""); !slices.Equal(got, liveModeNames()) {
		t.Errorf("run --mode completes to %q, want %q", got, liveModeNames())
	}
	if got := completions(t, "run", "-i", "l"); !slices.Contains(got, "lo") {
		t.Errorf("run -i l completes to %q, want lo among them", got)
	}
}

// run's full help (flowdedup help run, its man page) names every
// capability the systemd unit grants for live capture
// (deploy/flowdedup.service: exactly what the modes need), so that an
// operator who runs it without root learns them all from help.
func TestRunHelpNamesTheUnitsCapabilities(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/flowdedup.service")
	if err != nil {
		t.Fatal(err)
	}
	var caps []string
	for line := range strings.Lines(string(unit)) {
		if v, ok := strings.CutPrefix(line, "AmbientCapabilities="); ok {
			caps = strings.Fields(v)
		}
	}
	if len(caps) == 0 {
		t.Fatal("deploy/flowdedup.service has no AmbientCapabilities= line")
	}
	code, out, errs := run("help", "run")
	if code != ExitOK {
		t.Fatalf("flowdedup help run: exit %d: %s", code, errs)
	}
	for _, c := range caps {
		if !strings.Contains(out, c) {
			t.Errorf("flowdedup help run does not name %s, which the unit grants", c)
		}
	}
}

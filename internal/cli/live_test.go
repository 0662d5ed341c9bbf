//go:build linux && !(mips || mips64 || ppc64 || s390x)

package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/netns"
)

// buildBinary returns the path of flowdedup built for the tests that run
// it as a process (signals must reach a real process): the one build of
// flowdedupBinary.
func buildBinary(t *testing.T) string {
	t.Helper()
	return filepath.Join(flowdedupBinary(t), "flowdedup")
}

// liveNamespace returns the network namespace of a live capture test,
// with its veth pair, after checking what such a test needs: not -short,
// root, tcpreplay, and a named namespace `ip netns exec` can enter.
func liveNamespace(t *testing.T) *netns.Namespace {
	t.Helper()
	if testing.Short() {
		t.Skip("live capture test: skipped in -short mode")
	}
	if _, err := exec.LookPath("tcpreplay"); err != nil {
		testutil.SkipOrFail(t, "tcpreplay not installed (Debian package tcpreplay; .ci/run installs it)")
	}
	ns := netns.NetNS(t)
	if ns.Name == "" {
		testutil.SkipOrFail(t, "the test namespace has no name, so `ip netns exec` cannot enter it")
	}
	return ns
}

// sendInto sends file into the namespace's far veth end with tcpreplay at
// 100 Mbps. The sender is pinned to one CPU: a veth delivers a frame on
// the CPU that sent it, and the XDP prefilter is per CPU, so a sender that
// migrated would make the kernel hand a key to user space once per CPU,
// and prefiltered + distinct = keys would hold only by luck.
func sendInto(t *testing.T, ns *netns.Namespace, file string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns.Name, "taskset", "-c", "0", "tcpreplay", "-q", "-i", ns.Veth[1], "--mbps", "100", file)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tcpreplay: %v\n%s", err, b)
	}
}

// waitLines waits, up to a minute (a bound only a loaded machine nears),
// until path holds n complete lines: records reach the file as soon as
// the workers go idle. The test's checks afterwards judge what came.
func waitLines(path string, n int) {
	testutil.WaitUntil(time.Minute, func() bool { return lineCount(path) >= n })
}

// Live capture end to end, in every mode: `flowdedup run --mode M` on one
// end of a veth pair in a namespace the test makes, a testdata capture sent
// into the other end with tcpreplay, then SIGINT. The distinct keys reported
// equal those of an exact replay of the same file, SIGINT closes and writes
// the last window, every frame is counted and none dropped, and nothing is
// left attached to the interface.
func TestRunLiveMatchesReplay(t *testing.T) {
	t.Parallel()
	ns := liveNamespace(t)
	bin := buildBinary(t)
	for _, mode := range []string{"afpacket", "xdp", "afxdp"} {
		for _, name := range []string{"small.pcap", "ipv6.pcap", "vlan.pcap"} {
			t.Run(mode+"/"+name, func(t *testing.T) {
				file := pcapPath(name)
				want := map[string]bool{}
				for _, r := range replayRecords(t, "--filter", "exact", "--key", "pair", file) {
					want[r["src"].(string)+" > "+r["dst"].(string)] = true
				}
				lr := startLive(t, ns, bin, "--mode", mode, "--key", "pair", "--filter", "exact", "--workers", "2", "--window", "1h")
				if mode != "afpacket" && !xdpAttached(t, ns) {
					t.Errorf("no XDP program on %s while running\n%s", ns.Veth[0], lr.Log())
				}
				sendInto(t, ns, file) // pinned to one CPU: see sendInto
				waitLines(lr.out, len(want))
				lr.stop(t, syscall.SIGINT)

				got := map[string]bool{}
				data, _ := os.ReadFile(lr.out)
				for line := range strings.Lines(string(data)) {
					var r map[string]any
					if err := json.Unmarshal([]byte(line), &r); err != nil {
						t.Fatalf("record %q: %v", line, err)
					}
					got[r["src"].(string)+" > "+r["dst"].(string)] = true
				}
				if d := setDiff(got, want); d != "" || len(got) != len(want) {
					t.Errorf("live capture and exact replay disagree (%d vs %d pairs):\n%s\n%s", len(got), len(want), d, lr.Log())
				}
				// SIGINT closed the last (only) window and wrote its summary.
				s := lr.lastSummary(t)
				if !s.Final || s.Packets != 2000 || s.Distinct != uint64(len(want)) || s.Dropped != 0 {
					t.Errorf("last summary %+v: want final, 2000 packets, %d distinct, 0 dropped\n%s", s, len(want), lr.Log())
				}
				if s.Packets != s.Malformed+s.Skipped+s.Keys+s.Dropped {
					t.Errorf("last summary %+v: packets != malformed + skipped + keys + dropped", s)
				}
				if mode == "xdp" && (s.Prefiltered == 0 || s.Prefiltered+s.Distinct != s.Keys) {
					// Every capture repeats its pairs, so the kernel
					// must have kept some of them from user space.
					t.Errorf("last summary %+v: want prefiltered > 0 and prefiltered + distinct = keys (exact filter)", s)
				}
				if xdpAttached(t, ns) {
					t.Errorf("an XDP program is still attached to %s after SIGINT", ns.Veth[0])
				}
			})
		}
	}
}

// After SIGKILL, which gives the process no chance to clean up, the kernel
// still detaches the XDP program: it hangs on a BPF link owned by the
// process.
func TestRunXDPKilledLeavesNoProgram(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("live capture test: skipped in -short mode")
	}
	ns := netns.NetNS(t)
	if ns.Name == "" {
		testutil.SkipOrFail(t, "the test namespace has no name, so `ip netns exec` cannot enter it")
	}
	bin := buildBinary(t)
	for _, mode := range []string{"xdp", "afxdp"} {
		t.Run(mode, func(t *testing.T) {
			lr := startLive(t, ns, bin, "--mode", mode, "--key", "src")
			if !xdpAttached(t, ns) {
				t.Fatalf("no XDP program on %s while running\n%s", ns.Veth[0], lr.Log())
			}
			lr.stop(t, syscall.SIGKILL)
			testutil.WaitFor(t, "the XDP program to leave "+ns.Veth[0]+" after SIGKILL", time.Minute, func() bool { return !xdpAttached(t, ns) })
		})
	}
}

// xdpAttached reports whether an XDP program is attached to the first veth
// end of ns.
func xdpAttached(t *testing.T, ns *netns.Namespace) bool {
	t.Helper()
	x := ns.Link(t, ns.Veth[0]).Attrs().Xdp
	return x != nil && (x.Attached || x.ProgId != 0)
}

// liveRun is a `flowdedup run` process inside a test namespace.
type liveRun struct {
	*testutil.Process
	out     string
	summary string
}

// startLive starts `flowdedup run` on the first veth end of ns with args,
// writing records and summaries to temporary files, and returns once it
// says it is capturing.
func startLive(t *testing.T, ns *netns.Namespace, bin string, args ...string) *liveRun {
	t.Helper()
	dir := t.TempDir()
	lr := &liveRun{out: filepath.Join(dir, "out.jsonl"), summary: filepath.Join(dir, "summary.jsonl")}
	args = append([]string{"netns", "exec", ns.Name, bin, "run", "--iface", ns.Veth[0], "--out", lr.out, "--summary", lr.summary}, args...)
	lr.Process = testutil.StartProcess(t, exec.Command("ip", args...), "capturing on", time.Minute)
	return lr
}

// stop sends sig and waits for the process; after SIGINT it must exit 0.
func (lr *liveRun) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := lr.Stop(t, sig, time.Minute); err != nil && sig == syscall.SIGINT {
		t.Fatalf("run exited with %v after SIGINT\n%s", err, lr.Log())
	}
}

// liveSummary is the part of a summary line the live tests check.
type liveSummary struct {
	Packets, Malformed, Skipped, Keys, Prefiltered, Distinct, Dropped uint64
	DroppedBy                                                         map[string]uint64 `json:"dropped_by"`
	Final                                                             bool
}

// lastSummary returns the last window summary the run wrote.
func (lr *liveRun) lastSummary(t *testing.T) liveSummary {
	t.Helper()
	var s liveSummary
	sum, _ := os.ReadFile(lr.summary)
	lines := strings.Split(strings.TrimSpace(string(sum)), "\n")
	if len(lines) > 1 && strings.HasPrefix(lines[len(lines)-1], `{"run_totals":`) {
		lines = lines[:len(lines)-1] // a run with exports ends with its totals
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("summary %q: %v\n%s", sum, err, lr.Log())
	}
	return s
}

//go:build linux

package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// buildBinary compiles flowdedup once for the tests that run it as a
// process (signals must reach a real process).
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "flowdedup")
	cmd := exec.Command("go", "build", "-o", bin, "../../cmd/flowdedup")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// lineCount counts the complete lines of path (0 when it does not exist).
func lineCount(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}

// Live capture end to end: `flowdedup run --mode afpacket` on one end of a
// veth pair in a namespace the test makes, a testdata capture sent into the
// other end with tcpreplay, then SIGINT. The distinct keys reported equal
// those of an exact replay of the same file, and SIGINT closes and writes
// the last window.
func TestRunAFPacketMatchesReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("live capture test: skipped in -short mode")
	}
	if _, err := exec.LookPath("tcpreplay"); err != nil {
		testutil.SkipOrFail(t, "tcpreplay not installed (Debian package tcpreplay; .ci/run installs it)")
	}
	ns := testutil.NetNS(t)
	if ns.Name == "" {
		testutil.SkipOrFail(t, "the test namespace has no name, so `ip netns exec` cannot enter it")
	}
	bin := buildBinary(t)
	for _, name := range []string{"small.pcap", "ipv6.pcap", "vlan.pcap"} {
		t.Run(name, func(t *testing.T) {
			file := pcapPath(name)
			want := map[string]bool{}
			for _, r := range replayRecords(t, "--filter", "exact", "--key", "pair", file) {
				want[r["src"].(string)+" > "+r["dst"].(string)] = true
			}

			dir := t.TempDir()
			out, summary := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "summary.jsonl")
			cmd := exec.Command("ip", "netns", "exec", ns.Name, bin, "run", "--mode", "afpacket",
				"--iface", ns.Veth[0], "--key", "pair", "--filter", "exact", "--workers", "2",
				"--window", "1h", "--out", out, "--summary", summary)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			// The run says it is capturing once its sockets are open and bound.
			sc := bufio.NewScanner(stderr)
			var log strings.Builder
			for sc.Scan() {
				log.WriteString(sc.Text() + "\n")
				if strings.Contains(sc.Text(), "capturing on") {
					break
				}
			}
			go func() {
				for sc.Scan() {
					log.WriteString(sc.Text() + "\n")
				}
			}()

			send := exec.Command("ip", "netns", "exec", ns.Name, "tcpreplay", "-q", "-i", ns.Veth[1], "--mbps", "100", file)
			if b, err := send.CombinedOutput(); err != nil {
				t.Fatalf("tcpreplay: %v\n%s", err, b)
			}
			// Records reach the file as soon as the workers go idle.
			deadline := time.Now().Add(10 * time.Second)
			for lineCount(out) < len(want) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("run exited with %v after SIGINT\n%s", err, log.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("run did not exit within 10 s of SIGINT\n%s", log.String())
			}

			got := map[string]bool{}
			data, _ := os.ReadFile(out)
			for line := range strings.Lines(string(data)) {
				var r map[string]any
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("record %q: %v", line, err)
				}
				got[r["src"].(string)+" > "+r["dst"].(string)] = true
			}
			if d := setDiff(got, want); d != "" || len(got) != len(want) {
				t.Errorf("live capture and exact replay disagree (%d vs %d pairs):\n%s\n%s", len(got), len(want), d, log.String())
			}
			// SIGINT closed the last (only) window and wrote its summary.
			var s struct {
				Packets, Keys, Distinct, Dropped uint64
				Final                            bool
			}
			sum, _ := os.ReadFile(summary)
			lines := strings.Split(strings.TrimSpace(string(sum)), "\n")
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
				t.Fatalf("summary %q: %v", sum, err)
			}
			if !s.Final || s.Packets != 2000 || s.Distinct != uint64(len(want)) || s.Dropped != 0 {
				t.Errorf("last summary %+v: want final, 2000 packets, %d distinct, 0 dropped", s, len(want))
			}
		})
	}
}

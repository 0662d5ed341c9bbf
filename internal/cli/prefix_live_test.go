//go:build linux && !(mips || mips64 || ppc64 || s390x)

package cli

import (
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
)

// Live capture by network, in every mode: `flowdedup run --prefix 24,64`
// in a test namespace, a capture sent into it, reports the networks an
// exact replay with the same --prefix reports. With --mode xdp the program
// masks in the kernel, so its prefilter sees networks: user space is
// handed each network once (prefiltered + distinct = keys with the exact
// filter), not each host.
func TestRunLivePrefix(t *testing.T) {
	ns := liveNamespace(t)
	bin := buildBinary(t)
	for _, mode := range []string{"afpacket", "xdp", "afxdp"} {
		for _, name := range []string{"small.pcap", "ipv6.pcap"} {
			t.Run(mode+"/"+name, func(t *testing.T) {
				file := pcapPath(name)
				want := map[string]bool{}
				for _, r := range replayRecords(t, "--filter", "exact", "--key", "src", "--prefix", "24,64", file) {
					want[r["src"].(string)] = true
				}
				hosts := len(replayRecords(t, "--filter", "exact", "--key", "src", file))
				if hosts <= len(want) {
					t.Fatalf("%s: %d hosts in %d networks: the test would not tell networks from hosts", name, hosts, len(want))
				}
				lr := startLive(t, ns, bin, "--mode", mode, "--key", "src", "--prefix", "24,64", "--filter", "exact", "--workers", "2", "--window", "1h")
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
					got[r["src"].(string)] = true
				}
				if d := setDiff(got, want); d != "" || len(got) != len(want) {
					t.Errorf("live capture and exact replay --prefix 24,64 disagree (%d vs %d networks):\n%s\n%s", len(got), len(want), d, lr.Log())
				}
				s := lr.lastSummary(t)
				if !s.Final || s.Packets != 2000 || s.Distinct != uint64(len(want)) || s.Dropped != 0 {
					t.Errorf("last summary %+v: want final, 2000 packets, %d distinct, 0 dropped\n%s", s, len(want), lr.Log())
				}
				if mode == "xdp" && s.Prefiltered+s.Distinct != s.Keys {
					t.Errorf("last summary %+v: prefiltered + distinct != keys: the kernel handed user space hosts, not networks", s)
				}
			})
		}
	}
}

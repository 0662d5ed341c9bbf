//go:build linux && !(mips || mips64 || ppc64 || s390x)

package cli

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/collect/collecttest"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// Live capture by network, in every mode: `flowdedup run --prefix 24,64`
// in a test namespace, a capture sent into it, reports the networks an
// exact replay with the same --prefix reports. With --mode xdp the program
// masks in the kernel, so its prefilter sees networks: user space is
// handed each network once (prefiltered + distinct = keys with the exact
// filter), not each host.
func TestRunLivePrefix(t *testing.T) {
	t.Parallel()
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

// collect --prefix keys the exporters' records by network: the records of
// NetFlow v9 and IPFIX flows from many hosts of 10.0.0.0/16 and
// 2001:db8::/48 are their /24s and /64s, once each, and the summary says
// key src/24,64.
func TestCollectPrefix(t *testing.T) {
	t.Parallel()
	for _, version := range []int{9, 10} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			dir := t.TempDir()
			out, sum := filepath.Join(dir, "networks.jsonl"), filepath.Join(dir, "summary.jsonl")
			c := startCollect(t, "--key", "src", "--prefix", "24,64", "--filter", "exact", "--window", "1h", "--out", out, "--summary", sum)
			end := midHour(time.Now())
			e := &collecttest.Exporter{Version: version, Boot: end.Add(-time.Hour), Domain: 3}
			flows := collecttest.Flows(500, 2, end)
			want := map[string]bool{}
			for _, f := range flows {
				bits := 24
				if f.Src.Is6() {
					bits = 64
				}
				want[netip.PrefixFrom(f.Src, bits).Masked().String()] = true
			}
			c.send(t, e, flows)
			testutil.WaitFor(t, "the networks in --out", time.Minute, func() bool { return len(lines(t, out)) >= len(want) })
			c.stop(t, syscall.SIGTERM)
			got := map[string]bool{}
			for _, l := range lines(t, out) {
				var r struct{ Src string }
				if err := json.Unmarshal([]byte(l), &r); err != nil {
					t.Fatal(err)
				}
				if got[r.Src] {
					t.Errorf("network %s reported twice", r.Src)
				}
				got[r.Src] = true
			}
			if d := setDiff(got, want); d != "" || len(got) != len(want) {
				t.Errorf("collect --prefix 24,64: %d networks, want %d:\n%s", len(got), len(want), d)
			}
			if s := lines(t, sum); len(s) == 0 || !strings.Contains(s[len(s)-1], `"key":"src/24,64"`) {
				t.Errorf("summaries %q: want key src/24,64", s)
			}
		})
	}
}

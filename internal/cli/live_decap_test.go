//go:build linux && !(mips || mips64 || ppc64 || s390x)

package cli

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// run --decap in every mode keys the hosts inside the tunnels as replay
// --decap does: the decap captures (ERSPAN mirror sessions, VXLAN, GRE,
// GTP-U, IP-in-IP and nested tunnels, made by scripts/mkdecap.py) sent
// into a veth with tcpreplay give the records an exact replay of the same
// files gives, with the XDP program decapsulating in the kernel in mode
// xdp and flow.Parse's decapsulation in user space for afpacket and afxdp.
// Records are compared as a multiset of their jsonl lines less the time:
// two tenants' equal addresses in different VXLAN segments are two records.
func TestRunLiveDecap(t *testing.T) {
	t.Parallel()
	ns := liveNamespace(t)
	bin := buildBinary(t)
	files := []string{"erspan", "vxlan", "gre", "gtpu", "ipip", "nested"}
	want := map[string]int{}
	for _, name := range files {
		for _, r := range replayRecords(t, "--filter", "exact", "--key", "pair", "--decap", "all", decapPcap(name)) {
			want[pairOf(r)]++
		}
	}
	if len(want) == 0 {
		t.Fatal("replay --decap all gave no records")
	}
	total := 0
	for _, n := range want {
		total += n
	}
	for _, mode := range []string{"afpacket", "xdp", "afxdp"} {
		t.Run(mode, func(t *testing.T) {
			lr := startLive(t, ns, bin, "--mode", mode, "--key", "pair", "--filter", "exact", "--decap", "all", "--workers", "2", "--window", "1h")
			for _, name := range files {
				sendInto(t, ns, decapPcap(name))
			}
			waitLines(lr.out, total)
			lr.stop(t, syscall.SIGINT)
			got := map[string]int{}
			data, _ := os.ReadFile(lr.out)
			for line := range strings.Lines(string(data)) {
				var r map[string]any
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("record %q: %v", line, err)
				}
				got[pairOf(r)]++
			}
			if !maps.Equal(got, want) {
				t.Errorf("run --mode %s --decap all and replay --decap all disagree:\nrun    %v\nreplay %v\n%s", mode, sorted(got), sorted(want), lr.Log())
			}
		})
	}
}

func pairOf(r map[string]any) string {
	src, _ := r["src"].(string)
	dst, _ := r["dst"].(string)
	return src + " > " + dst
}

func sorted(m map[string]int) []string {
	var out []string
	for k, n := range m {
		out = append(out, k+" x"+strings.Repeat("I", n))
	}
	slices.Sort(out)
	return out
}

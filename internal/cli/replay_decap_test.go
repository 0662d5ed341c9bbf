package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

func decapPcap(name string) string {
	return filepath.Join("..", "..", "flow", "testdata", "decap", name+".pcap")
}

// tsharkSources is the sets of innermost and outermost IP source addresses
// tshark finds in file, in its layer order (frame.protocols): the last IPv4
// or IPv6 header of each frame before any ICMP, whose quoted header is not
// the packet's, and the first (readTunnels' last and outer).
func tsharkSources(t *testing.T, file string) (inner, outer map[string]bool) {
	t.Helper()
	r := readTunnels(t, file)
	return r.last, r.outer
}

// TestReplayDecap: replay --decap all --key src on an ERSPAN mirror capture
// (and the other tunnel captures) reports the mirrored hosts, tshark's
// innermost sources; --decap none the tunnel endpoints, as before.
func TestReplayDecap(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tshark"); err != nil {
		testutil.SkipOrFail(t, "tshark not installed (Debian package tshark; .ci/run installs it)")
	}
	for _, name := range []string{"erspan", "gre", "vxlan", "gtpu", "ipip"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			file := decapPcap(name)
			inner, outer := tsharkSources(t, file)
			// The reading goroutine keys the frames (--parsers 0), or
			// parse goroutines do.
			for _, parsers := range []string{"0", "2"} {
				got := map[string]bool{}
				for _, r := range replayRecords(t, "--decap", "all", "--key", "src", "--filter", "exact", "--seed", "1", "--parsers", parsers, file) {
					src, _ := r["src"].(string)
					got[canonAddr(t, src)] = true
				}
				if d := setDiff(got, inner); d != "" {
					t.Errorf("replay --decap all --parsers %s and tshark's innermost sources disagree:\n%s", parsers, d)
				}
			}
			got := map[string]bool{}
			for _, r := range replayRecords(t, "--decap", "none", "--key", "src", "--filter", "exact", "--seed", "1", file) {
				src, _ := r["src"].(string)
				got[canonAddr(t, src)] = true
			}
			if d := setDiff(got, outer); d != "" {
				t.Errorf("replay --decap none and tshark's outermost sources disagree:\n%s", d)
			}
		})
	}
}

// TestReplayDecapReasons: the frames of bad tunnel headers are counted in
// the summary by their reasons (scripts/mkdecap.py's bad.pcap: 26 frames,
// every one unkeyed with --decap all).
func TestReplayDecapReasons(t *testing.T) {
	dir := t.TempDir()
	sum := filepath.Join(dir, "sum.jsonl")
	var stderr bytes.Buffer
	args := []string{"replay", "--decap", "all", "--out", filepath.Join(dir, "out.jsonl"), "--summary", sum, decapPcap("bad")}
	if code := Main(context.Background(), args, new(bytes.Buffer), &stderr); code != ExitOK {
		t.Fatalf("replay: exit %d: %s", code, stderr.String())
	}
	data, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Packets     uint64            `json:"packets"`
		Malformed   uint64            `json:"malformed"`
		Skipped     uint64            `json:"skipped"`
		MalformedBy map[string]uint64 `json:"malformed_by"`
		SkippedBy   map[string]uint64 `json:"skipped_by"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(data), &s); err != nil {
		t.Fatalf("summary %q: %v", data, err)
	}
	// By hand from flow/decap_test.go's decapBad: 9 tunnel_truncated, 6
	// tunnel_bad_header, 1 tunnel_too_deep, 1 too_many_headers and 1
	// truncated are malformed; 5 tunnel_unknown, 2 tunnel_not_data and 1
	// not_ip skipped.
	wantM := map[string]uint64{"tunnel_truncated": 9, "tunnel_bad_header": 6, "tunnel_too_deep": 1, "too_many_headers": 1, "truncated": 1}
	wantS := map[string]uint64{"tunnel_unknown": 5, "tunnel_not_data": 2, "not_ip": 1}
	for r, n := range wantM {
		if s.MalformedBy[r] != n {
			t.Errorf("malformed_by[%s] = %d, want %d (%s)", r, s.MalformedBy[r], n, data)
		}
	}
	for r, n := range wantS {
		if s.SkippedBy[r] != n {
			t.Errorf("skipped_by[%s] = %d, want %d (%s)", r, s.SkippedBy[r], n, data)
		}
	}
	if s.Malformed != 18 || s.Skipped != 8 {
		t.Errorf("malformed %d, skipped %d; want 18 and 8", s.Malformed, s.Skipped)
	}
}

func TestReplayDecapBadFlag(t *testing.T) {
	var stderr bytes.Buffer
	code := Main(context.Background(), []string{"replay", "--decap", "gre,teredo", decapPcap("gre")}, new(bytes.Buffer), &stderr)
	if code == ExitOK || !strings.Contains(stderr.String(), `"teredo"`) {
		t.Errorf("--decap gre,teredo: exit %d, %q; want a usage error naming teredo", code, stderr.String())
	}
}

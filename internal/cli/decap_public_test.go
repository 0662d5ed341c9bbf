package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// tunnelCapture is one of the captures of testdata/tunnels, made by other
// people on real tunnels (testdata/tunnels/README.md).
func tunnelCapture(name string) string {
	return filepath.Join("..", "..", "testdata", "tunnels", name+".pcap")
}

// tunnelReading is tshark's reading of a tunnel capture: the innermost
// source addresses reached through the tunnels, and the frames that have
// none, by the reason replay counts them under.
type tunnelReading struct {
	inner, outer map[string]bool
	skipped      map[string]uint64
}

// readTunnels reads file with tshark, in tshark's
// own layer order (frame.protocols). A frame's key is its last IPv4 or
// IPv6 header before any ICMP (whose quoted header is not the packet's).
// A frame whose last tunnel carries no IP packet (ARP, CDP in a mirror
// session) has no inner host: not_ip. A GRE packet carrying something
// --decap does not take (PPP, say: GRE carries IPv4, IPv6, MPLS, Ethernet
// and ERSPAN for it) is tunnel_unknown.
func readTunnels(t *testing.T, file string) tunnelReading {
	t.Helper()
	tunnelReadingsMu.Lock()
	defer tunnelReadingsMu.Unlock()
	if r, ok := tunnelReadings[file]; ok {
		return r
	}
	r := runReadTunnels(t, file)
	tunnelReadings[file] = r
	return r
}

// tunnelReadings keeps tshark's reading of each capture for the test
// process (-count=50 would read them again; the maps are not modified).
var (
	tunnelReadingsMu sync.Mutex
	tunnelReadings   = map[string]tunnelReading{}
)

func runReadTunnels(t *testing.T, file string) tunnelReading {
	t.Helper()
	args := []string{"-r", file, "-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,",
		"-e", "frame.protocols", "-e", "ip.src", "-e", "ipv6.src"}
	out, err := exec.Command("tshark", args...).Output()
	if err != nil {
		t.Fatalf("tshark %q: %v", args, err)
	}
	r := tunnelReading{inner: map[string]bool{}, outer: map[string]bool{}, skipped: map[string]uint64{}}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(f) != 3 {
			t.Fatalf("tshark line %q", line)
		}
		v4, v6 := strings.Split(f[1], ","), strings.Split(f[2], ",")
		var i4, i6 int
		first, last, reason := "", "", ""
		tunnelled := false // the last tunnel layer has no IP header after it yet
		layers := strings.Split(f[0], ":")
	walk:
		for i, p := range layers {
			switch p {
			case "ip", "ipv6":
				if p == "ip" {
					last = v4[i4]
					i4++
				} else {
					last = v6[i6]
					i6++
				}
				if first == "" {
					first = last
				}
				tunnelled = false
			case "gre":
				next := ""
				if i+1 < len(layers) {
					next = layers[i+1]
				}
				switch next {
				case "ip", "ipv6", "mpls", "eth", "erspan":
				default:
					reason = "tunnel_unknown"
					break walk
				}
				tunnelled = true
			case "erspan", "vxlan", "geneve", "gtp":
				tunnelled = true
			case "icmp", "icmpv6":
				break walk
			}
		}
		if reason == "" && tunnelled {
			reason = "not_ip"
		}
		r.outer[canonAddr(t, first)] = true
		if reason != "" {
			r.skipped[reason]++
			continue
		}
		r.inner[canonAddr(t, last)] = true
	}
	return r
}

// TestReplayDecapPublicCaptures: on captures of real tunnels that other
// people made (Arkime's test captures: an ERSPAN type II mirror session,
// ERSPAN carrying VXLAN, GRE, GTP-U from a test network and from an
// iPhone, GTP-U over IPv6, Geneve from tcpdump's tests, VXLAN, and IPv6
// GRE carrying PPP), replay --decap all --key src reports tshark's
// innermost sources, counts the frames without an inner host by reason,
// and --decap none still reports the outermost sources.
func TestReplayDecapPublicCaptures(t *testing.T) {
	if _, err := exec.LookPath("tshark"); err != nil {
		testutil.SkipOrFail(t, "tshark not installed (Debian package tshark; .ci/run installs it)")
	}
	for _, c := range []struct {
		name  string
		decap string
		// The number of inner sources tshark 4 found when the test was
		// written: a check that another tshark reads the capture alike.
		wantInner int
	}{
		// Mirrored ICMP between two hosts, and the switch's CDP frames
		// (no IP host: not_ip).
		{name: "gre-erspan", decap: "all", wantInner: 2},
		// ERSPAN II carrying VXLAN from UDP port 4789 to port 4790:
		// VXLAN is recognised by its destination port (RFC 7348), so
		// --decap names 4790; tshark decodes either port.
		{name: "gre-erspan-vxlan", decap: "all,vxlan=4789+4790", wantInner: 2},
		{name: "gre-sample", decap: "all", wantInner: 5},
		{name: "gtp-u", decap: "all", wantInner: 2},
		{name: "gtp-iphone", decap: "all", wantInner: 7},
		{name: "ipv6-gtp6", decap: "all", wantInner: 1},
		{name: "tcpdump-geneve", decap: "all", wantInner: 2},
		// VXLAN carrying ICMP, and ARP (not_ip).
		{name: "vxlan", decap: "all", wantInner: 2},
		// GRE over IPv6 carrying PPP: not a payload --decap takes.
		{name: "6-4-gre-ppp-udp-4-dns", decap: "all", wantInner: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := tunnelCapture(c.name)
			want := readTunnels(t, file)
			if len(want.inner) != c.wantInner {
				t.Fatalf("tshark finds %d inner sources, want %d: %v", len(want.inner), c.wantInner, want.inner)
			}
			dir := t.TempDir()
			out, sum := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "sum.jsonl")
			var stderr bytes.Buffer
			args := []string{"replay", "--decap", c.decap, "--key", "src", "--filter", "exact", "--out", out, "--summary", sum, file}
			if code := Main(context.Background(), args, new(bytes.Buffer), &stderr); code != ExitOK {
				t.Fatalf("%q: exit %d: %s", args, code, stderr.String())
			}
			got := map[string]bool{}
			for _, r := range readJSONLines(t, out) {
				src, _ := r["src"].(string)
				got[canonAddr(t, src)] = true
			}
			if d := setDiff(got, want.inner); d != "" {
				t.Errorf("replay --decap %s and tshark's innermost sources disagree:\n%s", c.decap, d)
			}
			var s struct {
				SkippedBy   map[string]uint64 `json:"skipped_by"`
				MalformedBy map[string]uint64 `json:"malformed_by"`
			}
			data, err := os.ReadFile(sum)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(bytes.TrimSpace(data), &s); err != nil {
				t.Fatalf("summary %q: %v", data, err)
			}
			if len(s.MalformedBy) != 0 || len(s.SkippedBy) != len(want.skipped) {
				t.Errorf("summary skipped_by %v, malformed_by %v; want skipped_by %v and nothing malformed", s.SkippedBy, s.MalformedBy, want.skipped)
			}
			for r, n := range want.skipped {
				if s.SkippedBy[r] != n {
					t.Errorf("skipped_by[%s] = %d, want %d (tshark's reading)", r, s.SkippedBy[r], n)
				}
			}

			got = map[string]bool{}
			for _, r := range replayRecords(t, "--decap", "none", "--key", "src", "--filter", "exact", file) {
				src, _ := r["src"].(string)
				got[canonAddr(t, src)] = true
			}
			if d := setDiff(got, want.outer); d != "" {
				t.Errorf("replay --decap none and tshark's outermost sources disagree:\n%s", d)
			}
		})
	}
}

// readJSONLines reads a jsonl file into one map a line.
func readJSONLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	for line := range bytes.Lines(data) {
		var r map[string]any
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

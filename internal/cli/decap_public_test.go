package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// tunnelCapture is one of the captures of testdata/tunnels, made by other
// people on real tunnels (testdata/tunnels/README.md).
func tunnelCapture(name string) string {
	return filepath.Join("..", "..", "testdata", "tunnels", name+".pcap")
}

// tunnelReading is tshark's reading of a tunnel capture, in tshark's own
// layer order (frame.protocols). A frame's innermost source is its last
// IPv4 or IPv6 header before any ICMP (whose quoted header is not the
// packet's), its outermost the first.
type tunnelReading struct {
	// last is every frame's innermost source; lastSeg the same, written
	// "vni N ADDR" when a VXLAN or Geneve header came before it, N the
	// last one's VNI in decimal.
	last, lastSeg map[string]bool
	// outer is every frame's outermost source.
	outer map[string]bool
	// inner is the innermost sources of the frames with an inner host:
	// not those whose last tunnel carries no IP packet (ARP, CDP in a
	// mirror session: not_ip), nor GRE carrying something --decap does
	// not take (PPP, say: GRE carries IPv4, IPv6, MPLS, Ethernet and
	// ERSPAN for it: tunnel_unknown); skipped counts those by reason.
	inner   map[string]bool
	skipped map[string]uint64
}

// readTunnels is tshark's reading of file, read once per test process
// (-count=50 would read it again; the maps are not modified).
func readTunnels(t *testing.T, file string) tunnelReading {
	t.Helper()
	return tunnelReadings.get(file, func() tunnelReading { return runReadTunnels(t, file) })
}

var tunnelReadings fileCache[tunnelReading]

func runReadTunnels(t *testing.T, file string) tunnelReading {
	t.Helper()
	args := []string{"-r", file, "-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE", "-d", "udp.port==8472,vxlan",
		"-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,",
		"-e", "frame.protocols", "-e", "ip.src", "-e", "ipv6.src", "-e", "vxlan.vni", "-e", "geneve.vni"}
	out, err := exec.Command("tshark", args...).Output()
	if err != nil {
		t.Fatalf("tshark %q: %v", args, err)
	}
	r := tunnelReading{last: map[string]bool{}, lastSeg: map[string]bool{}, outer: map[string]bool{},
		inner: map[string]bool{}, skipped: map[string]uint64{}}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(f) != 5 {
			t.Fatalf("tshark line %q", line)
		}
		v4, v6, vx, gv := strings.Split(f[1], ","), strings.Split(f[2], ","), strings.Split(f[3], ","), strings.Split(f[4], ",")
		var i4, i6, ix, ig int
		first, last, seg, reason := "", "", "", ""
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
					if reason == "" {
						reason = "tunnel_unknown"
					}
				}
				tunnelled = true
			case "vxlan":
				seg = vx[ix]
				ix++
				tunnelled = true
			case "geneve":
				seg = gv[ig]
				ig++
				tunnelled = true
			case "erspan", "gtp":
				tunnelled = true
			case "icmp", "icmpv6":
				break walk
			}
		}
		if reason == "" && tunnelled {
			reason = "not_ip"
		}
		key := canonAddr(t, last)
		r.last[key] = true
		r.outer[canonAddr(t, first)] = true
		if seg != "" {
			// vxlan.vni is decimal, geneve.vni hex (0x0001f4).
			n, err := strconv.ParseUint(seg, 0, 32)
			if err != nil {
				t.Fatalf("tshark's VNI %q: %v", seg, err)
			}
			r.lastSeg[fmt.Sprintf("vni %d %s", n, key)] = true
		} else {
			r.lastSeg[key] = true
		}
		if reason != "" {
			r.skipped[reason]++
			continue
		}
		r.inner[key] = true
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
	t.Parallel()
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
			t.Parallel()
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

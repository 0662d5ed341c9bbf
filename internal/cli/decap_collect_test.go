//go:build linux && !(mips || mips64 || ppc64 || s390x)

package cli

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/collect/collecttest"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/testframe"
)

// decapCaptures are the tunnel captures of scripts/mkdecap.py (scapy) the
// sFlow tests sample, one agent each.
var decapCaptures = []string{"erspan", "gre", "vxlan", "geneve", "gtpu", "ipip", "nested"}

// pcapFrames returns the frames of an Ethernet capture, copied.
func pcapFrames(t *testing.T, file string) [][]byte {
	t.Helper()
	src, err := pcapfile.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var frames [][]byte
	var pkt capture.Packet
	for {
		err := src.Next(&pkt)
		if errors.Is(err, io.EOF) {
			return frames
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		frames = append(frames, append([]byte(nil), pkt.Data...))
	}
}

// sflowSamples makes a flow sample of every frame, with the whole frame as
// its raw header (an agent's header size of 256 bytes holds every frame of
// the captures). A frame whose Ethernet header is followed at once by IPv4
// or IPv6 is sent without it, as header protocol 11 or 12 (what agents on
// routed ports send): the IP packet tshark reads after the Ethernet header
// is the sample's whole header.
func sflowSamples(frames [][]byte) []collecttest.SFlowSample {
	var out []collecttest.SFlowSample
	for i, f := range frames {
		s := collecttest.SFlowSample{Header: f, Protocol: 1, FrameLength: uint32(len(f)), SamplingRate: 1}
		if i%2 == 1 && len(f) > 14 {
			switch binary.BigEndian.Uint16(f[12:14]) {
			case 0x0800:
				s.Header, s.Protocol = f[14:], 11
			case 0x86dd:
				s.Header, s.Protocol = f[14:], 12
			}
		}
		out = append(out, s)
	}
	return out
}

var listeningSFlow = regexp.MustCompile(`listening on sflow://(\S+?)[, ]`)

// startSFlowCollect starts `flowdedup collect --listen sflow://127.0.0.1:0
// ARGS` and returns it and a socket connected to its port.
func startSFlowCollect(t *testing.T, args ...string) (*testutil.Process, net.Conn) {
	t.Helper()
	p := testutil.StartProcess(t, exec.Command(buildBinary(t), append([]string{"collect", "--listen", "sflow://127.0.0.1:0"}, args...)...), "", 0)
	m := listeningSFlow.FindStringSubmatch(p.WaitLine(t, "listening on sflow://", time.Minute))
	if m == nil {
		t.Fatalf("collect's listening line names no address\n%s", p.Log())
	}
	conn, err := net.Dial("udp", m[1])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return p, conn
}

// agentOf is the sFlow agent that samples capture number i of
// decapCaptures: an observer of its own, whose keys are deduplicated
// apart from the others'.
func agentOf(i int) *collecttest.SFlow {
	return &collecttest.SFlow{Agent: netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)})}
}

// collectSources runs collect with args on the sFlow samples of every
// capture of decapCaptures and returns the sources of its records by
// capture, as "ADDR", or "vni N ADDR" for a record with a VNI when
// segments (the keys inside VXLAN and Geneve are then per VNI: an address
// in two VNIs is two records); each must come once.
func collectSources(t *testing.T, want map[string]map[string]bool, segments bool, args ...string) map[string]map[string]bool {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sources.jsonl")
	p, conn := startSFlowCollect(t, append([]string{"--key", "src", "--filter", "exact", "--window", "0", "--out", out}, args...)...)
	total := 0
	for i, name := range decapCaptures {
		d := agentOf(i).Datagram(sflowSamples(pcapFrames(t, decapPcap(name))), false)
		if _, err := conn.Write(d); err != nil {
			t.Fatal(err)
		}
		total += len(want[name])
	}
	p.WaitFor(t, "the records in --out", time.Minute, func() bool { return len(lines(t, out)) >= total })
	if err := p.Stop(t, syscall.SIGTERM, time.Minute); err != nil {
		t.Fatalf("collect exited with %v, want 0\n%s", err, p.Log())
	}
	byAgent := map[string]string{}
	for i, name := range decapCaptures {
		byAgent[agentOf(i).Agent.String()+"#0"] = name
	}
	got := map[string]map[string]bool{}
	for _, l := range lines(t, out) {
		var r struct {
			Src, Exporter string
			VNI           *uint32
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("record %q: %v", l, err)
		}
		if r.VNI != nil && !segments {
			t.Errorf("record %s: a vni, without segments", l)
		}
		key := canonAddr(t, r.Src)
		if segments && r.VNI != nil {
			key = fmt.Sprintf("vni %d %s", *r.VNI, key)
		}
		name, ok := byAgent[r.Exporter]
		if !ok {
			t.Fatalf("record %s of no agent sent", l)
		}
		if got[name] == nil {
			got[name] = map[string]bool{}
		}
		if got[name][key] {
			t.Errorf("record %s: a second record of the key", l)
		}
		got[name][key] = true
	}
	return got
}

// TestCollectSFlowDecap: collect --decap all keys the sFlow samples of
// tunnelled packets (ERSPAN, GRE, VXLAN, Geneve, GTP-U, IP-in-IP, nested;
// Ethernet and raw IPv4/IPv6 headers) by tshark's innermost sources of the
// same bytes, each record with tshark's innermost VNI (the "vni" of
// jsonl); with novni by the addresses alone; --decap none, and no
// --decap, by the outermost ones, as before.
func TestCollectSFlowDecap(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tshark"); err != nil {
		testutil.SkipOrFail(t, "tshark not installed (Debian package tshark; .ci/run installs it)")
	}
	inner, outer, segs := map[string]map[string]bool{}, map[string]map[string]bool{}, map[string]map[string]bool{}
	for _, name := range decapCaptures {
		inner[name], outer[name] = tsharkSources(t, decapPcap(name))
		segs[name] = tsharkSegmentSources(t, decapPcap(name))
	}
	for _, c := range []struct {
		args     []string
		want     map[string]map[string]bool
		segments bool
		what     string
	}{
		{[]string{"--decap", "all"}, segs, true, "innermost (with the innermost VNI)"},
		{[]string{"--decap", "all,novni"}, inner, false, "innermost"},
		{[]string{"--decap", "none"}, outer, false, "outermost"},
		{nil, outer, false, "outermost"},
	} {
		got := collectSources(t, c.want, c.segments, c.args...)
		for _, name := range decapCaptures {
			if d := setDiff(got[name], c.want[name]); d != "" {
				t.Errorf("collect %q on sFlow samples of %s and tshark's %s sources disagree:\n%s", c.args, name, c.what, d)
			}
		}
	}
}

// TestCollectSFlowDecapReasons: sFlow samples whose headers collect cannot
// key through their tunnels are counted by reason, in the summary
// (malformed_by, skipped_by), the run totals and the metrics, as replay
// counts them: bad.pcap's frames (scripts/mkdecap.py) give replay's counts
// (TestReplayDecapReasons), and a VXLAN packet the agent cut inside its
// VXLAN header is tunnel_truncated, one cut inside the inner IPv4 header
// truncated.
func TestCollectSFlowDecapReasons(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, sum := filepath.Join(dir, "sources.jsonl"), filepath.Join(dir, "summary.jsonl")
	p, conn := startSFlowCollect(t, "--decap", "all", "--window", "0", "--out", out, "--summary", sum, "--metrics", "127.0.0.1:0")
	bad := pcapFrames(t, decapPcap("bad"))
	if len(bad) != 26 {
		t.Fatalf("bad.pcap: %d frames, want 26", len(bad))
	}
	var samples []collecttest.SFlowSample
	for _, f := range bad {
		samples = append(samples, collecttest.SFlowSample{Header: f, Protocol: 1, FrameLength: uint32(len(f)), SamplingRate: 1})
	}
	// vxlan.pcap's first frame, by hand: Ethernet (14 bytes), IPv4 of
	// 20, UDP of 8 to port 4789, VXLAN of 8, Ethernet of 14, IPv4 of 20,
	// TCP. Cut at 46 bytes: 4 bytes of the VXLAN header; at 74: 10 bytes
	// of the inner IPv4 header.
	vx := pcapFrames(t, decapPcap("vxlan"))[0]
	if binary.BigEndian.Uint16(vx[12:]) != 0x0800 || vx[14] != 0x45 || vx[23] != 17 || binary.BigEndian.Uint16(vx[36:]) != 4789 ||
		binary.BigEndian.Uint16(vx[62:]) != 0x0800 || vx[64] != 0x45 {
		t.Fatalf("vxlan.pcap's first frame is not Ethernet, IPv4, UDP 4789, VXLAN, Ethernet, IPv4: % x", vx[:66])
	}
	for _, n := range []int{46, 74} {
		samples = append(samples, collecttest.SFlowSample{Header: vx[:n], Protocol: 1, FrameLength: uint32(len(vx)), SamplingRate: 1})
	}
	// Last, a frame of a known source: once its record is written, the
	// samples before it (one agent, one socket, read in order) are keyed.
	samples = append(samples, collecttest.SFlowSample{Header: testframe.UDP4Frame(netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2"), 1, 2, 46), Protocol: 1, FrameLength: 60, SamplingRate: 1})
	a := agentOf(0)
	for len(samples) > 0 {
		n := min(len(samples), 8)
		if _, err := conn.Write(a.Datagram(samples[:n], false)); err != nil {
			t.Fatal(err)
		}
		samples = samples[n:]
	}
	p.WaitFor(t, "the last sample's record", time.Minute, func() bool { return strings.Contains(strings.Join(lines(t, out), "\n"), `"10.99.0.1"`) })
	m := metricsAddr.FindStringSubmatch(p.Log())
	if m == nil {
		t.Fatalf("no metrics address\n%s", p.Log())
	}
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(t, syscall.SIGTERM, time.Minute); err != nil {
		t.Fatalf("collect exited with %v, want 0\n%s", err, p.Log())
	}
	// By hand: bad.pcap's frames as TestReplayDecapReasons counts them
	// (9 tunnel_truncated, 6 tunnel_bad_header, 1 tunnel_too_deep, 1
	// too_many_headers, 1 truncated; 5 tunnel_unknown, 2 tunnel_not_data,
	// 1 not_ip), and the two cut VXLAN packets.
	wantM := map[string]uint64{"tunnel_truncated": 10, "tunnel_bad_header": 6, "tunnel_too_deep": 1, "too_many_headers": 1, "truncated": 2}
	wantS := map[string]uint64{"tunnel_unknown": 5, "tunnel_not_data": 2, "not_ip": 1}
	s := lines(t, sum)
	if len(s) != 1 {
		t.Fatalf("summaries %q, want one", s)
	}
	var w struct {
		Packets     uint64            `json:"packets"`
		Malformed   uint64            `json:"malformed"`
		Skipped     uint64            `json:"skipped"`
		MalformedBy map[string]uint64 `json:"malformed_by"`
		SkippedBy   map[string]uint64 `json:"skipped_by"`
	}
	if err := json.Unmarshal([]byte(s[0]), &w); err != nil {
		t.Fatal(err)
	}
	if w.Packets != 29 || w.Malformed != 20 || w.Skipped != 8 || !maps.Equal(w.MalformedBy, wantM) || !maps.Equal(w.SkippedBy, wantS) {
		t.Errorf("summary: packets %d, malformed %d %v, skipped %d %v; want 29, 20 %v, 8 %v", w.Packets, w.Malformed, w.MalformedBy, w.Skipped, w.SkippedBy, wantM, wantS)
	}
	totals := "malformed 20 (too_many_headers 1, truncated 2, tunnel_bad_header 6, tunnel_too_deep 1, tunnel_truncated 10), skipped 8 (not_ip 1, tunnel_not_data 2, tunnel_unknown 5)"
	if !strings.Contains(p.Log(), totals) {
		t.Errorf("the run totals do not say %q:\n%s", totals, p.Log())
	}
	for r, n := range wantM {
		metricHas(t, string(body), "flowdedup_malformed_total", r, n)
	}
	for r, n := range wantS {
		metricHas(t, string(body), "flowdedup_skipped_total", r, n)
	}
}

var metricsAddr = regexp.MustCompile(`metrics on http://(\S+)/metrics`)

// metricHas checks that the scrape body has the counter name of reason at n.
func metricHas(t *testing.T, body, name, reason string, n uint64) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + name + `\{[^}]*reason="` + reason + `"[^}]*\} (\S+)$`)
	m := re.FindStringSubmatch(body)
	if m == nil || m[1] != fmt.Sprint(n) {
		t.Errorf("metrics: %s{reason=%q} %v, want %d", name, reason, m, n)
	}
}

// tsharkSegmentSources is tshark's innermost source of each frame of file
// (as tsharkSources), written "vni N ADDR" when a VXLAN or Geneve header
// came before it, N the last one's VNI (vxlan.vni, geneve.vni), in
// decimal: the VNI of the innermost VXLAN or Geneve header crossed
// (readTunnels' lastSeg).
func tsharkSegmentSources(t *testing.T, file string) map[string]bool {
	t.Helper()
	return readTunnels(t, file).lastSeg
}

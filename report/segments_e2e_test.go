package report_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// tenantsScript writes, with scapy, a capture of two tenants reusing the
// same addresses in VXLAN: 10.0.0.1 > 10.0.0.2 (TCP 40000 > 443) in VNI 100,
// twice, and in VNI 200; 2001:db8::1 > 2001:db8::2 (UDP) in VNI 16777215
// on the Linux port 8472; and the same IPv4 packet outside any tunnel.
const tenantsScript = `
import sys
from scapy.all import Ether, IP, IPv6, UDP, TCP, wrpcap
from scapy.layers.vxlan import VXLAN

def vx(vni, inner, port=4789):
    return (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") /
            IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=50000, dport=port) /
            VXLAN(vni=vni) / Ether(src="02:00:00:00:01:01", dst="02:00:00:00:01:02") / inner)

tcp = IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=40000, dport=443)
pkts = [vx(100, tcp), vx(200, tcp), vx(100, tcp),
        vx(16777215, IPv6(src="2001:db8::1", dst="2001:db8::2") / UDP(sport=5353, dport=53), port=8472),
        Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / tcp]
for i, p in enumerate(pkts):
    p.time = 1767225600 + i
wrpcap(sys.argv[1], pkts)
`

// tenants caches the capture tenantsScript makes, and tshark's reading of
// it, for the test process (-count=50 would run scapy and tshark again
// for the same bytes).
var tenants struct {
	sync.Mutex
	pcap  []byte
	keys  map[string]bool
	ready bool
}

// tenantsCapture makes the capture of tenantsScript, in a directory of t,
// and returns its path and tshark's reading of it (tsharkTenants).
func tenantsCapture(t *testing.T) (string, map[string]bool) {
	t.Helper()
	tenants.Lock()
	defer tenants.Unlock()
	path := filepath.Join(t.TempDir(), "tenants.pcap")
	if tenants.ready {
		if err := os.WriteFile(path, tenants.pcap, 0o644); err != nil {
			t.Fatal(err)
		}
		return path, tenants.keys
	}
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import scapy.layers.vxlan").Run(); err != nil {
		testutil.SkipOrFail(t, "scapy is not installed for %s (Debian package python3-scapy): %v", py, err)
	}
	if out, err := exec.Command(py, "-c", tenantsScript, path).CombinedOutput(); err != nil {
		t.Fatalf("scapy: %v\n%s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keys := tsharkTenants(t, path)
	tenants.pcap, tenants.keys, tenants.ready = b, keys, true
	return path, keys
}

// tsharkTenants is tshark's reading of the capture: for each frame the
// innermost source and destination address and the VNI ("" outside
// VXLAN), as "VNI SRC DST".
func tsharkTenants(t *testing.T, path string) map[string]bool {
	t.Helper()
	if _, err := exec.LookPath("tshark"); err != nil {
		testutil.SkipOrFail(t, "tshark is not installed (Debian package tshark)")
	}
	out, err := exec.Command("tshark", "-r", path, "-d", "udp.port==8472,vxlan", "-T", "fields",
		"-E", "occurrence=l", "-e", "vxlan.vni", "-e", "ip.src", "-e", "ip.dst", "-e", "ipv6.src", "-e", "ipv6.dst").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	keys := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(f) != 5 {
			t.Fatalf("tshark line %q", line)
		}
		src, dst := f[1], f[2]
		if f[3] != "" { // IPv6 inside IPv4: the innermost is the IPv6 header
			src, dst = f[3], f[4]
		}
		keys[f[0]+" "+src+" "+dst] = true
	}
	return keys
}

// replay runs the flowdedup command's replay with args and returns its
// records.
func replay(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "records")
	cmd := exec.CommandContext(ctx, testutil.Flowdedup(t), append([]string{"replay", "--key", "pair", "--filter", "exact", "--seed", "1", "--out", out}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("flowdedup replay %q: %v\n%s", args, err, stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestReplayTenantsVNI runs flowdedup replay --decap vxlan on two tenants'
// identical addresses in VNIs 100 and 200: jsonl has one record per
// (VNI, pair), each with the VNI tshark reads (vxlan.vni), the pair
// outside the tunnel without one; csv has a vni column with the same; with
// novni the tenants are one key and no record has a vni.
func TestReplayTenantsVNI(t *testing.T) {
	path, want := tenantsCapture(t)
	if len(want) != 4 { // the capture's two VNIs of 10.0.0.1 > 10.0.0.2, its IPv6 tenant and the untunnelled pair
		t.Fatalf("tshark reads %d keys in the capture, want 4: %v", len(want), want)
	}

	got := map[string]bool{}
	lines := 0
	sc := bufio.NewScanner(bytes.NewReader(replay(t, "--decap", "vxlan", "--format", "jsonl", path)))
	for sc.Scan() {
		lines++
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.UseNumber()
		var r map[string]any
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		vni := ""
		if v, ok := r["vni"]; ok {
			vni = string(v.(json.Number))
		}
		got[vni+" "+r["src"].(string)+" "+r["dst"].(string)] = true
	}
	if lines != len(want) || !mapsEqual(got, want) {
		t.Errorf("replay --decap vxlan --format jsonl: %d records %v; tshark reads %v", lines, keysOf(got), keysOf(want))
	}

	rows, err := csv.NewReader(bytes.NewReader(replay(t, "--decap", "vxlan", "--format", "csv", path))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ts", "src", "dst", "vni", "window"}; !slices.Equal(rows[0], want) {
		t.Errorf("csv header %v, want %v", rows[0], want)
	}
	got = map[string]bool{}
	for _, row := range rows[1:] {
		got[row[3]+" "+row[1]+" "+row[2]] = true
	}
	if len(rows) != len(want)+1 || !mapsEqual(got, want) {
		t.Errorf("replay --decap vxlan --format csv: %d rows %v; tshark reads %v", len(rows)-1, keysOf(got), keysOf(want))
	}

	// novni: the tenants' pair is one key, without a vni; csv has the
	// header of a run without segments.
	novni := replay(t, "--decap", "vxlan,novni", "--format", "jsonl", path)
	if n := bytes.Count(novni, []byte("\n")); n != 2 || bytes.Contains(novni, []byte(`"vni"`)) {
		t.Errorf("replay --decap vxlan,novni: %d records, want 2 without vni:\n%s", n, novni)
	}
	if csvNovni := replay(t, "--decap", "vxlan,novni", "--format", "csv", path); !bytes.HasPrefix(csvNovni, []byte("ts,src,dst,window\n")) {
		t.Errorf("replay --decap vxlan,novni --format csv:\n%s\nwant the header ts,src,dst,window", csvNovni)
	}
	// text: the key's text form starts "vni N".
	text := string(replay(t, "--decap", "vxlan", "--format", "text", path))
	for _, w := range []string{"  vni 100 10.0.0.1 > 10.0.0.2\n", "  vni 200 10.0.0.1 > 10.0.0.2\n", "  vni 16777215 2001:db8::1 > 2001:db8::2\n", "Z  10.0.0.1 > 10.0.0.2\n"} {
		if !strings.Contains(text, w) {
			t.Errorf("replay --format text has no %q:\n%s", w, text)
		}
	}
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func keysOf(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestReplayTenantsIPFIX runs flowdedup replay --decap vxlan --export
// ipfix+tcp:// on the two tenants' capture into a TCP listener, and has
// libfixbuf's ipfixDump read the stream: the pairs in VNIs 100 and 200
// (tshark's vxlan.vni) carry layer2SegmentId 0x01 (VxLAN) << 56 | VNI, the
// pair outside the tunnel none.
func TestReplayTenantsIPFIX(t *testing.T) {
	bin, err := exec.LookPath("ipfixDump")
	if err != nil {
		testutil.SkipOrFail(t, "ipfixDump is not installed (Debian package libfixbuf-tools): %v", err)
	}
	path, keys := tenantsCapture(t)
	want := map[string]bool{}
	for k := range keys {
		vni, addrs, _ := strings.Cut(k, " ")
		if vni != "" {
			n, err := strconv.ParseUint(vni, 10, 24)
			if err != nil {
				t.Fatalf("tshark's vni %q: %v", vni, err)
			}
			vni = strconv.FormatUint(1<<56|n, 10) // IANA: type 0x01 VxLAN in the top byte
		}
		want[vni+" "+addrs] = true
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stream := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			stream <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c) // until flowdedup closes the connection at its end
		stream <- b
	}()
	replay(t, "--decap", "vxlan", "--export", "ipfix+tcp://"+ln.Addr().String(), path)
	var b []byte
	select {
	case b = <-stream:
	case <-time.After(time.Minute): // a bound for a broken exporter only: replay has returned and closed its connection
		t.Fatal("no IPFIX stream")
	}
	file := filepath.Join(t.TempDir(), "export.ipfix")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-i", file).Output()
	if err != nil {
		t.Fatalf("ipfixDump: %v", err)
	}
	got := map[string]bool{}
	records := 0
	for _, rec := range strings.Split(string(out), "--- data record")[1:] {
		records++
		f := map[string]string{}
		for _, m := range dumpField.FindAllStringSubmatch(rec, -1) {
			f[m[1]] = m[2]
		}
		src, dst := cmp.Or(f["sourceIPv4Address"], f["sourceIPv6Address"]), cmp.Or(f["destinationIPv4Address"], f["destinationIPv6Address"])
		got[f["layer2SegmentId"]+" "+canon(t, src)+" "+canon(t, dst)] = true
	}
	if records != len(want) || !mapsEqual(got, want) {
		t.Errorf("ipfixDump shows %d records %v, want %v", records, keysOf(got), keysOf(want))
	}
}

// canon is the address s, as netip spells it (ipfixDump writes IPv6
// addresses in full: 2001:0db8::0001).
func canon(t *testing.T, s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatalf("ipfixDump address %q: %v", s, err)
	}
	return a.String()
}

// dumpField is a field line of ipfixDump: "(351)   layer2SegmentId : 72057594037928036".
var dumpField = regexp.MustCompile(`(?m)^\s*\(\d+\)\s+(\w+) : (.*)$`)

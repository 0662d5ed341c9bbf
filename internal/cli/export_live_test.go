//go:build linux && !(mips || mips64 || ppc64 || s390x)

package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/netns"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
)

// nsNfcapd is nfdump's nfcapd running inside a test namespace, on the
// namespace's loopback, where a `flowdedup run` in the same namespace
// reaches it.
type nsNfcapd struct {
	*testutil.Process
	ns   *netns.Namespace
	port int
	dir  string
}

// startNfcapdIn starts nfcapd in ns on 127.0.0.1:port (the namespace is
// new, so any port is free) and waits until its socket is bound.
func startNfcapdIn(t *testing.T, ns *netns.Namespace, port int) *nsNfcapd {
	t.Helper()
	for _, tool := range []string{"nfcapd", "nfdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.SkipOrFail(t, "%s is not installed (Debian package nfdump; .ci/run installs it)", tool)
		}
	}
	n := &nsNfcapd{ns: ns, port: port, dir: t.TempDir()}
	// ip netns exec execs nfcapd: signals to the process reach nfcapd.
	n.Process = testutil.StartProcess(t, exec.Command("ip", "netns", "exec", ns.Name, "nfcapd", "-b", "127.0.0.1", "-p", strconv.Itoa(port), "-w", n.dir, "-t", "3600"), "", 0)
	n.WaitFor(t, fmt.Sprintf("nfcapd in %s binding 127.0.0.1:%d", ns.Name, port), time.Minute, func() bool {
		_, ok := n.queue(t)
		return ok
	})
	return n
}

// queue returns the bytes waiting in nfcapd's socket, from the namespace's
// /proc/net/udp, and whether the socket is there.
func (n *nsNfcapd) queue(t *testing.T) (uint64, bool) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", n.ns.Name, "cat", "/proc/net/udp").Output()
	if err != nil {
		t.Fatalf("read /proc/net/udp in %s: %v", n.ns.Name, err)
	}
	local := fmt.Sprintf("0100007F:%04X", n.port)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 4 && fs[1] == local {
			_, rx, _ := strings.Cut(fs[4], ":")
			v, _ := strconv.ParseUint(rx, 16, 64)
			return v, true
		}
	}
	return 0, false
}

// flows waits until nfcapd has read its socket, stops it (it writes its
// file on SIGTERM) and returns what nfdump reads back. Call it once the
// sender has exited: loopback queues a datagram within the sender's send
// call, so nfcapd has read them all when its socket's queue is empty.
func (n *nsNfcapd) flows(t *testing.T) []servers.NfdumpFlow {
	t.Helper()
	n.WaitFor(t, "nfcapd reading its socket", time.Minute, func() bool {
		q, _ := n.queue(t)
		return q == 0
	})
	n.Stop(t, syscall.SIGTERM, time.Minute) // its exit status is nfcapd's business; its files are the test's
	return servers.ReadNfdump(t, n.dir)
}

// nfdumpFlow is what nfdump shows for a jsonl 5-tuple record: ports 0 for
// keys without ports, the time to the millisecond.
func nfdumpFlow(t *testing.T, r map[string]any) servers.NfdumpFlow {
	t.Helper()
	num := func(name string) uint64 {
		v, _ := r[name].(float64)
		return uint64(v)
	}
	ts, err := time.Parse(time.RFC3339Nano, r["ts"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return servers.NfdumpFlow{
		Src: netip.MustParseAddr(r["src"].(string)), Dst: netip.MustParseAddr(r["dst"].(string)),
		Proto: uint8(num("proto")), SrcPort: uint16(num("sport")), DstPort: uint16(num("dport")),
		First: ts.UTC().Truncate(time.Millisecond),
	}
}

// Live capture with export (issue 9 item 6): `flowdedup run --mode afpacket
// --export ipfix://` on the veth pair of a test namespace, with nfcapd on
// that namespace's loopback; a capture sent with tcpreplay, then SIGINT.
// Every distinct key of the capture (an exact replay's) reaches the
// collector, once, as the run's own records say (time to the ms), and
// the run's totals count nothing lost.
func TestRunExportsToCollector(t *testing.T) {
	t.Parallel()
	ns := liveNamespace(t)
	bin := buildBinary(t)
	col := startNfcapdIn(t, ns, 4739)
	file := pcapPath("small.pcap")
	want := map[servers.NfdumpFlow]bool{}
	for _, r := range replayRecords(t, "--filter", "exact", "--key", "5tuple", file) {
		f := nfdumpFlow(t, r)
		f.First = time.Time{}
		want[f] = true
	}
	lr := startLive(t, ns, bin, "--mode", "afpacket", "--key", "5tuple", "--filter", "exact", "--workers", "2", "--window", "1h",
		"--export", "ipfix://127.0.0.1:4739", "--observer", "veth-test")
	sendInto(t, ns, file)
	waitLines(lr.out, len(want))
	lr.stop(t, syscall.SIGINT)

	data, _ := os.ReadFile(lr.out)
	recs := map[servers.NfdumpFlow]int{}
	keys := map[servers.NfdumpFlow]bool{}
	n := 0
	for line := range strings.Lines(string(data)) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		f := nfdumpFlow(t, r)
		recs[f]++
		f.First = time.Time{}
		keys[f] = true
		n++
	}
	if len(keys) != len(want) || n != len(want) {
		t.Errorf("run wrote %d records of %d keys, want the %d distinct keys of the capture once each\n%s", n, len(keys), len(want), lr.Log())
	}
	got := col.flows(t)
	seen := map[servers.NfdumpFlow]bool{}
	for _, f := range got {
		if recs[f] == 0 {
			t.Errorf("nfdump shows a flow that is not a record of the run (or more often): %+v", f)
			continue
		}
		recs[f]--
		f.First = time.Time{}
		seen[f] = true
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("key not in the collector: %+v", k)
		}
	}
	if len(got) != n {
		t.Errorf("the collector has %d flows, the run wrote %d records", len(got), n)
	}
	if !strings.Contains(lr.Log(), fmt.Sprintf("export ipfix://127.0.0.1:4739: sent %d records (IPFIX carries no window summaries), dropped 0\n", n)) {
		t.Errorf("the run's totals do not say all %d records were sent:\n%s", n, lr.Log())
	}
}

// A daemon whose export destination is dead (a real UDP port with nothing
// on it, inside the test namespace) exits 0 when stopped by SIGINT, as a
// daemon does, and says on stderr how many records and window summaries
// it could not deliver and what keeps them; the summary output ends with
// the run totals that count them. During the run the losses are in
// flowdedup_export_dropped_total (TestExportMetricsRegistered).
func TestRunSaysExportLossOnStop(t *testing.T) {
	t.Parallel()
	ns := liveNamespace(t)
	bin := buildBinary(t)
	file := pcapPath("small.pcap")
	want := len(replayRecords(t, "--filter", "exact", "--key", "src", file))
	lr := startLive(t, ns, bin, "--mode", "afpacket", "--key", "src", "--filter", "exact", "--workers", "2", "--window", "1h",
		"--export", "ipfix://127.0.0.1:4739", "--export-drain", "200ms")
	sendInto(t, ns, file)
	waitLines(lr.out, want)
	lr.stop(t, syscall.SIGINT) // exit 0, or the test fails
	// Every record, lost at the end (IPFIX carries no window summaries:
	// the end of a window is only a flush, and its loss is not counted).
	rt := readRunTotals(t, lr.summary)
	lost := want
	line := fmt.Sprintf("flowdedup run: %d records and window summaries were not delivered: ipfix://127.0.0.1:4739 %d (shutdown %d); --spool DIR keeps", lost, lost, lost)
	if !strings.Contains(lr.Log(), line) {
		t.Errorf("stderr does not say %q:\n%s", line, lr.Log())
	}
	if e := rt.Exports["ipfix://127.0.0.1:4739"]; e.Dropped != uint64(lost) || e.DroppedBy["shutdown"] != uint64(lost) {
		t.Errorf("run totals %+v, want %d dropped as shutdown", rt, lost)
	}
}

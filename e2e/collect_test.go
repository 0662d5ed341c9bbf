package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/collect/netflow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
	"github.com/flowdedup/flowdedup/internal/testutil/testexporter"
)

// collector is a running `flowdedup collect`.
type collector struct {
	*testutil.Process
	addrs   []string // where each --listen listens, in order
	out     string   // its --out
	summary string   // its --summary
}

var listenLine = regexp.MustCompile(`listening on (\S+) \(`)

// startCollector starts `flowdedup collect` with a --listen for each of
// listens (URLs whose port may be 0), --out and --summary in a directory of
// the test's own, and args; it returns once collect says where it listens.
func startCollector(t *testing.T, listens []string, args ...string) *collector {
	t.Helper()
	dir := t.TempDir()
	c := &collector{out: filepath.Join(dir, "records.jsonl"), summary: filepath.Join(dir, "summary.jsonl")}
	argv := []string{"collect", "--out", c.out, "--summary", c.summary}
	for _, l := range listens {
		argv = append(argv, "--listen", l)
	}
	c.Process = testutil.StartProcess(t, exec.Command(flowdedup(t), append(argv, args...)...), "", 0)
	m := listenLine.FindStringSubmatch(c.WaitLine(t, "listening on ", 20*time.Second))
	if m == nil {
		t.Fatalf("collect's listening line names no address:\n%s", c.stderr())
	}
	for _, u := range strings.Split(m[1], ",") {
		_, hostPort, _ := strings.Cut(u, "://")
		c.addrs = append(c.addrs, hostPort)
	}
	return c
}

func (c *collector) stderr() string { return c.Log() }

var metricsLine = regexp.MustCompile(`metrics on http://(\S+)/metrics`)

// waitDatagrams waits until collect (started with --metrics) has received
// n datagrams, as its flowdedup_collect_datagrams_total says. An exporter
// that has exited has sent its datagrams, but on a loaded machine the
// kernel may hand loopback datagrams to the socket later, from ksoftirqd:
// a collector stopped before they are queued never sees them (its closing
// socket filter drops what comes after the SIGTERM).
func (c *collector) waitDatagrams(t *testing.T, n int) {
	t.Helper()
	m := metricsLine.FindStringSubmatch(c.stderr())
	if m == nil {
		t.Fatalf("collect names no metrics address (start it with --metrics):\n%s", c.stderr())
	}
	url := "http://" + m[1] + "/metrics"
	got := 0
	if !testutil.WaitUntil(time.Minute, func() bool {
		got = int(scrape(t, url, "flowdedup_collect_datagrams_total"))
		return got >= n
	}) {
		t.Fatalf("collect received %d datagrams in a minute, want %d:\n%s", got, n, c.stderr())
	}
}

// stop sends SIGTERM, waits for exit 0, and returns the records.
func (c *collector) stop(t *testing.T) []collected {
	t.Helper()
	if err := c.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("collect: %v\n%s", err, c.stderr())
	}
	return readCollected(t, c.out)
}

// collected is a record of collect's.
type collected struct {
	record
	Exporter string `json:"exporter"`
}

func readCollected(t *testing.T, path string) []collected {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []collected
	for _, l := range lines(string(b)) {
		var r collected
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s: %q: %v", path, l, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// collectSummaries reads collect's summaries: what the tests check of
// them.
type collectSummary struct {
	Packets uint64 `json:"packets"`
	Late    uint64 `json:"late"`
	Dropped uint64 `json:"dropped"`
	Collect struct {
		Datagrams  uint64            `json:"datagrams"`
		Records    uint64            `json:"records"`
		Errors     map[string]uint64 `json:"errors"`
		StartAhead uint64            `json:"start_ahead"`
		Exporters  []struct {
			Exporter string `json:"exporter"`
			Protocol string `json:"protocol"`
			Records  uint64 `json:"records"`
			Lost     uint64 `json:"lost"`
			LostUnit string `json:"lost_unit"`
		} `json:"exporters"`
	} `json:"collect"`
}

func readCollectSummaries(t *testing.T, path string) []collectSummary {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ss []collectSummary
	for _, l := range lines(string(b)) {
		var s collectSummary
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("%s: %q: %v", path, l, err)
		}
		ss = append(ss, s)
	}
	return ss
}

// fiveTuple is what the tests compare of a 5-tuple, as nfdump shows it:
// ports zero for protocols without.
type fiveTuple struct {
	proto        uint8
	src, dst     string
	sport, dport uint16
}

func hasPorts(proto uint8) bool { return proto == 6 || proto == 17 || proto == 132 || proto == 136 }

// nfdumpSets returns the sources and 5-tuples of nfdump's flows.
func nfdumpSets(flows []servers.NfdumpFlow) (map[string]bool, map[fiveTuple]bool) {
	srcs, tuples := map[string]bool{}, map[fiveTuple]bool{}
	for _, f := range flows {
		srcs[f.Src.String()] = true
		ft := fiveTuple{proto: f.Proto, src: f.Src.String(), dst: f.Dst.String()}
		if hasPorts(f.Proto) {
			ft.sport, ft.dport = f.SrcPort, f.DstPort
		}
		tuples[ft] = true
	}
	return srcs, tuples
}

func sameSet[K comparable](t *testing.T, what string, got, want map[K]bool) {
	t.Helper()
	missing, extra := 0, 0
	for k := range want {
		if !got[k] {
			if missing++; missing <= 3 {
				t.Errorf("%s: missing %v", what, k)
			}
		}
	}
	for k := range got {
		if !want[k] {
			if extra++; extra <= 3 {
				t.Errorf("%s: extra %v", what, k)
			}
		}
	}
	if missing+extra > 0 {
		t.Errorf("%s: %d, want %d (%d missing, %d extra)", what, len(got), len(want), missing, extra)
	}
}

// TestCollectSoftflowd is the first check with real exporters:
// softflowd reads each testdata capture and exports it as NetFlow v5, v9
// and IPFIX, once into `flowdedup collect --key src --window 1h`, once
// into collect --key 5tuple, and once into nfdump's nfcapd (softflowd is
// deterministic on a file): the distinct sources and 5-tuples are those
// nfdump decodes. v5 carries IPv4 only, in both.
func TestCollectSoftflowd(t *testing.T) {
	t.Parallel()
	for _, capture := range []string{"small.pcap", "ipv6.pcap"} {
		for _, v := range []int{5, 9, 10} {
			t.Run(fmt.Sprintf("%s/v%d", capture, v), func(t *testing.T) {
				path := pcap(capture)
				nf := servers.StartNfcapd(t)
				testexporter.Softflowd(t, path, nf.Addr, v)
				wantSrcs, wantTuples := nfdumpSets(nf.Flows(t))
				if len(wantSrcs) < 20 {
					t.Fatalf("nfdump has %d sources", len(wantSrcs))
				}

				c := startCollector(t, []string{"netflow://127.0.0.1:0"}, "--key", "src", "--window", "1h", "--metrics", "127.0.0.1:0")
				c.waitDatagrams(t, testexporter.SoftflowdSent(t, testexporter.Softflowd(t, path, c.addrs[0], v)))
				srcs := map[string]bool{}
				for _, r := range c.stop(t) {
					srcs[r.Src] = true
					if r.Exporter != "127.0.0.1#0" {
						t.Fatalf("record of exporter %q", r.Exporter)
					}
				}
				sameSet(t, "sources", srcs, wantSrcs)

				c = startCollector(t, []string{"netflow://127.0.0.1:0"}, "--key", "5tuple", "--window", "1h", "--metrics", "127.0.0.1:0")
				c.waitDatagrams(t, testexporter.SoftflowdSent(t, testexporter.Softflowd(t, path, c.addrs[0], v)))
				tuples := map[fiveTuple]bool{}
				for _, r := range c.stop(t) {
					tuples[fiveTuple{r.Proto, r.Src, r.Dst, r.Sport, r.Dport}] = true
				}
				sameSet(t, "5-tuples", tuples, wantTuples)
				for _, s := range readCollectSummaries(t, c.summary) {
					if s.Late != 0 || s.Dropped != 0 || len(s.Collect.Errors) != 0 {
						t.Errorf("summary: late %d, dropped %d, errors %v", s.Late, s.Dropped, s.Collect.Errors)
					}
				}
			})
		}
	}
}

// TestCollectSFlow: pmacctd's sfprobe plugin samples every packet of a
// capture (sampling_rate 1) and sends sFlow to `flowdedup collect --listen
// sflow://`, and a second sfprobe plugin of the same pmacctd to pmacct's
// own collector sfacctd (aggregate src_host): collect's distinct sources
// are those replay finds in the capture, and include every source sfacctd
// decodes. vlan.pcap: pmacctd 1.7.7 samples none of its 802.1ad (QinQ)
// frames, so there collect's sources are replay's but for the hosts seen
// only in those, and still include sfacctd's.
//
// One pmacctd feeds both (testexporter.SfprobeTo): it sleeps 4 s a run
// whatever the capture, which was most of this test's time.
func TestCollectSFlow(t *testing.T) {
	t.Parallel()
	agent := netip.MustParseAddr("192.0.2.1")
	for _, capture := range []string{"small.pcap", "ipv6.pcap", "vlan.pcap"} {
		t.Run(capture, func(t *testing.T) {
			t.Parallel() // each its own pmacctd, sfacctd and collect: mostly pmacctd's 4 s of sleep
			path := pcap(capture)
			want := map[string]bool{}
			for _, r := range exactRecords(t, "--key", "src", path) {
				want[r.Src] = true
			}
			sf := testexporter.StartSfacctd(t)
			c := startCollector(t, []string{"sflow://127.0.0.1:0"}, "--key", "src", "--window", "1h")
			testexporter.SfprobeTo(t, path, []string{sf.Addr, c.addrs[0]}, agent, 3)
			pm := map[string]bool{}
			for _, a := range sf.Sources(t) {
				pm[a.String()] = true
			}

			got := map[string]bool{}
			for _, r := range c.stop(t) {
				got[r.Src] = true
				if r.Exporter != "192.0.2.1#3" {
					t.Fatalf("record of exporter %q", r.Exporter)
				}
			}
			for s := range pm {
				if !got[s] {
					t.Errorf("sfacctd has source %s, collect does not", s)
				}
			}
			if capture != "vlan.pcap" {
				sameSet(t, "sources", got, want)
				return
			}
			for s := range got {
				if !want[s] {
					t.Errorf("collect has source %s, replay does not", s)
				}
			}
			if len(got) < len(want)/2 {
				t.Errorf("collect has %d of replay's %d sources", len(got), len(want))
			}
			t.Logf("vlan.pcap: replay %d sources, collect %d, sfacctd %d", len(want), len(got), len(pm))
		})
	}
}

// TestCollectFlowdedupExport: edge routers run flowdedup with --export
// ipfix:// (UDP) or ipfix+tcp:// to a central collect: the centre's
// distinct (window, key) set is the edge's. The edge's records of the
// capture's three windows come in any order (its two workers' records
// interleave, and the edge runs through the capture at once), so the
// centre keeps them all open (--lateness 3m).
func TestCollectFlowdedupExport(t *testing.T) {
	for _, scheme := range []string{"ipfix", "ipfix+tcp"} {
		t.Run(scheme, func(t *testing.T) {
			listen := "netflow://127.0.0.1:0"
			if scheme == "ipfix+tcp" {
				listen = "ipfix+tcp://127.0.0.1:0"
			}
			c := startCollector(t, []string{listen}, "--key", "5tuple", "--window", "1m", "--lateness", "3m", "--filter", "exact")
			edge := filepath.Join(t.TempDir(), "edge.jsonl")
			mustRun(t, "replay", "--key", "5tuple", "--window", "1m", "--filter", "exact", "--out", edge,
				"--observation-domain", "5", "--export", scheme+"://"+c.addrs[0], pcap("windows.pcap"))
			if scheme == "ipfix" {
				// UDP: wait until collect has read the edge's last datagram.
				n := len(readRecords(t, edge))
				testutil.WaitFor(t, "collect's records of the edge's", 20*time.Second, func() bool {
					b, _ := os.ReadFile(c.out)
					return strings.Count(string(b), "\n") >= n
				})
			}
			type wk struct {
				window time.Time
				key    fiveTuple
			}
			want, got := map[wk]bool{}, map[wk]bool{}
			for _, r := range readRecords(t, edge) {
				want[wk{r.Window, fiveTuple{r.Proto, r.Src, r.Dst, r.Sport, r.Dport}}] = true
			}
			for _, r := range c.stop(t) {
				got[wk{r.Window, fiveTuple{r.Proto, r.Src, r.Dst, r.Sport, r.Dport}}] = true
				if r.Exporter != "127.0.0.1#5" {
					t.Fatalf("record of exporter %q", r.Exporter)
				}
			}
			if len(want) < 100 {
				t.Fatalf("the edge wrote %d records", len(want))
			}
			sameSet(t, "(window, 5-tuple)", got, want)
		})
	}
}

// TestCollectRelayLoss: softflowd exports through a UDP relay of the
// test's that drops every 10th datagram; collect counts the loss from the
// sequence numbers: datagrams for NetFlow v9, records for IPFIX.
func TestCollectRelayLoss(t *testing.T) {
	capture := gen(t, t.TempDir(), "flows.pcap", "--seed", "41", "--flows", "3000", "--packets", "9000", "--duration", "60s")
	for _, v := range []int{9, 10} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			c := startCollector(t, []string{"netflow://127.0.0.1:0"}, "--key", "src", "--window", "1h")
			relay, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer relay.Close()
			to, err := net.Dial("udp", c.addrs[0])
			if err != nil {
				t.Fatal(err)
			}
			defer to.Close()
			type relayed struct{ passed, dropped, droppedRecords, last int }
			done := make(chan relayed)
			var sent atomic.Bool // softflowd has exited: its datagrams are all queued
			go func() {
				var r relayed
				s := netflow.NewSession(netflow.Limits{})
				var m netflow.Message
				var rec netflow.Record
				buf := make([]byte, 65536)
				for i := 0; ; i++ {
					// Block until softflowd has exited, then read what is
					// queued: an empty queue ends the relay.
					wait := time.Minute
					if sent.Load() {
						wait = 10 * time.Millisecond
					}
					relay.SetReadDeadline(time.Now().Add(wait))
					n, err := relay.Read(buf)
					if err != nil {
						if sent.Load() {
							done <- r
							return
						}
						i--
						continue
					}
					records := 0
					if m.Reset(buf[:n], s) == nil {
						for m.Next(&rec) {
							records++
						}
					}
					if i%10 == 9 {
						r.dropped++
						r.droppedRecords += records
						r.last = i
						continue
					}
					r.passed = i
					to.Write(buf[:n])
				}
			}()
			testexporter.Softflowd(t, capture, relay.LocalAddr().String(), v)
			sent.Store(true)
			relay.SetReadDeadline(time.Now()) // wake a read that waits for more
			r := <-done
			if r.last > r.passed {
				// The last datagram was dropped: nothing after it tells.
				r.dropped--
				r.droppedRecords = -1
			}
			c.stop(t)
			var lost uint64
			unit := ""
			for _, s := range readCollectSummaries(t, c.summary) {
				for _, e := range s.Collect.Exporters {
					lost += e.Lost
					unit = e.LostUnit
				}
			}
			want, wantUnit := uint64(r.dropped), "datagrams"
			if v == 10 {
				want, wantUnit = uint64(r.droppedRecords), "records"
			}
			if r.dropped < 3 || lost != want || unit != wantUnit {
				t.Errorf("collect counts %d %s lost; the relay dropped %d datagrams of %d records", lost, unit, r.dropped, r.droppedRecords)
			}
		})
	}
}

// TestCollectPrefix: with --prefix 24,64 collect's keys are the networks
// of the exporters' sources: those of the sources nfdump decodes from the
// same export, in CIDR text.
func TestCollectPrefix(t *testing.T) {
	path := pcap("small.pcap")
	nf := servers.StartNfcapd(t)
	testexporter.Softflowd(t, path, nf.Addr, 10)
	want := map[string]bool{}
	for _, f := range nf.Flows(t) {
		bits := 24
		if f.Src.Is6() {
			bits = 64
		}
		want[netip.PrefixFrom(f.Src, bits).Masked().String()] = true
	}
	c := startCollector(t, []string{"netflow://127.0.0.1:0"}, "--key", "src", "--prefix", "24,64", "--window", "1h")
	testexporter.Softflowd(t, path, c.addrs[0], 10)
	got := map[string]bool{}
	for _, r := range c.stop(t) {
		got[r.Src] = true
	}
	if len(want) < 5 {
		t.Fatalf("%d networks", len(want))
	}
	sameSet(t, "networks", got, want)
}

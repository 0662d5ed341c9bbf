package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/flowdedup/flowdedup/collect/collecttest"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// goflow2Version is the goflow2 whose collector BenchmarkCollect compares
// with: the module go.mod pins for its decoders.
const goflow2Version = "v2.2.6"

var (
	goflow2Once sync.Once
	goflow2Path string
	goflow2Err  error
)

// goflow2Binary builds goflow2's own collector (cmd/goflow2) at
// goflow2Version with go install, once per test binary.
func goflow2Binary(tb testing.TB) string {
	tb.Helper()
	goflow2Once.Do(func() {
		dir, err := os.MkdirTemp("", "goflow2-")
		if err != nil {
			goflow2Err = err
			return
		}
		cmd := exec.Command("go", "install", "github.com/netsampler/goflow2/v2/cmd/goflow2@"+goflow2Version)
		cmd.Env = append(os.Environ(), "GOBIN="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			goflow2Err = fmt.Errorf("go install goflow2: %v\n%s", err, out)
			return
		}
		goflow2Path = filepath.Join(dir, "goflow2")
	})
	if goflow2Err != nil {
		tb.Fatal(goflow2Err)
	}
	return goflow2Path
}

// benchTarget is a collector under load: where it listens, and how many
// flow records it has taken so far.
type benchTarget struct {
	name    string
	addr    string // UDP, 127.0.0.1:PORT
	port    int
	records func() uint64
}

// scrape sums the samples of a Prometheus metric (name, and every label
// pair of want) at url.
func scrape(tb testing.TB, url, name string, want ...string) uint64 {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name) || (len(l) > len(name) && l[len(name)] != '{' && l[len(name)] != ' ') {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(l, w)
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			tb.Fatalf("metric line %q: %v", l, err)
		}
		sum += v
	}
	return uint64(sum)
}

// udpDrops sums the kernel's drops of the UDP sockets bound to 127.0.0.1
// port (the drops column of /proc/net/udp): datagrams that did not fit in
// their receive buffers.
func udpDrops(tb testing.TB, port int) uint64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		tb.Fatal(err)
	}
	local := fmt.Sprintf("0100007F:%04X", port)
	var drops uint64
	for _, l := range strings.Split(string(b), "\n") {
		fs := strings.Fields(l)
		if len(fs) >= 13 && fs[1] == local {
			n, _ := strconv.ParseUint(fs[12], 10, 64)
			drops += n
		}
	}
	return drops
}

// startBenchCollect starts flowdedup collect for the benchmark.
func startBenchCollect(b *testing.B) *benchTarget {
	port, metrics := testutil.FreeUDPPort(b), freePort(b)
	cmd := exec.Command(flowdedup(b), "collect", "--listen", fmt.Sprintf("netflow://127.0.0.1:%d", port), "--key", "5tuple",
		"--window", "1h", "--out", os.DevNull, "--summary", "", "--metrics", fmt.Sprintf("127.0.0.1:%d", metrics))
	startDaemon(b, cmd)
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	testutil.WaitFor(b, "collect's metrics", 20*time.Second, func() bool { _, err := http.Get(url); return err == nil })
	return &benchTarget{name: "collect", addr: fmt.Sprintf("127.0.0.1:%d", port), port: port,
		records: func() uint64 { return scrape(b, url, "flowdedup_packets_total") }}
}

// startGoflow2 starts goflow2's collector: its default decoding and
// producer, one socket and two workers (the cores) that block rather than
// drop, and its fastest output format (protobuf) to /dev/null. It has no
// option for its socket's receive buffer: it reads with the kernel's
// default (net.core.rmem_default, 208 KiB here), where collect forces
// 32 MiB (--rcvbuf).
func startGoflow2(b *testing.B) *benchTarget {
	port, metrics := testutil.FreeUDPPort(b), freePort(b)
	cmd := exec.Command(goflow2Binary(b), "-listen", fmt.Sprintf("netflow://127.0.0.1:%d?count=1&workers=2&blocking=true", port),
		"-format", "bin", "-transport", "file", "-transport.file", os.DevNull, "-addr", fmt.Sprintf("127.0.0.1:%d", metrics), "-loglevel", "error")
	startDaemon(b, cmd)
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	testutil.WaitFor(b, "goflow2's metrics", 20*time.Second, func() bool { _, err := http.Get(url); return err == nil })
	return &benchTarget{name: "goflow2", addr: fmt.Sprintf("127.0.0.1:%d", port), port: port,
		records: func() uint64 {
			return scrape(b, url, "goflow2_flow_process_nf_flowset_records_total", `type="DataFlowSet"`)
		}}
}

func startDaemon(b *testing.B, cmd *exec.Cmd) {
	cmd.Stdout = io.Discard
	testutil.StartProcess(b, cmd, "", 0)
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// send sends msgs (of perMsg records each) to addr, over and over, paced
// at rate records/s for d, in batches of sendmmsg(2), and returns the
// records sent and the rate achieved (lower than asked when the sender
// does not get the CPU it needs).
func send(tb testing.TB, addr string, msgs [][]byte, perMsg int, rate float64, d time.Duration) (uint64, float64) {
	tb.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	pc := ipv4.NewPacketConn(c.(*net.UDPConn))
	const batch = 16 // about 22 KiB at once: a tenth of the kernel's default socket buffer
	ms := make([]ipv4.Message, batch)
	perDatagram := time.Duration(float64(time.Second) * float64(perMsg) / rate)
	start := time.Now()
	sent, i := 0, 0
	for time.Since(start) < d {
		due := start.Add(time.Duration(sent+batch) * perDatagram)
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		for j := range ms {
			ms[j].Buffers = [][]byte{msgs[i]}
			i = (i + 1) % len(msgs)
		}
		for k := 0; k < batch; {
			n, err := pc.WriteBatch(ms[k:], 0)
			if err != nil {
				tb.Fatalf("sendmmsg: %v", err)
			}
			k += n
		}
		sent += batch
	}
	return uint64(sent * perMsg), float64(sent*perMsg) / time.Since(start).Seconds()
}

// trialResult is what a trial measured.
type trialResult struct {
	lossFree          bool
	took, sent, drops uint64
	achieved          float64 // records/s sent
}

// trial sends at rate to t for d and reports whether t took every record
// without a drop, and how many records it took.
func trial(b *testing.B, t *benchTarget, msgs [][]byte, perMsg int, rate float64, d time.Duration) trialResult {
	r0, d0 := t.records(), udpDrops(b, t.port)
	sent, achieved := send(b, t.addr, msgs, perMsg, rate, d)
	// Wait for the collector to take what is queued: until it has taken
	// everything, or nothing more for a second.
	last, lastChange := t.records(), time.Now()
	for last-r0 < sent && time.Since(lastChange) < time.Second {
		time.Sleep(20 * time.Millisecond)
		if n := t.records(); n != last {
			last, lastChange = n, time.Now()
		}
	}
	took, drops := last-r0, udpDrops(b, t.port)-d0
	return trialResult{took == sent && drops == 0, took, sent, drops, achieved}
}

// BenchmarkCollect finds the highest rate, in flow records per second,
// that flowdedup collect and goflow2's own collector (cmd/goflow2 at
// goflow2Version, protobuf to /dev/null) each take with no loss: every
// record decoded, no datagram dropped by the kernel. A sender in the
// benchmark replays pre-encoded NetFlow v9 and IPFIX datagrams of 30
// records (about 1,400 bytes, the fields softflowd exports, a fifth IPv6)
// on loopback, paced, for 2 s a trial. The rates are searched (doubling
// from 250,000/s, then bisecting to within 10%) for both collectors at
// once, their trials interleaved, so that a change of the machine's load
// affects both alike. Run it under the benchmark lock:
//
//	flock /tmp/flowdedup-bench.lock go test -run '^$' -bench Collect -benchtime 1x ./e2e/
//
// Metrics: collect-v9-rec/s, goflow2-v9-rec/s, collect-ipfix-rec/s,
// goflow2-ipfix-rec/s (the highest rate sent in a loss-free trial), the
// ratios collect/goflow2, and *-most-rec/s, the most records/s each took
// in any trial, losing some or not.
func BenchmarkCollect(b *testing.B) {
	now := time.Now().Truncate(time.Second)
	flows := collecttest.Flows(90_000, 17, now)
	const perMsg = 30
	protocols := []struct {
		name string
		e    collecttest.Exporter
	}{
		{"v9", collecttest.Exporter{Version: 9, Boot: now.Add(-time.Hour), TemplateEvery: 100}},
		{"ipfix", collecttest.Exporter{Version: 10, Boot: now.Add(-time.Hour), Absolute: true, TemplateEvery: 100}},
	}
	for b.Loop() {
		for _, p := range protocols {
			e := p.e
			msgs := e.Encode(now, flows, perMsg)
			targets := []*benchTarget{startBenchCollect(b), startGoflow2(b)}
			best, most := searchRates(b, targets, msgs, perMsg)
			b.ReportMetric(best[0], "collect-"+p.name+"-rec/s")
			b.ReportMetric(best[1], "goflow2-"+p.name+"-rec/s")
			b.ReportMetric(best[0]/best[1], "collect/goflow2-"+p.name)
			b.ReportMetric(most[0], "collect-"+p.name+"-most-rec/s")
			b.ReportMetric(most[1], "goflow2-"+p.name+"-most-rec/s")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// searchRates searches each target's highest loss-free rate, trials of
// the targets interleaved. It returns, for each, the highest rate achieved
// in a loss-free trial (the sender's, which may fall short of the rate
// asked on a busy machine), and the most records/s it took in any trial,
// losing some or not.
func searchRates(b *testing.B, targets []*benchTarget, msgs [][]byte, perMsg int) (best, most []float64) {
	const trialTime = 2 * time.Second
	lo := make([]float64, len(targets)) // the highest rate asked without loss
	hi := make([]float64, len(targets)) // the lowest with loss; 0: none yet
	done := make([]bool, len(targets))
	best, most = make([]float64, len(targets)), make([]float64, len(targets))
	// Warm up: templates and caches, then a first rate.
	for _, t := range targets {
		trial(b, t, msgs, perMsg, 10_000, 500*time.Millisecond)
	}
	for step := 0; step < 12; step++ {
		for i, t := range targets {
			if done[i] {
				continue
			}
			rate := 250_000.0
			switch {
			case hi[i] == 0 && lo[i] > 0:
				rate = 2 * lo[i]
			case hi[i] > 0:
				rate = (lo[i] + hi[i]) / 2
			}
			r := trial(b, t, msgs, perMsg, rate, trialTime)
			b.Logf("%s: %.0f records/s asked, %.0f sent: loss-free %v: took %d of %d records, the kernel dropped %d datagrams",
				t.name, rate, r.achieved, r.lossFree, r.took, r.sent, r.drops)
			most[i] = max(most[i], float64(r.took)/trialTime.Seconds())
			if r.lossFree {
				lo[i] = rate
				best[i] = max(best[i], r.achieved)
			} else {
				hi[i] = rate
			}
			done[i] = hi[i] > 0 && (hi[i]-lo[i])/hi[i] < 0.1
		}
	}
	return best, most
}

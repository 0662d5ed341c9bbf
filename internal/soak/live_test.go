//go:build linux

package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/gen"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/netns"
)

// The live soak: `flowdedup run --mode afpacket` with wall-clock windows
// of 30s on one end of a veth pair in a namespace the test makes, fed
// through the other end by tcpreplay --loop --unique-ip at 20000 frames/s
// for the soak's duration (every loop rewrites the addresses, so every
// window sees new flows, as a router's does). Every 5 seconds the test
// scrapes process_resident_memory_bytes and go_goroutines from --metrics.
// After the warm-up, resident memory must stay within 10% and the
// goroutine count flat (goroutinesFlat); packets must be read in every
// interval; and when tcpreplay is done every frame it sent must be
// counted: read (the summaries' packets) or dropped by the kernel.
//
// It runs only when asked (FLOWDEDUP_SOAK=long: 10 minutes, or
// -soak.live=D, at least 5 minutes): its memory is only steady after the
// Go runtime's first GC cycles under traffic, which take minutes (below),
// so a run short enough for CI would measure the warm-up, not a leak.
// internal/cli's live tests check the live modes' counts in CI.
//
// afpacket is the mode soaked: every frame crosses into user space and
// through the pipeline's rings, workers and filters, so it is the mode
// with the most user-space work per packet for a leak to hide in; xdp
// hands user space only the keys its prefilter has not seen.
func TestLiveSoak(t *testing.T) {
	if !long() && *flagLive == 0 {
		t.Skipf("live soak: 10 minutes of traffic; runs with %s=long or -soak.live=D", longEnv)
	}
	dur := pick(*flagLive, 10*time.Minute, 10*time.Minute)
	if dur < 5*time.Minute {
		t.Fatalf("-soak.live %v: want at least 5m, to see the memory after its warm-up", dur)
	}
	interval := 5 * time.Second
	if _, err := exec.LookPath("tcpreplay"); err != nil {
		testutil.SkipOrFail(t, "tcpreplay not installed (Debian package tcpreplay; .ci/run installs it)")
	}
	ns := netns.NetNS(t)
	if ns.Name == "" {
		testutil.SkipOrFail(t, "the test namespace has no name, so `ip netns exec` cannot enter it")
	}
	bin := buildFlowdedup(t)
	dir := t.TempDir()

	// 20000 frames over 5000 flows, a quarter IPv6, a few malformed: one
	// loop a second at the rate below.
	pcap := filepath.Join(dir, "soak.pcap")
	f, err := os.Create(pcap)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gen.Write(f, gen.Config{Packets: 20000, Flows: 5000, IPv6: 0.25, Malformed: 0.01, Duration: time.Second, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	f.Close()

	sumPath := filepath.Join(dir, "summary.jsonl")
	fd := exec.Command("ip", "netns", "exec", ns.Name, bin, "run", "--iface", ns.Veth[0], "--mode", "afpacket",
		"--key", "5tuple", "--window", "30s", "--workers", "2", "--metrics", "127.0.0.1:0",
		"--summary", sumPath, "--out", "/dev/null")
	proc := testutil.StartProcess(t, fd, "capturing on", 20*time.Second)
	url := metricsURL(t, proc, time.Second)
	// ip netns exec execs the command: the pid is flowdedup's.
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", fd.Process.Pid)); strings.TrimSpace(string(comm)) != "flowdedup" {
		t.Fatalf("process %d is %q, not flowdedup", fd.Process.Pid, comm)
	}

	// The metrics listen on the namespace's loopback: connect from a
	// thread inside it.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := ns.Do(func() (err error) {
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}}

	// The sender is pinned to one CPU, as in internal/cli's live tests.
	const pps = 20000
	send := exec.Command("ip", "netns", "exec", ns.Name, "taskset", "-c", "0", "tcpreplay", "-i", ns.Veth[1],
		"--loop", "0", "--unique-ip", "--pps", strconv.Itoa(pps), "--duration", strconv.Itoa(int(dur.Seconds())), pcap)
	var sendOut strings.Builder
	send.Stdout, send.Stderr = &sendOut, &sendOut
	if err := send.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { send.Process.Kill() })
	sent := make(chan error, 1)
	go func() { sent <- send.Wait() }()

	type point struct {
		at                  time.Duration
		rss, goroutines     float64
		anon, heap          float64 // RssAnon (the rings are not anonymous memory), go_memstats_heap_inuse_bytes
		gcs                 float64 // go_gc_duration_seconds_count: GC cycles completed
		packets, drops, win float64
	}
	var series []point
	start := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	limit := time.NewTimer(dur + time.Minute)
	defer limit.Stop()
	var sendErr error
wait:
	for {
		select {
		case sendErr = <-sent:
			break wait
		case <-tick.C:
			m, err := scrapeSteady(client, url, 3)
			if err != nil {
				t.Fatalf("scrape: %v\n%s", err, proc.Log())
			}
			anon, err := procStatus(fd.Process.Pid, "RssAnon")
			if err != nil {
				t.Fatal(err)
			}
			p := point{at: time.Since(start), rss: m["process_resident_memory_bytes"], goroutines: m["go_goroutines"],
				anon: float64(anon), heap: m["go_memstats_heap_inuse_bytes"], gcs: m["go_gc_duration_seconds_count"],
				packets: m["flowdedup_packets_total"], drops: m["flowdedup_dropped_total"], win: m["flowdedup_windows_closed_total"]}
			series = append(series, p)
			if testing.Verbose() && len(series)%12 == 0 {
				t.Logf("%4.0fs: RSS %s (anonymous %s, Go heap in use %s), %v goroutines, %.0f packets, %.0f dropped, %.0f windows closed, %.0f GC cycles",
					p.at.Seconds(), mib(uint64(p.rss)), mib(uint64(p.anon)), mib(uint64(p.heap)), p.goroutines, p.packets, p.drops, p.win, p.gcs)
			}
		case <-limit.C:
			t.Fatalf("tcpreplay still running %v after it was told to stop at %v:\n%s", time.Since(start), dur, sendOut.String())
		}
	}
	if sendErr != nil {
		t.Fatalf("tcpreplay: %v\n%s", sendErr, sendOut.String())
	}
	total := sentPackets(t, sendOut.String())

	// Everything sent is read or counted as dropped: wait for the last
	// frames to be read, then stop flowdedup, which writes its last
	// window.
	testutil.WaitUntil(30*time.Second, func() bool {
		m, err := scrape(context.Background(), client, url)
		if err != nil {
			t.Fatal(err)
		}
		return m["flowdedup_packets_total"]+m["flowdedup_dropped_total"] >= float64(total)
	})
	if err := fd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := proc.Wait(t, time.Minute); err != nil {
		t.Fatalf("flowdedup run after SIGINT: %v\n%s", err, proc.Log())
	}
	peak := uint64(fd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) << 10
	var packets, kernelDrops, ringDrops, malformed, windows uint64
	sums, err := os.ReadFile(sumPath)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(sums)) {
		var s struct {
			Packets, Malformed uint64
			DroppedBy          map[string]uint64 `json:"dropped_by"`
		}
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("summary %q: %v", line, err)
		}
		packets += s.Packets
		malformed += s.Malformed
		kernelDrops += s.DroppedBy["kernel"]
		ringDrops += s.DroppedBy["ring_full"]
		windows++
	}
	t.Logf("live soak: %v of traffic, %d frames sent (%d pps asked), %d read (%d malformed), %d dropped by the kernel, %d keys dropped on full rings, %d windows; peak RSS %s",
		dur, total, pps, packets, malformed, kernelDrops, ringDrops, windows, mib(peak))
	if packets+kernelDrops != total {
		t.Errorf("%d frames read + %d dropped by the kernel = %d, tcpreplay sent %d", packets, kernelDrops, packets+kernelDrops, total)
	}

	// The warm-up lasts until the Go runtime has completed two GC cycles
	// under traffic and a minute (two windows) has passed. What the
	// process allocates in steady state is little (mostly the scrapes'
	// own garbage, about 100 KB each), so its heap seldom reaches the
	// pacer's goal (twice the live heap); the runtime forces a cycle every
	// 2 minutes, and until a few cycles have run, the heap's spans, which
	// a cycle leaves resident for reuse, still grow towards the size that
	// one period's garbage needs. Measured here: anonymous RSS grew by 8
	// to 9 MiB over the first 5 minutes and by 0.1 to 0.6 MiB over the
	// next 5 (two runs).
	warm := -1
	for i, p := range series {
		if p.gcs >= series[0].gcs+2 && p.at >= time.Minute {
			warm = i
			break
		}
	}
	for i, p := range series {
		if i > 0 && p.packets <= series[i-1].packets {
			t.Errorf("no packet read between %.0fs and %.0fs (%.0f both times): the capture stalled", series[i-1].at.Seconds(), p.at.Seconds(), p.packets)
		}
	}
	left := 0
	if warm >= 0 {
		left = len(series) - warm
	}
	if left < 12 {
		t.Fatalf("the warm-up (two GC cycles, a minute) left %d of %d samples, want at least 12 (a minute): run longer", left, len(series))
	}
	steady := series[warm:]
	lo, hi := steady[0], steady[0]
	var goroutines []float64
	for _, p := range steady {
		if p.rss < lo.rss {
			lo = p
		}
		if p.rss > hi.rss {
			hi = p
		}
		goroutines = append(goroutines, p.goroutines)
	}
	last := series[len(series)-1]
	t.Logf("live soak series: %d samples every %v; warm-up %.0fs (%.0f GC cycles); then RSS %s (at %.0fs) to %s (at %.0fs), anonymous %s to %s, Go heap in use %s to %s, goroutines %v to %v; RSS at the first sample %s",
		len(series), interval, steady[0].at.Seconds(), steady[0].gcs-series[0].gcs, mib(uint64(lo.rss)), lo.at.Seconds(), mib(uint64(hi.rss)), hi.at.Seconds(),
		mib(uint64(minOf(steady, func(p point) float64 { return p.anon }))), mib(uint64(maxOf(steady, func(p point) float64 { return p.anon }))),
		mib(uint64(minOf(steady, func(p point) float64 { return p.heap }))), mib(uint64(maxOf(steady, func(p point) float64 { return p.heap }))),
		minOf(steady, func(p point) float64 { return p.goroutines }), maxOf(steady, func(p point) float64 { return p.goroutines }), mib(uint64(series[0].rss)))
	t.Logf("live soak at the last sample: %.0f packets read, %.0f dropped, %.0f windows closed, %.0f GC cycles", last.packets, last.drops, last.win, last.gcs)
	// 10%: after the warm-up, what moves RSS is the heap's place in its
	// cycle (a few MiB on about 115 MiB, of which 64 MiB are the two
	// sockets' rings); a leak grows with the 12 million packets or the
	// 20 windows of a 10-minute run and does not level off.
	if hi.rss > 1.10*lo.rss {
		t.Errorf("RSS went from %s to %s after the warm-up: more than 10%%", mib(uint64(lo.rss)), mib(uint64(hi.rss)))
	}
	if err := goroutinesFlat(goroutines); err != nil {
		t.Errorf("goroutines after the warm-up: %v", err)
	}
}

func minOf[T any](s []T, f func(T) float64) float64 {
	m := math.Inf(1)
	for _, v := range s {
		m = min(m, f(v))
	}
	return m
}

func maxOf[T any](s []T, f func(T) float64) float64 {
	m := math.Inf(-1)
	for _, v := range s {
		m = max(m, f(v))
	}
	return m
}

// sentPackets reads the packets tcpreplay says it sent ("Actual: N
// packets (...) sent in ...").
func sentPackets(t *testing.T, out string) uint64 {
	t.Helper()
	m := regexp.MustCompile(`Actual: (\d+) packets`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("tcpreplay printed no packet count:\n%s", out)
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n
}

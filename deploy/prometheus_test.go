//go:build linux

package deploy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/collect/collecttest"
	"github.com/flowdedup/flowdedup/internal/cli"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// The Prometheus rules shipped in deploy/prometheus (README.md there).
var (
	rulesFile     = filepath.Join("prometheus", "flowdedup.rules.yml")
	rulesTestFile = filepath.Join("prometheus", "flowdedup.rules.test.yml")
)

// TestPrometheusRules: the shipped rules pass promtool check rules, and
// their unit tests (each alert firing and not firing on series made by
// hand) pass promtool test rules.
func TestPrometheusRules(t *testing.T) {
	needCommand(t, "promtool", "prometheus")
	for _, args := range [][]string{
		{"check", "rules", filepath.Base(rulesFile)},
		{"test", "rules", filepath.Base(rulesTestFile)},
	} {
		cmd := exec.Command("promtool", args...)
		cmd.Dir = "prometheus" // the test file names the rules file beside it
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if !strings.Contains(string(out), "SUCCESS") {
			t.Fatalf("promtool %s says no SUCCESS:\n%s", strings.Join(args, " "), out)
		}
	}
}

// ruleExprMetrics returns the flowdedup_ metric names that the expr fields
// of the rules file name (one-line expr: values and | blocks).
func ruleExprMetrics(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	exprLine := regexp.MustCompile(`^(\s*)expr:\s*(.*)$`)
	name := regexp.MustCompile(`\bflowdedup_\w+`)
	var names []string
	var exprs int
	block, indent := false, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if block {
			trimmed := strings.TrimLeft(line, " ")
			if trimmed == "" || len(line)-len(trimmed) > indent {
				names = append(names, name.FindAllString(line, -1)...)
				continue
			}
			block = false
		}
		if m := exprLine.FindStringSubmatch(line); m != nil {
			exprs++
			if v := strings.TrimSpace(m[2]); v == "|" || v == ">" || v == "|-" || v == ">-" {
				block, indent = true, len(m[1])
				continue
			}
			names = append(names, name.FindAllString(m[2], -1)...)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if exprs < 10 {
		t.Fatalf("%s: %d expr fields read, want the 13 rules'", path, exprs)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// TestPrometheusRuleMetricsExist: every flowdedup_ metric a rule's expr
// names is one that flowdedup registers. A flowdedup collect runs in this
// process (cli.Main) with --metrics and an --export, is sent IPFIX records
// of two windows on loopback so that the first closes (the window gauges
// and the per-exporter families then have samples), and its /metrics is
// read: each name must have a # TYPE line there. A misspelt or renamed
// metric in the rules fails here rather than in an alert that never fires.
func TestPrometheusRuleMetricsExist(t *testing.T) {
	want := ruleExprMetrics(t, rulesFile)
	if len(want) < 8 {
		t.Fatalf("the rules name %d flowdedup_ metrics: %v", len(want), want)
	}

	sink, err := net.ListenPacket("udp", "127.0.0.1:0") // the export's destination; reads nothing
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stderr := &testutil.SyncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"collect", "--listen", "netflow://127.0.0.1:0", "--key", "src", "--window", "1m",
			"--filter", "exact", "--out", os.DevNull, "--summary", filepath.Join(dir, "summary.jsonl"),
			"--metrics", "127.0.0.1:0", "--export", "ipfix://" + sink.LocalAddr().String()}, io.Discard, stderr)
	}()
	listenRe := regexp.MustCompile(`listening on netflow://(\S+) \(`)
	metricsRe := regexp.MustCompile(`metrics on (http://\S+/metrics)`)
	var listen, metrics string
	testutil.WaitFor(t, "collect's listening and metrics lines", time.Minute, func() bool {
		select {
		case code := <-done:
			t.Fatalf("collect exited %d:\n%s", code, stderr.String())
		default:
		}
		l, m := listenRe.FindStringSubmatch(stderr.String()), metricsRe.FindStringSubmatch(stderr.String())
		if l == nil || m == nil {
			return false
		}
		listen, metrics = l[1], m[1]
		return true
	})

	conn, err := net.Dial("udp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, msg := range twoWindows() {
		if _, err := conn.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	var page string
	testutil.WaitFor(t, "flowdedup_window_distinct on collect's /metrics", time.Minute, func() bool {
		page = scrape(t, metrics)
		return strings.Contains(page, "\nflowdedup_collect_exporter_window_distinct{")
	})
	registered := map[string]bool{}
	for _, line := range strings.Split(page, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			registered[f[2]] = true
		}
	}
	for _, name := range want {
		if !registered[name] {
			t.Errorf("the rules name %s, which flowdedup collect does not register", name)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != cli.ExitOK {
			t.Fatalf("collect exited %d:\n%s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("collect did not stop within a minute of its context's end:\n%s", stderr.String())
	}
	if t.Failed() {
		t.Logf("rules' metrics %v\n/metrics:\n%s", want, page)
	}
}

// twoWindows returns IPFIX messages of one exporter: flows starting in the
// minute from 2020-01-01T00:00:00Z, far behind the wall clock so that
// collect windows them by their own times, then one starting two minutes
// later, past the first window's end and its lateness (one window), which
// closes it.
func twoWindows() [][]byte {
	t0 := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	var flows []collecttest.Flow
	for i := range 20 {
		start := t0.Add(time.Duration(i) * time.Second)
		flows = append(flows, collecttest.Flow{Src: netip.AddrFrom4([4]byte{10, 1, 0, byte(1 + i%10)}), Dst: netip.MustParseAddr("10.2.0.1"),
			Proto: 17, SrcPort: 5000, DstPort: 53, Start: start, End: start.Add(time.Second), Packets: 1, Bytes: 80})
	}
	late := t0.Add(2*time.Minute + time.Second)
	e := collecttest.Exporter{Version: 10, Domain: 3, Absolute: true, Boot: t0.Add(-time.Hour)}
	msgs := e.Encode(t0.Add(time.Minute), flows, 10)
	return append(msgs, e.Encode(late.Add(time.Second), []collecttest.Flow{{Src: netip.MustParseAddr("10.1.9.9"), Dst: netip.MustParseAddr("10.2.0.1"),
		Proto: 17, SrcPort: 5000, DstPort: 53, Start: late, End: late.Add(time.Second), Packets: 1, Bytes: 80}}, 10)...)
}

// scrape returns the exposition at url ("" while it cannot be read).
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(b)
}

//go:build linux && !(mips || mips64 || ppc64 || s390x)

package cli

import (
	"encoding/binary"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/collect/collecttest"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

func TestCollectUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"collect"},
		{"collect", "--listen", "udp://127.0.0.1:2055"},
		{"collect", "--listen", "netflow://127.0.0.1"},
		{"collect", "--listen", "netflow://127.0.0.1:2055", "--allow", "10.0.0.0/33"},
		{"collect", "--listen", "netflow://127.0.0.1:2055", "--allow", "nowhere"},
		{"collect", "--listen", "netflow://127.0.0.1:2055", "--rcvbuf", "lots"},
		{"collect", "--listen", "netflow://127.0.0.1:2055", "--rcvbuf", "4GiB"},
		{"collect", "--listen", "netflow://127.0.0.1:2055", "--sockets", "-1"},
		{"collect", "--listen", "netflow://127.0.0.1:2055", "--key", "mac"},
		{"collect", "--listen", "netflow://127.0.0.1:2055", "capture.pcap"},
		{"collect", "--listen", "netflow://127.0.0.1:2055", "--lateness", "5s"},
		{"collect", "--listen", "netflow://127.0.0.1:2055", "--template-memory", "1KiB"},
		{"collect", "--listen", "netflow://127.0.0.1:2055", "--max-clock-ahead", "0s"},
	} {
		code, _, errs := run(args...)
		if code != ExitUsage || errs == "" {
			t.Errorf("%q: exit %d, stderr %q; want %d and a message", args, code, errs, ExitUsage)
		}
	}
}

// collectProc is a running `flowdedup collect`.
type collectProc struct {
	*testutil.Process
	addr string // the UDP address it listens on
	// conns holds each exporter's socket: its templates are of its
	// transport session (address and port), as a router's are.
	conns map[*collecttest.Exporter]net.Conn
}

var listening = regexp.MustCompile(`listening on netflow://(\S+?)[, ]`)

// startCollect starts `flowdedup collect --listen netflow://127.0.0.1:0
// ARGS` and returns once it says where it listens.
func startCollect(t *testing.T, args ...string) *collectProc {
	t.Helper()
	c := &collectProc{}
	c.Process = testutil.StartProcess(t, exec.Command(buildBinary(t), append([]string{"collect", "--listen", "netflow://127.0.0.1:0"}, args...)...), "", 0)
	m := listening.FindStringSubmatch(c.WaitLine(t, "listening on netflow://", time.Minute))
	if m == nil {
		t.Fatalf("collect's listening line names no address\n%s", c.log())
	}
	c.addr = m[1]
	return c
}

func (c *collectProc) log() string { return c.Log() }

// send sends the messages of flows, as exporter e, to the collector.
func (c *collectProc) send(t *testing.T, e *collecttest.Exporter, flows []collecttest.Flow) {
	t.Helper()
	conn := c.conns[e]
	if conn == nil {
		var err error
		if conn, err = net.Dial("udp", c.addr); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if c.conns == nil {
			c.conns = map[*collecttest.Exporter]net.Conn{}
		}
		c.conns[e] = conn
	}
	for _, m := range e.Encode(time.Now().Truncate(time.Second), flows, 30) {
		if _, err := conn.Write(m); err != nil {
			t.Fatal(err)
		}
	}
}

// midHour returns the latest half past the hour at or before now. Flows
// ending then (collecttest.Flows starts them up to a minute earlier) fall
// in one --window 1h window at whatever time of day the test runs (flows
// ending now would straddle two in the first minute of an hour), and that
// window is still open: collect keeps a window open for its lateness, by
// default the window's length, after it ends.
func midHour(now time.Time) time.Time {
	t := now.Truncate(time.Hour).Add(30 * time.Minute)
	if t.After(now) {
		t = t.Add(-time.Hour)
	}
	return t
}

// stop sends sig and waits for the exit.
func (c *collectProc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.Stop(t, sig, time.Minute); err != nil {
		t.Fatalf("collect exited with %v after %v, want 0\n%s", err, sig, c.log())
	}
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestCollectDaemon runs collect as a daemon: records reach --out as they
// come, SIGHUP reopens it (at its next write) after it is moved away, and
// SIGTERM (or SIGINT)
// flushes the last window, its summary with the exporters' counts, and
// exits 0.
func TestCollectDaemon(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			out, sum := filepath.Join(dir, "sources.jsonl"), filepath.Join(dir, "summary.jsonl")
			c := startCollect(t, "--key", "src", "--window", "1h", "--out", out, "--summary", sum)
			end := midHour(time.Now())
			e := &collecttest.Exporter{Version: 9, Boot: end.Add(-time.Hour), Domain: 7}
			flows := collecttest.Flows(100, 1, end)
			c.send(t, e, flows[:50])
			want := map[string]bool{}
			for _, f := range flows {
				want[f.Src.String()] = true
			}
			first := map[string]bool{}
			for _, f := range flows[:50] {
				first[f.Src.String()] = true
			}
			testutil.WaitFor(t, "the first records in --out", time.Minute, func() bool { return len(lines(t, out)) == len(first) })
			moved := out + ".1"
			if err := os.Rename(out, moved); err != nil {
				t.Fatal(err)
			}
			c.Cmd.Process.Signal(syscall.SIGHUP)
			testutil.WaitFor(t, "SIGHUP taken", time.Minute, func() bool { return strings.Contains(c.log(), "reopening "+out) })
			c.send(t, e, flows[50:])
			c.stop(t, sig)
			got := map[string]bool{}
			for _, path := range []string{moved, out} {
				for _, l := range lines(t, path) {
					var r struct{ Src, Exporter string }
					if err := json.Unmarshal([]byte(l), &r); err != nil {
						t.Fatal(err)
					}
					if r.Exporter != "127.0.0.1#7" || got[r.Src] {
						t.Errorf("record %s: exporter or repeat", l)
					}
					got[r.Src] = true
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d sources, want %d", len(got), len(want))
			}
			s := lines(t, sum)
			if len(s) == 0 {
				t.Fatalf("no summary\n%s", c.log())
			}
			// The flows fall in one window (midHour), which need not be the
			// last: the last is the one open at the stop. Sum them all.
			var packets, distinct uint64
			exporters := map[string]bool{}
			for i, line := range s {
				var w struct {
					Final   bool
					Packets uint64
					Collect struct {
						Exporters []struct {
							Exporter string
							Distinct uint64
						}
					}
				}
				if err := json.Unmarshal([]byte(line), &w); err != nil {
					t.Fatal(err)
				}
				if w.Final != (i == len(s)-1) {
					t.Errorf("summary %d of %d: final %v", i+1, len(s), w.Final)
				}
				packets += w.Packets
				for _, e := range w.Collect.Exporters {
					exporters[e.Exporter] = true
					distinct += e.Distinct
				}
			}
			if packets != 100 || len(exporters) != 1 || !exporters["127.0.0.1#7"] || distinct != uint64(len(want)) {
				t.Errorf("summaries: %d packets, exporters %v with %d distinct; want 100, 127.0.0.1#7 with %d:\n%s", packets, exporters, distinct, len(want), strings.Join(s, "\n"))
			}
			if !strings.Contains(c.log(), "collect: datagrams 4, records 100, errors 0, exporters 1, kernel drops 0") {
				t.Errorf("no collect totals line:\n%s", c.log())
			}
		})
	}
}

// A window no exporter sent anything in says so with an empty list of
// exporters, as its errors with an empty map: a reader iterating over
// .collect.exporters (jq '.collect.exporters[]') needs no case for null.
func TestCollectQuietWindowListsNoExporters(t *testing.T) {
	t.Parallel()
	sum := filepath.Join(t.TempDir(), "summary.jsonl")
	c := startCollect(t, "--out", os.DevNull, "--summary", sum)
	c.stop(t, syscall.SIGTERM)
	s := lines(t, sum)
	if len(s) != 1 || !strings.Contains(s[0], `"collect":{"datagrams":0,"records":0,"start_ahead":0,"errors":{},"exporters":[]}`) {
		t.Errorf("summaries of a quiet run: %q", s)
	}
}

// TestCollectBadTimes: a NetFlow v5 record of 1 ms before 1970 (header
// unix_secs 0, sysUptime 1, First 0) and an IPFIX record of
// flowStartMilliseconds 2^64-1 (issue 25, item 1) are counted as
// bad_time and keyed with their arrival; collect, writing summaries to a
// time pattern, goes on and keys the records after them.
func TestCollectBadTimes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "sources.jsonl")
	c := startCollect(t, "--key", "src", "--window", "1m", "--out", out, "--summary", filepath.Join(dir, "sum-%Y%m%d.jsonl"))
	conn, err := net.Dial("udp", c.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	v5 := make([]byte, 24+48)
	binary.BigEndian.PutUint16(v5, 5)
	binary.BigEndian.PutUint16(v5[2:], 1)
	binary.BigEndian.PutUint32(v5[4:], 1) // sysUptime 1, unix_secs 0, First 0
	copy(v5[24:], []byte{10, 7, 0, 1, 10, 7, 0, 2})
	// IPFIX: a template of sourceIPv4Address and flowStartMilliseconds,
	// one record starting at 2^64-1 ms.
	ipfix := []byte{0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
		0, 2, 0, 16, 1, 0, 0, 2, 0, 8, 0, 4, 0, 152, 0, 8,
		1, 0, 0, 16, 10, 7, 0, 3, 255, 255, 255, 255, 255, 255, 255, 255}
	binary.BigEndian.PutUint16(ipfix[2:], uint16(len(ipfix)))
	for _, m := range [][]byte{v5, ipfix} {
		if _, err := conn.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "the two records in --out", time.Minute, func() bool { return len(lines(t, out)) == 2 })
	e := &collecttest.Exporter{Version: 9, Boot: time.Now().Add(-time.Hour), Domain: 7}
	flows := collecttest.Flows(20, 3, time.Now().Truncate(time.Second))
	c.send(t, e, flows)
	testutil.WaitFor(t, "the later records in --out", time.Minute, func() bool { return len(lines(t, out)) >= 2+10 })
	c.stop(t, syscall.SIGTERM) // fails the test unless collect exits 0
	if !strings.Contains(c.log(), "bad_time 2") {
		t.Errorf("no bad_time 2 in the totals:\n%s", c.log())
	}
	sums, _ := filepath.Glob(filepath.Join(dir, "sum-*.jsonl"))
	if len(sums) == 0 || strings.Contains(strings.Join(sums, " "), "sum-1969") || strings.Contains(strings.Join(sums, " "), "sum-1970") {
		t.Errorf("summary files %q", sums)
	}
}

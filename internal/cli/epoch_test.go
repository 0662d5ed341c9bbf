//go:build linux && !(mips || mips64 || ppc64 || s390x)

package cli

import (
	"encoding/binary"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// v5Datagram is a NetFlow v5 datagram of one UDP flow from src, whose
// header says unixSecs and sysUptime (ms) and whose record says First and
// Last (ms of uptime), built here byte by byte so that the times are
// exactly those given.
func v5Datagram(src [4]byte, unixSecs, sysUptime, first, last uint32) []byte {
	b := make([]byte, 24+48)
	binary.BigEndian.PutUint16(b[0:], 5) // version
	binary.BigEndian.PutUint16(b[2:], 1) // count
	binary.BigEndian.PutUint32(b[4:], sysUptime)
	binary.BigEndian.PutUint32(b[8:], unixSecs)
	r := b[24:]
	copy(r[0:], src[:])
	copy(r[4:], []byte{192, 0, 2, 1})      // dstaddr
	binary.BigEndian.PutUint32(r[16:], 1)  // dPkts
	binary.BigEndian.PutUint32(r[20:], 60) // dOctets
	binary.BigEndian.PutUint32(r[24:], first)
	binary.BigEndian.PutUint32(r[28:], last)
	binary.BigEndian.PutUint16(r[32:], 4000) // srcport
	binary.BigEndian.PutUint16(r[34:], 53)   // dstport
	r[38] = 17                               // UDP
	return b
}

// A NetFlow v5 record that starts 1 ms before 1970 (header unix_secs 0,
// sysUptime 1, First 0) does not stop collect with time-pattern outputs
// (issue 25: a window ending at the epoch has end 0, which was read as
// "no windows", and collect exited 1). collect keeps running, takes a
// later normal record, and at SIGTERM exits 0 having written both: each
// record once in a record file, each in a summary's counts, every file
// committed. Whether collect keeps the 1969 time or counts it and uses
// the arrival time instead, the pipeline must accept any window; the
// test holds either way.
func TestCollectEpochRecordKeepsRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, sum := filepath.Join(dir, "flows-%Y%m%d.jsonl"), filepath.Join(dir, "sum-%Y%m%d.jsonl")
	c := startCollect(t, "--key", "src", "--window", "1m", "--out", out, "--summary", sum)
	conn, err := net.Dial("udp", c.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// records returns the sources in the record files, committed or not.
	records := func() []string {
		var srcs []string
		files, _ := filepath.Glob(filepath.Join(dir, "flows-*"))
		for _, f := range files {
			for _, l := range lines(t, f) {
				var r struct{ Src, Window string }
				if err := json.Unmarshal([]byte(l), &r); err != nil {
					t.Fatalf("%s: %q: %v", f, l, err)
				}
				if r.Window == "" {
					t.Errorf("%s: record %s has no window", f, l)
				}
				srcs = append(srcs, r.Src)
			}
		}
		slices.Sort(srcs)
		return srcs
	}
	if _, err := conn.Write(v5Datagram([4]byte{10, 0, 0, 1}, 0, 1, 0, 0)); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, "the epoch record in a record file", time.Minute, func() bool { return len(records()) == 1 })
	now := time.Now()
	up := uint32(3600_000) // an hour of uptime
	if _, err := conn.Write(v5Datagram([4]byte{10, 0, 0, 2}, uint32(now.Unix()), up, up-1000, up-500)); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, "the later record in a record file", time.Minute, func() bool { return len(records()) == 2 })
	c.stop(t, syscall.SIGTERM)
	if got := records(); !slices.Equal(got, []string{"10.0.0.1", "10.0.0.2"}) {
		t.Errorf("the record files hold %v, want 10.0.0.1 and 10.0.0.2 once each", got)
	}
	entries, _ := os.ReadDir(dir)
	var packets, summaries, totals int
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("%s left uncommitted after SIGTERM", e.Name())
		}
		if !strings.HasPrefix(e.Name(), "sum-") {
			continue
		}
		for _, l := range lines(t, filepath.Join(dir, e.Name())) {
			var s struct {
				WindowStart *string `json:"window_start"`
				Packets     int
				RunTotals   json.RawMessage `json:"run_totals"`
			}
			if err := json.Unmarshal([]byte(l), &s); err != nil {
				t.Fatalf("%s: %q: %v", e.Name(), l, err)
			}
			if s.RunTotals != nil {
				totals++
				continue
			}
			summaries++
			packets += s.Packets
			// A summary's file is named by its window's start.
			st, err := time.Parse(time.RFC3339Nano, *s.WindowStart)
			if err != nil {
				t.Fatalf("%s: window_start %q: %v", e.Name(), *s.WindowStart, err)
			}
			if want := "sum-" + st.UTC().Format("20060102") + ".jsonl"; e.Name() != want {
				t.Errorf("a summary of window %s is in %s, want %s", *s.WindowStart, e.Name(), want)
			}
		}
	}
	// collect keys the epoch record with its arrival (bad_time), so both
	// may be in one window: the windows at and before the epoch are the
	// pipeline's and report's tests (TestWindowsAtAnyTime,
	// TestWindowFilesAtAnyTime).
	if packets != 2 || summaries < 1 || totals != 0 {
		// The totals line goes to the summary files with --export only.
		t.Errorf("summaries: %d lines counting %d packets and %d totals lines, want 2 packets and no totals\n%s", summaries, packets, totals, c.log())
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			t.Logf("%s:\n%s", e.Name(), b)
		}
	}
}

//go:build linux && !(mips || mips64 || ppc64 || s390x)

package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/testframe"
)

// fedReplay is a `flowdedup replay -` process whose standard input the
// test holds open and writes a capture into, a few packets at a time, so
// that it can signal the process at a known point of the capture.
type fedReplay struct {
	*testutil.Process
	stdin io.WriteCloser
	pcap  *pcapgo.Writer
}

// startFed starts `flowdedup replay - ARGS` and writes the capture's file
// header; it returns once replay has read it and said what it runs.
func startFed(t *testing.T, args ...string) *fedReplay {
	t.Helper()
	bin := filepath.Join(flowdedupBinary(t), "flowdedup")
	f := &fedReplay{}
	cmd := exec.Command(bin, append([]string{"replay", "-"}, args...)...)
	var err error
	if f.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	f.Process = testutil.StartProcess(t, cmd, "", 0)
	f.pcap = pcapgo.NewWriter(f.stdin)
	if err := f.pcap.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	f.waitLog(t, "flowdedup replay: filter", 1)
	return f
}

func (f *fedReplay) log() string { return f.Log() }

// send writes one UDP frame per source at its time.
func (f *fedReplay) send(t *testing.T, frames []timedFrame) {
	t.Helper()
	for _, fr := range frames {
		data := testframe.UDP4Frame(netip.MustParseAddr(fr.src), netip.MustParseAddr("192.0.2.1"), 1000, 53, 60)
		ci := gopacket.CaptureInfo{Timestamp: fr.at, CaptureLength: len(data), Length: len(data)}
		if err := f.pcap.WritePacket(ci, data); err != nil {
			t.Fatalf("writing to replay's stdin: %v\n%s", err, f.log())
		}
	}
}

// waitLog waits until stderr holds s at least n times.
func (f *fedReplay) waitLog(t *testing.T, s string, n int) {
	t.Helper()
	f.WaitFor(t, fmt.Sprintf("%q %d times on stderr", s, n), time.Minute, func() bool { return strings.Count(f.log(), s) >= n })
}

// signal sends sig to the process.
func (f *fedReplay) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := f.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v: %v\n%s", sig, err, f.log())
	}
}

// wait waits for the process to exit and returns its error.
func (f *fedReplay) wait(t *testing.T) error {
	t.Helper()
	return f.Wait(t, time.Minute)
}

// sources returns frames of n sources 10.a.b.1... at times from at, one a
// second, and the set of their sources. The n frames are followed by
// batchPad duplicates of them: replay's producer hands keys to a worker
// in batches of 256 (pipeline's batch size), and a pipe that stays open
// and idle does not flush a partly filled one, so the duplicates push the
// new keys through to the worker (replay runs with one worker here).
func sources(a, b, n int, at time.Time) ([]timedFrame, map[string]bool) {
	frames := make([]timedFrame, n+batchPad)
	set := map[string]bool{}
	for i := range frames {
		frames[i] = timedFrame{fmt.Sprintf("10.%d.%d.%d", a, b, i%n+1), at.Add(time.Duration(i) * time.Second)}
		set[frames[i].src] = true
	}
	return frames, set
}

// batchPad is more than a batch of keys.
const batchPad = 300

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// A crash (SIGKILL) in the middle of a window: the files of the windows
// that closed are whole under their final names, the open one is only
// under its temporary name, and the next run keeps that as NAME.partial
// and says so. SIGHUP, sent on the way, changes nothing for pattern files
// and does not stop the run.
func TestReplayKilledMidWindow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"--key", "src", "--window", "1h", "--filter", "exact", "--workers", "1",
		"-w", filepath.Join(dir, "src-%Y%m%dT%H.jsonl"), "--summary", filepath.Join(dir, "summaries", "summary-%Y%m%dT%H.json")}
	f := startFed(t, args...)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	hour0, want0 := sources(0, 0, 100, t0.Add(time.Minute))
	// 10 minutes into hour 1: past hour 0's end plus the 5s lateness.
	hour1a, want1 := sources(1, 0, 50, t0.Add(70*time.Minute))
	f.send(t, append(hour0, hour1a...))
	final0 := filepath.Join(dir, "src-20260301T00.jsonl")
	final1 := filepath.Join(dir, "src-20260301T01.jsonl")
	tmp1 := final1 + ".tmp"
	f.WaitFor(t, "hour 0's file and 50 records of hour 1", time.Minute, func() bool { return exists(final0) && lineCount(tmp1) == 50 })

	f.signal(t, syscall.SIGHUP)
	hour1b, more := sources(1, 1, 50, t0.Add(80*time.Minute))
	for k := range more {
		want1[k] = true
	}
	f.send(t, hour1b)
	f.WaitFor(t, "100 records of hour 1 after SIGHUP", time.Minute, func() bool { return lineCount(tmp1) == 100 })
	if strings.Contains(f.log(), "SIGHUP") {
		t.Errorf("SIGHUP reopened something though every output is a pattern:\n%s", f.log())
	}

	f.signal(t, syscall.SIGKILL)
	if err := f.wait(t); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("replay exited with %v, want killed by SIGKILL", err)
	}
	if d := keyDiff(byWindow(t, readRecords(t, final0), "src")["2026-03-01T00:00:00Z"], want0); d != "" {
		t.Errorf("%s after SIGKILL:\n%s", final0, d)
	}
	if exists(final1) {
		t.Errorf("the open window's file has its final name after SIGKILL")
	}
	left := readRecords(t, tmp1) // every line whole
	if d := keyDiff(byWindow(t, left, "src")["2026-03-01T01:00:00Z"], want1); d != "" {
		t.Errorf("%s after SIGKILL:\n%s", tmp1, d)
	}
	summaries := dirNames(t, filepath.Join(dir, "summaries"))
	if len(summaries) != 1 || summaries[0] != "summary-20260301T00.json" {
		t.Errorf("summary files after SIGKILL: %v, want hour 0's only", summaries)
	}
	kept, err := os.ReadFile(tmp1)
	if err != nil {
		t.Fatal(err)
	}

	// The next run writes hour 1 again: the left-over is kept as .partial,
	// with a notice, and hour 1 gets its file.
	hour1c, want1c := sources(1, 2, 30, t0.Add(90*time.Minute))
	file := filepath.Join(t.TempDir(), "hour1.pcap")
	writeTimedPcap(t, file, hour1c)
	bin := filepath.Join(flowdedupBinary(t), "flowdedup")
	cmd := exec.Command(bin, append([]string{"replay", file}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("restart: %v\n%s", err, stderr.String())
	}
	partial := final1 + ".partial"
	if !strings.Contains(stderr.String(), "kept as "+partial) {
		t.Errorf("no notice naming %s on stderr:\n%s", partial, stderr.String())
	}
	if got, _ := os.ReadFile(partial); !bytes.Equal(got, kept) {
		t.Errorf("%s holds %d bytes, want the %d the killed run left", partial, len(got), len(kept))
	}
	if d := keyDiff(byWindow(t, readRecords(t, final1), "src")["2026-03-01T01:00:00Z"], want1c); d != "" {
		t.Errorf("%s after the restart:\n%s", final1, d)
	}
	if exists(tmp1) {
		t.Errorf("%s still there after a run that finished", tmp1)
	}
}

// SIGHUP reopens the plain outputs, logrotate's way: the records before it
// stay in the file moved away, those after it go to a new file at the
// path, none lost or written twice. A SIGHUP at any moment does not stop
// the run.
func TestReplaySIGHUPReopens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, summary := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "summary.jsonl")
	f := startFed(t, "--key", "src", "--window", "1h", "--filter", "exact", "--workers", "1", "-w", out, "--summary", summary)
	f.signal(t, syscall.SIGHUP) // before any record: nothing moved, nothing changes

	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	before, wantBefore := sources(0, 0, 100, t0)
	f.send(t, before)
	f.WaitFor(t, "100 records in "+out, time.Minute, func() bool { return lineCount(out) == 100 })
	rotated := out + ".1"
	if err := os.Rename(out, rotated); err != nil {
		t.Fatal(err)
	}
	n := strings.Count(f.log(), "SIGHUP: reopening "+out)
	f.signal(t, syscall.SIGHUP)
	f.waitLog(t, "SIGHUP: reopening "+out, n+1)
	after, wantAfter := sources(0, 1, 100, t0.Add(5*time.Minute))
	f.send(t, after)
	f.WaitFor(t, "100 records in the new "+out, time.Minute, func() bool { return lineCount(out) == 100 })
	if err := f.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.wait(t); err != nil {
		t.Fatalf("replay: %v\n%s", err, f.log())
	}

	const win = "2026-03-01T00:00:00Z"
	if d := keyDiff(byWindow(t, readRecords(t, rotated), "src")[win], wantBefore); d != "" {
		t.Errorf("the file moved away holds other records than those before SIGHUP:\n%s", d)
	}
	if d := keyDiff(byWindow(t, readRecords(t, out), "src")[win], wantAfter); d != "" {
		t.Errorf("the new file holds other records than those after SIGHUP:\n%s", d)
	}
	// The summary file was reopened too, at its unchanged path: one line.
	data, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	var s struct{ Distinct, Packets int }
	if err := json.Unmarshal(data, &s); err != nil || s.Distinct != 200 || s.Packets != 2*(100+batchPad) {
		t.Errorf("summary %q (%v): want one window of %d packets, 200 distinct", data, err, 2*(100+batchPad))
	}
}

// run takes SIGHUP too (the deploy unit's logrotate sends it to a live
// capture), and runs with the flags of the deploy unit: per-hour and
// per-day pattern files, retention, metrics.
func TestRunOutputs(t *testing.T) {
	t.Parallel()
	ns := liveNamespace(t)
	bin := buildBinary(t)
	pairs := func(t *testing.T, name string) map[string]bool {
		want := map[string]bool{}
		for _, r := range replayRecords(t, "--filter", "exact", "--key", "pair", pcapPath(name)) {
			want[r["src"].(string)+" > "+r["dst"].(string)] = true
		}
		return want
	}
	pairsIn := func(t *testing.T, path string) map[string]bool {
		got := map[string]bool{}
		for _, r := range readRecords(t, path) {
			k := r.Src + " > " + r.Dst
			if got[k] {
				t.Errorf("%s: pair %s twice", path, k)
			}
			got[k] = true
		}
		return got
	}

	t.Run("sighup", func(t *testing.T) {
		first, second := pairs(t, "small.pcap"), pairs(t, "ipv6.pcap")
		for k := range first {
			if second[k] {
				t.Fatalf("pair %s is in both captures: the test could not tell the files apart", k)
			}
		}
		// One window for the whole run, so that no wall-clock boundary
		// reports a pair again.
		lr := startLive(t, ns, bin, "--mode", "afpacket", "--key", "pair", "--filter", "exact", "--workers", "2")
		sendInto(t, ns, pcapPath("small.pcap"))
		testutil.WaitFor(t, "the first capture's pairs", time.Minute, func() bool { return lineCount(lr.out) == len(first) })
		rotated := lr.out + ".1"
		if err := os.Rename(lr.out, rotated); err != nil {
			t.Fatal(err)
		}
		lr.Cmd.Process.Signal(syscall.SIGHUP)
		testutil.WaitFor(t, "the SIGHUP notice", time.Minute, func() bool { return strings.Contains(lr.Log(), "SIGHUP: reopening "+lr.out) })
		sendInto(t, ns, pcapPath("ipv6.pcap"))
		testutil.WaitFor(t, "the second capture's pairs", time.Minute, func() bool { return lineCount(lr.out) == len(second) })
		lr.stop(t, syscall.SIGINT)
		if d := keyDiff(pairsIn(t, rotated), first); d != "" {
			t.Errorf("the file moved away:\n%s", d)
		}
		if d := keyDiff(pairsIn(t, lr.out), second); d != "" {
			t.Errorf("the file reopened after SIGHUP:\n%s", d)
		}
		if s := lr.lastSummary(t); !s.Final || s.Distinct != uint64(len(first)+len(second)) {
			t.Errorf("last summary %+v: want final, %d distinct", s, len(first)+len(second))
		}
	})

	t.Run("deploy-flags", func(t *testing.T) {
		want := map[string]bool{}
		for _, r := range replayRecords(t, "--filter", "exact", "--key", "src", pcapPath("small.pcap")) {
			want[r["src"].(string)] = true
		}
		dir := t.TempDir()
		lr := startLive(t, ns, bin, "--mode", "auto", "--out", filepath.Join(dir, "sources-%Y%m%dT%H.jsonl"),
			"--summary", filepath.Join(dir, "summary-%Y%m%d.jsonl"), "--key", "src", "--window", "1h", "--retain", "168", "--metrics", "127.0.0.1:0")
		if !strings.Contains(lr.Log(), "metrics on http://127.0.0.1:") {
			t.Errorf("no metrics line:\n%s", lr.Log())
		}
		sendInto(t, ns, pcapPath("small.pcap"))
		// The records are in the hour's temporary file (two, if the
		// test crosses an hour) until the run ends.
		open := func() int {
			n := 0
			tmps, _ := filepath.Glob(filepath.Join(dir, "sources-*.jsonl.tmp"))
			for _, p := range tmps {
				n += lineCount(p)
			}
			return n
		}
		testutil.WaitFor(t, "the sources in the hour's temporary file", time.Minute, func() bool { return open() >= len(want) })
		lr.stop(t, syscall.SIGINT)
		got := map[string]bool{}
		var summaries int
		for _, name := range dirNames(t, dir) {
			switch {
			case hourName.MatchString(name) && strings.HasPrefix(name, "sources-"):
				for _, r := range readRecords(t, filepath.Join(dir, name)) {
					got[r.Src] = true
				}
			case strings.HasPrefix(name, "summary-") && strings.HasSuffix(name, ".jsonl") && !strings.Contains(name, ".tmp"):
				summaries++
			default:
				t.Errorf("%s: not a committed file of the run's patterns", name)
			}
		}
		if d := keyDiff(got, want); d != "" {
			t.Errorf("the hourly files:\n%s\n%s", d, lr.Log())
		}
		if summaries == 0 {
			t.Errorf("no committed summary file: %v", dirNames(t, dir))
		}
	})
}

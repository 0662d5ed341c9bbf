package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/eval"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

var testPcaps = []string{"small.pcap", "small.pcapng", "vlan.pcap", "ipv6.pcap", "malformed.pcap", "fragments.pcap", "windows.pcap", "zipf.pcap.gz"}

func pcapPath(name string) string { return filepath.Join("..", "..", "testdata", "pcaps", name) }

// replayRecords runs `flowdedup replay` with args and returns its jsonl
// records.
func replayRecords(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.jsonl")
	var stderr bytes.Buffer
	code := Main(context.Background(), append([]string{"replay", "--out", out}, args...), new(bytes.Buffer), &stderr)
	if code != ExitOK {
		t.Fatalf("replay %q: exit %d: %s", args, code, stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		recs = append(recs, m)
	}
	return recs
}

// canonAddr normalises an address as both tools may spell it.
func canonAddr(t *testing.T, s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatalf("address %q: %v", s, err)
	}
	return a.Unmap().String()
}

// tsharkKeys is the set of keys of kind that tshark's own dissection finds
// in file: the outermost IPv4/IPv6 addresses of every frame that has one.
func tsharkKeys(t *testing.T, file, kind string) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for _, a := range tsharkAddrs(t, file) {
		keys[keyString(t, kind, a[0].String(), a[1].String())] = true
	}
	return keys
}

func first(s string) string { return strings.Split(s, ",")[0] }

func keyString(t *testing.T, kind, src, dst string) string {
	switch kind {
	case "src":
		return canonAddr(t, src)
	case "dst":
		return canonAddr(t, dst)
	}
	return canonAddr(t, src) + " > " + canonAddr(t, dst)
}

// With the exact filter, replay reports each distinct key exactly once, and
// the set of keys is the one tshark's independent dissection finds, for
// every shipped capture and the address key kinds.
func TestReplayExactMatchesTshark(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tshark"); err != nil {
		testutil.SkipOrFail(t, "tshark not installed (Debian package tshark; .ci/run installs it)")
	}
	for _, name := range testPcaps {
		for _, kind := range []string{"src", "dst", "pair"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				t.Parallel()
				file := pcapPath(name)
				want := tsharkKeys(t, file, kind)
				got := map[string]bool{}
				for _, r := range replayRecords(t, "--filter", "exact", "--key", kind, "--workers", "2", "--seed", "1", file) {
					src, _ := r["src"].(string)
					dst, _ := r["dst"].(string)
					k := keyString(t, kind, src, dst)
					if got[k] {
						t.Errorf("key %s reported twice", k)
					}
					got[k] = true
				}
				if d := setDiff(got, want); d != "" {
					t.Errorf("replay and tshark disagree (%d vs %d keys):\n%s", len(got), len(want), d)
				}
			})
		}
	}
}

func setDiff(got, want map[string]bool) string {
	var b strings.Builder
	var extra, missing []string
	for k := range got {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	for k := range want {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(extra)
	sort.Strings(missing)
	for i, k := range extra {
		if i == 5 {
			break
		}
		fmt.Fprintf(&b, "  only in replay: %s\n", k)
	}
	for i, k := range missing {
		if i == 5 {
			break
		}
		fmt.Fprintf(&b, "  only in tshark: %s\n", k)
	}
	return b.String()
}

// With one worker and the same seed, replay makes exactly eval's decisions:
// every "unseen" answer is a record, so the records number the distinct keys
// less the false positives plus the false negatives eval counts on the same
// capture. (With several workers the shards' filters see disjoint keys and
// the figures differ by design.)
func TestReplayMatchesEvalOnOneWorker(t *testing.T) {
	const spec, seed = "qht:mem=256bit,buckets=2,fpbits=4", 12345 // 32 rows: small enough to err on 64 keys
	for _, name := range []string{"zipf.pcap.gz", "windows.pcap"} {
		for _, kind := range []string{"src", "5tuple"} {
			file := pcapPath(name)
			res, err := eval.Run(context.Background(), eval.Config{
				Filters: []string{spec}, Stream: "pcap:" + file + ",key=" + kind, Runs: 1, Seed: seed,
			})
			if err != nil {
				t.Fatal(err)
			}
			r := res[0]
			if r.FalsePositives == 0 && r.FalseNegatives == 0 {
				t.Fatalf("%s/%s: the filter is too big to make errors; the test would prove nothing", name, kind)
			}
			recs := replayRecords(t, "--filter", spec, "--key", kind, "--workers", "1", "--seed", fmt.Sprint(seed), file)
			want := r.Distinct - r.FalsePositives + r.FalseNegatives
			if float64(len(recs)) != want {
				t.Errorf("%s/%s: replay wrote %d records; eval says %v distinct - %v FP + %v FN = %v",
					name, kind, len(recs), r.Distinct, r.FalsePositives, r.FalseNegatives, want)
			}
		}
	}
}

// A damaged file in the middle of a replay is counted (malformed
// corrupt_file) and the files after it are still read: an hourly capture
// cut by a crash must not hide the next hours.
func TestReplayGoesOnAfterCorruptFile(t *testing.T) {
	good, err := os.ReadFile(pcapPath("small.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.pcap")
	if err := os.WriteFile(cut, good[:len(good)/2+7], 0o644); err != nil { // cut inside a record
		t.Fatal(err)
	}
	summary := filepath.Join(t.TempDir(), "summary.jsonl")
	after := replayRecords(t, "--filter", "exact", "--key", "pair", "--summary", summary, cut, pcapPath("windows.pcap"))
	alone := replayRecords(t, "--filter", "exact", "--key", "pair", pcapPath("windows.pcap"))
	if len(after) < len(alone) {
		t.Errorf("%d pairs after a corrupt file, want at least the %d of the good file alone", len(after), len(alone))
	}
	var s struct {
		Malformed   uint64            `json:"malformed"`
		MalformedBy map[string]uint64 `json:"malformed_by"`
	}
	b, _ := os.ReadFile(summary)
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("summary %q: %v", b, err)
	}
	if s.MalformedBy["corrupt_file"] != 1 {
		t.Errorf("summary %s: want one corrupt_file", b)
	}
}

// A full disk is not lost silently: the run fails with exit code 1 and says
// why (records are never split: see report's failure tests).
func TestReplayFullDiskExitCode(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		testutil.SkipOrFail(t, "no /dev/full on this system")
	}
	var stderr bytes.Buffer
	code := Main(context.Background(), []string{"replay", "--out", "/dev/full", "--filter", "exact", pcapPath("small.pcap")}, new(bytes.Buffer), &stderr)
	if code != ExitError || !strings.Contains(stderr.String(), "no space left") {
		t.Errorf("exit %d, stderr %q; want %d and the write error", code, stderr.String(), ExitError)
	}
}

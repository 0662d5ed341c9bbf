package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mergeFleet makes three captures whose sources overlap (the same --seed
// gives the same hosts; more --flows add clients, other --packets and
// --ipv6 other timings and families), replays each as a router would
// (--observer, --summary-sketch, 10-second windows, so that each window
// has some of the sources, not all; args added), and
// returns the summary files and the exact distinct sources of each window
// over all three (from exact replays), keyed by window start.
func mergeFleet(t *testing.T, args ...string) (files []string, exact map[string]map[string]bool) {
	t.Helper()
	dir := t.TempDir()
	exact = map[string]map[string]bool{}
	for i, c := range []struct{ flows, packets, ipv6 string }{{"900", "3000", "0.3"}, {"1200", "4000", "0.2"}, {"1500", "5000", "0.4"}} {
		capture := filepath.Join(dir, fmt.Sprintf("r%d.pcap", i+1))
		if code, _, errs := run("gen", "--seed", "21", "--flows", c.flows, "--packets", c.packets, "--ipv6", c.ipv6, "--duration", "600s", "-o", capture); code != ExitOK {
			t.Fatalf("gen: exit %d: %s", code, errs)
		}
		summary := filepath.Join(dir, fmt.Sprintf("r%d.jsonl", i+1))
		argv := append([]string{"replay", "--key", "src", "--window", "10s", "--observer", fmt.Sprintf("r%d", i+1), "--summary-sketch",
			"--out", os.DevNull, "--summary", summary, capture}, args...)
		if code, _, errs := run(argv...); code != ExitOK {
			t.Fatalf("replay: exit %d: %s", code, errs)
		}
		files = append(files, summary)
		for _, r := range replayRecords(t, "--key", "src", "--filter", "exact", "--window", "10s", capture) {
			w := r["window"].(string)
			if exact[w] == nil {
				exact[w] = map[string]bool{}
			}
			exact[w][r["src"].(string)] = true
		}
	}
	return files, exact
}

type mergeOut struct {
	Start, End          string
	Observers           []string
	Summaries           int
	DistinctEstimate    uint64 `json:"distinct_estimate"`
	SumDistinctEstimate uint64 `json:"sum_distinct_estimate"`
	SumDistinct         uint64 `json:"sum_distinct"`
	Key                 *string
}

func mergeJSON(t *testing.T, args ...string) []mergeOut {
	t.Helper()
	code, out, errs := run(append([]string{"merge", "--format", "json"}, args...)...)
	if code != ExitOK {
		t.Fatalf("merge %q: exit %d: %s", args, code, errs)
	}
	var rows []mergeOut
	for line := range strings.Lines(out) {
		var r mergeOut
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("merge output %q: %v", line, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// closeTo reports whether an estimate of n distinct keys is within the
// tolerance of the merge tests: 2%, or 2 keys. The sets here hold 60 to 400
// sources, far below the 2^14 registers of a sketch, where the estimator
// counts empty registers (linear counting): it is off only by the keys
// that share a register with another, n²/2m in expectation (under 5 at
// n = 400), with a standard deviation of about its square root; 2% of 400
// is 8, more than 3 standard deviations above the mean.
func closeTo(est uint64, n int) bool {
	return math.Abs(float64(est)-float64(n)) <= max(2, 0.02*float64(n))
}

// merge of three routers' summary files, written by replay, gives for each
// window the distinct sources of the union, which the sum of the routers'
// counts overstates; by the hour, the distinct sources of the whole
// capture.
func TestMergeReplaySummaries(t *testing.T) {
	files, exact := mergeFleet(t)
	perRouter := map[string]uint64{}
	for _, f := range files {
		for _, s := range readSummaries(t, f) {
			perRouter[rfc3339(s.StartNs)] += s.Distinct
		}
	}
	rows := mergeJSON(t, files...)
	if len(rows) != 60 {
		t.Fatalf("%d windows, want 60: %+v", len(rows), rows)
	}
	all := map[string]bool{}
	for _, r := range rows {
		want := exact[r.Start]
		for k := range want {
			all[k] = true
		}
		if !closeTo(r.DistinctEstimate, len(want)) {
			t.Errorf("window %s: merged estimate %d, exact union %d", r.Start, r.DistinctEstimate, len(want))
		}
		if r.Key == nil || *r.Key != "src" {
			t.Errorf("window %s: key %v, want src", r.Start, r.Key)
		}
		if r.SumDistinct != perRouter[r.Start] || r.SumDistinct <= uint64(len(want)) || r.Summaries != 3 ||
			strings.Join(r.Observers, ",") != "r1,r2,r3" || r.End != rfc3339(mustTime(t, r.Start).UnixNano()+10e9) {
			t.Errorf("window %s: %+v; want sum_distinct %d (> the union's %d), 3 summaries of r1,r2,r3, 10 s", r.Start, r, perRouter[r.Start], len(want))
		}
	}
	byHour := mergeJSON(t, append([]string{"--by", "1h"}, files...)...)
	if len(byHour) != 1 || byHour[0].Start != "2026-01-01T00:00:00Z" || byHour[0].End != "2026-01-01T01:00:00Z" ||
		byHour[0].Summaries != 180 || !closeTo(byHour[0].DistinctEstimate, len(all)) {
		t.Errorf("by hour: %+v; want one hour of 180 summaries estimating %d", byHour, len(all))
	}
	// Each window has some of the sources, not all: the windows'
	// estimates are not the hour's.
	for w, set := range exact {
		if len(set) >= len(all)*90/100 {
			t.Errorf("window %s has %d of the %d sources: too many for the test to tell windows apart", w, len(set), len(all))
		}
	}

	// Text and CSV carry the same numbers, and the key kind.
	code, text, _ := run(append([]string{"merge"}, files...)...)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if code != ExitOK || len(lines) != 62 || lines[0] != "key: src" || strings.Join(strings.Fields(lines[1]), " ") != "start end summaries distinct_estimate sum_distinct_estimate sum_distinct observers" ||
		strings.Join(strings.Fields(lines[2]), " ") != fmt.Sprintf("%s %s 3 %d %d %d r1,r2,r3", rows[0].Start, rows[0].End, rows[0].DistinctEstimate, rows[0].SumDistinctEstimate, rows[0].SumDistinct) {
		t.Errorf("text output:\n%s", text)
	}
	code, csv, _ := run(append([]string{"merge", "--format", "csv"}, files...)...)
	lines = strings.Split(strings.TrimSpace(csv), "\n")
	if code != ExitOK || len(lines) != 61 || lines[0] != "start,end,observers,summaries,distinct_estimate,sum_distinct_estimate,sum_distinct,key" ||
		lines[1] != fmt.Sprintf("%s,%s,r1 r2 r3,3,%d,%d,%d,src", rows[0].Start, rows[0].End, rows[0].DistinctEstimate, rows[0].SumDistinctEstimate, rows[0].SumDistinct) {
		t.Errorf("csv output:\n%s", csv)
	}
}

// A summary without an observer (an older flowdedup's) is the file's; "-"
// is standard input.
func TestMergeStdinAndObserverDefault(t *testing.T) {
	files, _ := mergeFleet(t)
	data, err := os.ReadFile(files[1])
	if err != nil {
		t.Fatal(err)
	}
	anon := filepath.Join(t.TempDir(), "anon.jsonl")
	if err := os.WriteFile(anon, bytes.ReplaceAll(data, []byte(`"observer":"r2",`), nil), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cfg := MergeConfig{Format: "json"}
	if err := runMerge(context.Background(), &cfg, []string{files[0], "-", anon}, bytes.NewReader(mustRead(t, files[2])), &out, &errb); err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(out.String()) {
		var r mergeOut
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if want := []string{anon, "r1", "r3"}; strings.Join(r.Observers, "|") != strings.Join(want, "|") {
			t.Errorf("observers %q, want %q", r.Observers, want)
		}
	}
}

// Summaries that cannot be merged fail (exit 1) with a message naming the
// file and line, and saying what to do; a command line merge cannot use
// is a usage error (exit 2).
func TestMergeErrors(t *testing.T) {
	files, _ := mergeFleet(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	replayTo := func(name string, args ...string) string {
		p := filepath.Join(dir, name)
		if code, _, errs := run(append([]string{"replay", "--key", "src", "--out", os.DevNull, "--summary", p, pcapPath("windows.pcap")}, args...)...); code != ExitOK {
			t.Fatalf("replay: exit %d: %s", code, errs)
		}
		return p
	}
	noSketch := replayTo("nosketch.jsonl", "--window", "1m")
	otherSeed := replayTo("seed.jsonl", "--window", "1m", "--summary-sketch", "--sketch-seed", "12345")
	twoMin := replayTo("2m.jsonl", "--window", "2m", "--summary-sketch")
	garbage := write("garbage.jsonl", string(mustRead(t, files[0]))+"{\"window_start\": 3}\n")
	garbageLine := fmt.Sprintf("%s:%d:", garbage, bytes.Count(mustRead(t, garbage), []byte("\n")))
	for _, c := range []struct {
		args []string
		code int
		says []string
	}{
		{[]string{files[0], noSketch}, ExitError, []string{noSketch + ":1:", "no sketch", "--summary-sketch"}},
		{[]string{files[0], otherSeed}, ExitError, []string{otherSeed + ":1:", files[0] + ":1", "--sketch-seed", "seeds differ"}},
		{[]string{files[0], twoMin}, ExitError, []string{"overlap", "merge by a period"}},
		{[]string{"--by", "15s", files[0]}, ExitError, []string{files[0] + ":2:", "crosses the boundary"}},
		{[]string{garbage}, ExitError, []string{garbageLine, "malformed summary"}},
		{[]string{filepath.Join(dir, "nosuch.jsonl")}, ExitError, []string{"nosuch.jsonl", "no such file"}},
		{[]string{}, ExitUsage, []string{"no summary file given"}},
		{[]string{"--format", "xml", files[0]}, ExitUsage, []string{"--format", "text, json or csv"}},
		{[]string{"--by", "-1h", files[0]}, ExitUsage, []string{"--by must not be negative"}},
		{[]string{"--by", "1hour", files[0]}, ExitUsage, []string{"want a duration"}},
		{[]string{"-", files[0], "-"}, ExitUsage, []string{"standard input (-) given 2 times"}},
	} {
		code, _, errs := run(append([]string{"merge"}, c.args...)...)
		if code != c.code {
			t.Errorf("merge %q: exit %d, want %d: %s", c.args, code, c.code, errs)
			continue
		}
		for _, w := range c.says {
			if !strings.Contains(errs, w) {
				t.Errorf("merge %q: stderr %q lacks %q", c.args, errs, w)
			}
		}
	}
	// Windows of 10 s and 2 minutes merge by a period both divide.
	if rows := mergeJSON(t, "--by", "2m", files[0], twoMin); len(rows) != 5 {
		t.Errorf("by 2m: %+v, want 5 periods", rows)
	}
}

// TestMergeKeyKinds: summaries of one capture replayed with --key src and
// with --key dst do not merge: the error names both kinds and where each
// came from. Summaries without "key" (an older flowdedup's) merge with
// either, with a note; the outputs say the kind.
func TestMergeKeyKinds(t *testing.T) {
	dir := t.TempDir()
	replay := func(key string) string {
		p := filepath.Join(dir, key+".jsonl")
		if code, _, errs := run("replay", "--key", key, "--window", "1m", "--summary-sketch", "--observer", "r-"+key,
			"--out", os.DevNull, "--summary", p, pcapPath("windows.pcap")); code != ExitOK {
			t.Fatalf("replay --key %s: exit %d: %s", key, code, errs)
		}
		return p
	}
	src, dst := replay("src"), replay("dst")
	data := mustRead(t, src)
	if !bytes.Contains(data, []byte(`"filter":"`)) || bytes.Count(data, []byte(`,"key":"src",`)) != bytes.Count(data, []byte("\n")) {
		t.Fatalf("replay --key src: not every summary says key src:\n%s", data)
	}

	for _, files := range [][2]string{{src, dst}, {dst, src}} {
		code, out, errs := run("merge", files[0], files[1])
		if code != ExitError {
			t.Errorf("merge %s %s: exit %d, want %d; stdout %q, stderr %q", files[0], files[1], code, ExitError, out, errs)
			continue
		}
		first, second := strings.TrimSuffix(filepath.Base(files[0]), ".jsonl"), strings.TrimSuffix(filepath.Base(files[1]), ".jsonl")
		for _, w := range []string{files[1] + ":1: counts key kind " + second, files[0] + ":1 counts " + first, "--key", "different key kinds"} {
			if !strings.Contains(errs, w) {
				t.Errorf("merge %s %s: stderr %q lacks %q", files[0], files[1], errs, w)
			}
		}
	}

	// An older file, without "key", merges with the src one.
	old := filepath.Join(dir, "old.jsonl")
	if err := os.WriteFile(old, bytes.ReplaceAll(data, []byte(`"key":"src",`), nil), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, files := range [][]string{{old, src}, {src, old}} {
		code, out, errs := run(append([]string{"merge", "--format", "json"}, files...)...)
		if code != ExitOK || !strings.Contains(errs, "do not say which --key") || !strings.Contains(errs, "taken to count src") {
			t.Errorf("merge %q: exit %d, stderr %q; want 0 and a note on the summaries of unknown kind", files, code, errs)
		}
		if n := strings.Count(out, "\n"); n == 0 || strings.Count(out, `"key":"src"}`) != n {
			t.Errorf("merge %q: want every row to say key src:\n%s", files, out)
		}
	}
	code, out, errs := run("merge", old)
	if code != ExitOK || !strings.HasPrefix(out, "key: unknown") || !strings.Contains(errs, "no summary says which --key") {
		t.Errorf("merge of an old file alone: exit %d, stdout %q, stderr %q; want key: unknown and a note", code, out, errs)
	}
	code, out, _ = run("merge", "--format", "csv", dst)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != ExitOK || len(lines) < 2 || !strings.HasSuffix(lines[0], ",key") || !strings.HasSuffix(lines[1], ",dst") {
		t.Errorf("merge --format csv of dst: exit %d:\n%s", code, out)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMergePrefix: summaries of one capture replayed by host and by /24
// (--prefix) do not merge, nor do /24s and /16s; two routers' /24 counts
// merge, and the outputs say key src/24,64. A /24 count merged is at most
// the host count of the same traffic.
func TestMergePrefix(t *testing.T) {
	dir := t.TempDir()
	replay := func(name string, args ...string) string {
		p := filepath.Join(dir, name+".jsonl")
		args = append([]string{"replay", "--key", "src", "--window", "1m", "--summary-sketch", "--observer", name,
			"--out", os.DevNull, "--summary", p}, append(args, pcapPath("windows.pcap"))...)
		if code, _, errs := run(args...); code != ExitOK {
			t.Fatalf("%q: exit %d: %s", args, code, errs)
		}
		return p
	}
	hosts, net24, net24b, net16 := replay("hosts"), replay("net24", "--prefix", "24,64"), replay("net24b", "--prefix", "24,64"), replay("net16", "--prefix", "16")
	if data := mustRead(t, net24); bytes.Count(data, []byte(`,"key":"src/24,64",`)) != bytes.Count(data, []byte("\n")) {
		t.Fatalf("replay --prefix 24,64: not every summary says key src/24,64:\n%s", data)
	}
	for _, c := range [][2]string{{hosts, net24}, {net24, hosts}, {net24, net16}} {
		code, out, errs := run("merge", c[0], c[1])
		if code != ExitError || !strings.Contains(errs, "--prefix") || !strings.Contains(errs, "different key kinds") {
			t.Errorf("merge %s %s: exit %d, stdout %q, stderr %q; want a refusal naming --prefix", c[0], c[1], code, out, errs)
		}
	}
	for _, c := range []struct{ a, b, msg string }{{hosts, net24, "src/24,64"}, {net16, net24, "src/16,128"}} {
		if _, _, errs := run("merge", c.a, c.b); !strings.Contains(errs, c.msg) {
			t.Errorf("merge %s %s: stderr %q does not name %s", c.a, c.b, errs, c.msg)
		}
	}
	rows := mergeJSON(t, net24, net24b)
	hostRows := mergeJSON(t, hosts)
	if len(rows) == 0 || len(rows) != len(hostRows) {
		t.Fatalf("merge of two /24 files: %d rows, the host file %d", len(rows), len(hostRows))
	}
	for i, r := range rows {
		if r.Key == nil || *r.Key != "src/24,64" || r.DistinctEstimate > hostRows[i].DistinctEstimate || r.Summaries != 2 {
			t.Errorf("row %d: %+v; host row %+v", i, r, hostRows[i])
		}
	}
	if code, out, _ := run("merge", net24); code != ExitOK || !strings.HasPrefix(out, "key: src/24,64\n") {
		t.Errorf("merge text of a /24 file: exit %d:\n%s", code, out)
	}
}

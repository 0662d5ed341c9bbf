package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// jsonRecord is the part of a jsonl record the output tests compare.
type jsonRecord struct {
	Src, Dst string
	Window   string
}

// readRecords parses every line of path as a jsonl record: a line that
// does not parse (a partial record) fails the test.
func readRecords(t *testing.T, path string) []jsonRecord {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Errorf("%s does not end with a whole line", path)
	}
	var recs []jsonRecord
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var r jsonRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: line %q: %v", path, sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

// keyOf returns the key of kind src or dst of r.
func keyOf(r jsonRecord, kind string) string {
	if kind == "dst" {
		return r.Dst
	}
	return r.Src
}

// byWindow splits records by window into sets of keys, failing on a key
// reported twice in a window (the exact filter never does).
func byWindow(t *testing.T, recs []jsonRecord, kind string) map[string]map[string]bool {
	t.Helper()
	w := map[string]map[string]bool{}
	for _, r := range recs {
		if w[r.Window] == nil {
			w[r.Window] = map[string]bool{}
		}
		k := keyOf(r, kind)
		if w[r.Window][k] {
			t.Errorf("key %s reported twice in window %s", k, r.Window)
		}
		w[r.Window][k] = true
	}
	return w
}

// exactByWindow replays file with the exact filter into one plain file and
// splits its records by window.
func exactByWindow(t *testing.T, file, kind string, args ...string) map[string]map[string]bool {
	t.Helper()
	out := filepath.Join(t.TempDir(), "exact.jsonl")
	args = append([]string{"replay", "--filter", "exact", "--key", kind, "--window", "1h", "--out", out, file}, args...)
	if code, _, errs := run(args...); code != ExitOK {
		t.Fatalf("%q: exit %d: %s", args, code, errs)
	}
	return byWindow(t, readRecords(t, out), kind)
}

// hourName matches the committed files of the pattern PREFIX-%Y%m%dT%H.jsonl.
var hourName = regexp.MustCompile(`^[a-z]+-(\d{8}T\d{2})\.jsonl$`)

// hourFiles reads the files of dir, which must all be committed files of
// an hourly pattern (no temporary or partial file), whose records must all
// belong to the hour their file name gives; it returns each file's keys by
// that hour's window start.
func hourFiles(t *testing.T, dir, kind string) map[string]map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]map[string]bool{}
	for _, e := range entries {
		m := hourName.FindStringSubmatch(e.Name())
		if m == nil {
			t.Errorf("%s: not a committed hourly file", e.Name())
			continue
		}
		hour, err := time.Parse("20060102T15", m[1])
		if err != nil {
			t.Fatal(err)
		}
		win := hour.Format(time.RFC3339)
		recs := readRecords(t, filepath.Join(dir, e.Name()))
		for _, r := range recs {
			if r.Window != win {
				t.Errorf("%s holds a record of window %s", e.Name(), r.Window)
			}
		}
		files[win] = byWindow(t, recs, kind)[win]
		if files[win] == nil {
			files[win] = map[string]bool{}
		}
	}
	return files
}

// sameWindows reports how the per-window key sets got and want differ.
func sameWindows(got, want map[string]map[string]bool) string {
	var b strings.Builder
	for _, w := range sortedKeys(want) {
		if d := keyDiff(got[w], want[w]); d != "" {
			fmt.Fprintf(&b, "window %s: %d keys in the file, %d expected:\n%s", w, len(got[w]), len(want[w]), d)
		}
	}
	for _, w := range sortedKeys(got) {
		if want[w] == nil {
			fmt.Fprintf(&b, "window %s: a file that should not be there (%d keys)\n", w, len(got[w]))
		}
	}
	return b.String()
}

// keyDiff names up to 5 keys got has and want lacks, and 5 the other way.
func keyDiff(got, want map[string]bool) string {
	var b strings.Builder
	for _, c := range []struct {
		a, b map[string]bool
		say  string
	}{{got, want, "unexpected"}, {want, got, "missing"}} {
		n := 0
		for _, k := range sortedKeys(c.a) {
			if !c.b[k] {
				if n++; n <= 5 {
					fmt.Fprintf(&b, "  %s: %s\n", c.say, k)
				}
			}
		}
		if n > 5 {
			fmt.Fprintf(&b, "  %s: %d more\n", c.say, n-5)
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// genCapture writes a capture of 30000 packets over 5 hours of packet
// time with about 200 destinations an hour, a few of which miss an hour.
func genCapture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "big.pcap")
	if code, _, errs := run("gen", "--packets", "30000", "--flows", "6000", "--zipf", "1.1", "--duration", "5h", "--seed", "3", "-o", path); code != ExitOK {
		t.Fatalf("gen: exit %d: %s", code, errs)
	}
	return path
}

// A replay run again into the same directory with --retain (an import
// done twice) keeps, for each of the newest periods, the first run's file
// and the second's NAME.1 copy, and removes older periods whole (before,
// x-...T02 went and x-...T02.1 stayed: each copy counted as a period).
func TestReplayRetainRerun(t *testing.T) {
	file := genCapture(t)
	dir := t.TempDir()
	for range 2 {
		if code, _, errs := run("replay", file, "--key", "dst", "--window", "1h", "--filter", "exact", "--retain", "3",
			"-w", filepath.Join(dir, "x-%Y%m%dT%H.jsonl")); code != ExitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
	}
	var got []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		got = append(got, e.Name())
	}
	// The capture spans 5 hours from 2026-01-01T00: hours 02 to 04 stay.
	want := []string{
		"x-20260101T02.1.jsonl", "x-20260101T02.jsonl", "x-20260101T03.1.jsonl", "x-20260101T03.jsonl",
		"x-20260101T04.1.jsonl", "x-20260101T04.jsonl",
	}
	if !slices.Equal(got, want) {
		t.Errorf("after two runs with --retain 3 the directory holds\n%v\nwant\n%v", got, want)
	}
	for i := 0; i < len(want); i += 2 {
		a := strings.Split(string(mustReadFile(t, filepath.Join(dir, want[i]))), "\n")
		b := strings.Split(string(mustReadFile(t, filepath.Join(dir, want[i+1]))), "\n")
		slices.Sort(a)
		slices.Sort(b)
		if len(a) < 2 || !slices.Equal(a, b) {
			t.Errorf("%s and %s differ: two exact replays give the same records", want[i], want[i+1])
		}
	}
}

// The command: flags after the file, a file per hour of packet
// time, each holding exactly the records an exact replay gives for its
// window, and retention. With the default filter (QHT, 4 buckets of 12
// bits, the L2 size per shard): about 100 keys per shard and hour make a
// false positive with probability about n²/(2 rows 4095), under 1e-4 per
// hour even for a 256 KiB L2, and --seed fixes the outcome.
func TestReplayHourlyFiles(t *testing.T) {
	file := genCapture(t)
	exact := exactByWindow(t, file, "dst")
	if len(exact) != 5 {
		t.Fatalf("the exact replay has %d windows, want 5 hours", len(exact))
	}
	dir := filepath.Join(t.TempDir(), "not", "yet") // a pattern's directory is made
	code, _, errs := run("replay", file, "--key", "dst", "--window", "1h", "-w", filepath.Join(dir, "dst-%Y%m%dT%H.jsonl"), "--retain", "48", "--seed", "1")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if d := sameWindows(hourFiles(t, dir, "dst"), exact); d != "" {
		t.Errorf("hourly files differ from the exact replay:\n%s", d)
	}
	if strings.Contains(errs, "removed") {
		t.Errorf("--retain 48 removed files of 5 hours:\n%s", errs)
	}

	// --retain 2: the three oldest hours are removed, each with a notice;
	// a daily summary pattern beside them holds the five windows.
	dir = t.TempDir()
	code, _, errs = run("replay", file, "--key", "dst", "--window", "1h", "--filter", "exact", "--retain", "2",
		"-w", filepath.Join(dir, "dst-%Y%m%dT%H.jsonl"), "--summary", filepath.Join(dir, "summary-%Y%m%d.json"))
	if code != ExitOK {
		t.Fatalf("--retain 2: exit %d: %s", code, errs)
	}
	hours := sortedKeys(exact)
	newest := map[string]map[string]bool{hours[3]: exact[hours[3]], hours[4]: exact[hours[4]]}
	summaries := filepath.Join(dir, "summary-20260101.json")
	data, err := os.ReadFile(summaries)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(summaries) // not an hourly file
	if d := sameWindows(hourFiles(t, dir, "dst"), newest); d != "" {
		t.Errorf("--retain 2 kept other files than the newest two:\n%s", d)
	}
	for _, h := range hours[:3] {
		at, _ := time.Parse(time.RFC3339, h)
		// The notice is the command's, as every line of replay's is.
		if name := "dst-" + at.Format("20060102T15") + ".jsonl"; !strings.Contains(errs, "\nflowdedup replay: removed "+filepath.Join(dir, name)+" (keeping the newest 2 periods)\n") {
			t.Errorf("no notice of the removal of %s on stderr:\n%s", name, errs)
		}
	}
	if strings.Contains(errs, "outfile:") {
		t.Errorf("a notice begins with the package's name, not the command's:\n%s", errs)
	}
	var n int
	for line := range strings.Lines(string(data)) {
		var s struct {
			Start    string `json:"window_start"`
			Distinct int
		}
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("summary %q: %v", line, err)
		}
		if s.Distinct != len(exact[s.Start]) {
			t.Errorf("summary of %s: %d distinct, want %d", s.Start, s.Distinct, len(exact[s.Start]))
		}
		n++
	}
	if n != 5 {
		t.Errorf("the daily summary file holds %d windows, want 5:\n%s", n, data)
	}
}

// Packets whose time goes back across an hour boundary, by less than the
// default lateness, still land in the file of their own hour; the truth is
// the hour of each packet's own timestamp.
func TestReplayHourlyFilesOutOfOrder(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var frames []timedFrame
	truth := map[string]map[string]bool{}
	add := func(src string, at time.Time) {
		frames = append(frames, timedFrame{src, at})
		w := at.Truncate(time.Hour).Format(time.RFC3339)
		if truth[w] == nil {
			truth[w] = map[string]bool{}
		}
		truth[w][src] = true
	}
	for h := range 3 {
		start := t0.Add(time.Duration(h) * time.Hour)
		// The hour's bulk, in order: 40 sources every hour, 40 of its own.
		for i := range 80 {
			src := fmt.Sprintf("10.0.0.%d", i%40+1)
			if i >= 40 {
				src = fmt.Sprintf("10.1.%d.%d", h, i%40+1)
			}
			add(src, start.Add(10*time.Second+time.Duration(i)*40*time.Second))
		}
		if h == 2 {
			break
		}
		// Across the boundary, the next hour's packets interleaved with
		// this hour's last ones, which go back by up to 7s (4s before the
		// end, after packets 3s past it): still within the 5s lateness of
		// this hour's end. Sources of their own, so that a packet in the
		// wrong file shows.
		end := start.Add(time.Hour)
		for i := range 10 {
			add(fmt.Sprintf("10.2.%d.%d", h+1, i+1), end.Add(time.Second+time.Duration(i)*200*time.Millisecond))
			add(fmt.Sprintf("10.3.%d.%d", h, i+1), end.Add(-4*time.Second+time.Duration(i)*300*time.Millisecond))
		}
	}
	file := filepath.Join(t.TempDir(), "reordered.pcap")
	writeTimedPcap(t, file, frames)
	dir := t.TempDir()
	code, _, errs := run("replay", file, "--key", "src", "--window", "1h", "-w", filepath.Join(dir, "src-%Y%m%dT%H.jsonl"), "--retain", "48", "--seed", "1")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Contains(errs, ", late ") {
		t.Errorf("packets counted late:\n%s", errs)
	}
	if d := sameWindows(hourFiles(t, dir, "src"), truth); d != "" {
		t.Errorf("hourly files differ from the packets' own hours:\n%s", d)
	}
}

// Pattern mistakes are usage errors that say why; a directory that cannot
// be made is a runtime error naming it.
func TestOutputPatternErrors(t *testing.T) {
	dir := t.TempDir()
	small := pcapPath("small.pcap")
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"-w", p("f-%Y%m%dT%H.jsonl")}, "needs --window"},
		{[]string{"--summary", p("s-%Y%m%d.jsonl")}, "needs --window"},
		{[]string{"--window", "1h", "--retain", "3"}, "--retain 3 keeps the newest files of a time pattern"},
		{[]string{"--window", "1h", "--retain", "3", "-w", p("plain.jsonl")}, "--retain 3 keeps the newest files of a time pattern"},
		{[]string{"--window", "1h", "--retain", "3", "-w", p("f-%d-%H.jsonl")}, "needs names that put them in time order"},
		{[]string{"--window", "1h", "--retain", "-1", "-w", p("f-%Y%m%dT%H.jsonl")}, "--retain must not be negative"},
		{[]string{"--window", "1h", "-w", p("f-%Q.jsonl")}, "unknown conversion %Q"},
		{[]string{"--window", "1h", "-w", p("%Y/f-%H.jsonl")}, "file name only"},
		{[]string{"--window", "1h", "-w", p("f-%Y%m%d.jsonl"), "--summary", p("f-%Y%m%d.jsonl")}, "both name"},
	} {
		code, _, errs := run(append([]string{"replay", "--filter", "exact", small}, c.args...)...)
		if code != ExitUsage || !strings.Contains(errs, c.says) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, errs, ExitUsage, c.says)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("usage errors left files: %v", entries)
	}

	// A directory under a regular file cannot be made.
	notDir := p("file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(notDir, "sub", "f-%Y%m%dT%H.jsonl")
	code, _, errs := run("replay", "--filter", "exact", "--window", "1h", "-w", bad, small)
	if code != ExitError || !strings.Contains(errs, filepath.Join(notDir, "sub")) {
		t.Errorf("-w %s: exit %d, stderr %q; want %d and the directory", bad, code, errs, ExitError)
	}

	// Without a conversion a path is a plain file, %% a literal %.
	code, _, errs = run("replay", "--filter", "exact", "-w", p("100%%.jsonl"), small)
	if code != ExitOK {
		t.Fatalf("-w 100%%%%.jsonl: exit %d: %s", code, errs)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"100%.jsonl", "file"}) {
		t.Errorf("-w 100%%%%.jsonl wrote %v", names)
	}
}

// --out and --summary may not name one file, where their lines would
// interleave, but both may go to /dev/null (a run for its exports or
// metrics alone).
func TestOutputsBothToDevNull(t *testing.T) {
	small := pcapPath("small.pcap")
	code, out, errs := run("replay", "--filter", "exact", "--window", "1m", "--out", os.DevNull, "--summary", os.DevNull, small)
	if code != ExitOK || out != "" || !strings.Contains(errs, "totals: packets 2000") {
		t.Errorf("--out and --summary %s: exit %d, stdout %q, stderr %q", os.DevNull, code, out, errs)
	}
	same := filepath.Join(t.TempDir(), "both.jsonl")
	code, _, errs = run("replay", "--filter", "exact", "--window", "1m", "--out", same, "--summary", same, small)
	if code != ExitUsage || !strings.Contains(errs, "both name") {
		t.Errorf("--out and --summary %s: exit %d, stderr %q; want %d and \"both name\"", same, code, errs, ExitUsage)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

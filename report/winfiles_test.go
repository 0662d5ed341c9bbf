package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/report/outfile"
)

func newTestFiles(t *testing.T, dir, pattern string, retain int) *outfile.Files {
	t.Helper()
	p, err := outfile.ParsePattern(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := outfile.NewFiles(p, retain, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// win is a 30-minute window starting at hh:mm on 2026-11-25.
func win(hhmm string) (start, end int64) {
	t, err := time.Parse(time.RFC3339, "2026-11-25T"+hhmm+":00Z")
	if err != nil {
		panic(err)
	}
	return t.UnixNano(), t.Add(30 * time.Minute).UnixNano()
}

// srcRecord is a record of source 10.0.0.n in the window starting at hhmm.
func srcRecord(n int, hhmm string) record.Record {
	start, end := win(hhmm)
	a := netip.AddrFrom4([4]byte{10, 0, 0, byte(n)})
	return record.Record{Key: flow.MakeKey(flow.KeySrc, a, netip.Addr{}, 0, 0, 0), TimeNs: start + 1, WindowNs: start, WindowEndNs: end, Windowed: true}
}

func windowSummary(hhmm string, final bool) *record.Summary {
	start, end := win(hhmm)
	return &record.Summary{WindowSummary: record.WindowSummary{StartNs: start, EndNs: end, Final: final, Windowed: true}}
}

// sources returns the src of each jsonl record of path, in order.
func sources(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct{ Src string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		got = append(got, r.Src)
	}
	return got
}

func dirList(t *testing.T, dir string) []string {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// Hourly files of 30-minute windows: records go to the file of their
// window's start, also when a later window's records come before an
// earlier window's summary (lateness); a file is renamed into place only
// when the window that ends its hour closes, and an hour without records
// still gets its (empty) file; the final window commits what is open.
func TestRecordFilesByPeriod(t *testing.T) {
	dir := t.TempDir()
	rf, err := NewRecordFiles(newTestFiles(t, dir, "src-%Y%m%dT%H.jsonl", 0), "jsonl", flow.KeySrc)
	if err != nil {
		t.Fatal(err)
	}
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("records", rf.Records(&record.Batch{Records: []record.Record{srcRecord(1, "10:00"), srcRecord(2, "10:00"), srcRecord(3, "10:30")}}))
	step("window 10:00", rf.Window(windowSummary("10:00", false)))
	if got := dirList(t, dir); !slices.Equal(got, []string{"src-20261125T10.jsonl.tmp"}) {
		t.Fatalf("after the 10:00 window (its hour goes on) the directory holds %v", got)
	}
	step("records", rf.Records(&record.Batch{Records: []record.Record{srcRecord(4, "11:30"), srcRecord(5, "10:30")}}))
	step("window 10:30", rf.Window(windowSummary("10:30", false)))
	if got := dirList(t, dir); !slices.Equal(got, []string{"src-20261125T10.jsonl", "src-20261125T11.jsonl.tmp"}) {
		t.Fatalf("after the 10:30 window the directory holds %v", got)
	}
	if got := sources(t, filepath.Join(dir, "src-20261125T10.jsonl")); !slices.Equal(got, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.5"}) {
		t.Errorf("the 10:00 hour holds %v", got)
	}
	step("window 11:00", rf.Window(windowSummary("11:00", false)))
	step("window 11:30", rf.Window(windowSummary("11:30", false)))
	step("window 12:00", rf.Window(windowSummary("12:00", true))) // a final window without records
	step("close", rf.Close())
	if got := dirList(t, dir); !slices.Equal(got, []string{"src-20261125T10.jsonl", "src-20261125T11.jsonl", "src-20261125T12.jsonl"}) {
		t.Fatalf("at the end the directory holds %v", got)
	}
	if got := sources(t, filepath.Join(dir, "src-20261125T11.jsonl")); !slices.Equal(got, []string{"10.0.0.4"}) {
		t.Errorf("the 11:00 hour holds %v", got)
	}
	if got := sources(t, filepath.Join(dir, "src-20261125T12.jsonl")); len(got) != 0 {
		t.Errorf("the empty 12:00 hour holds %v", got)
	}
}

// A run that stops without its final window (an error, or a crash, which
// Close stands for here) leaves the open file under its temporary name
// only: what was committed is whole, nothing looks finished that is not.
func TestRecordFilesUnfinishedStayTemporary(t *testing.T) {
	dir := t.TempDir()
	rf, _ := NewRecordFiles(newTestFiles(t, dir, "src-%H%M.csv", 0), "csv", flow.KeySrc)
	rf.Records(&record.Batch{Records: []record.Record{srcRecord(1, "10:00"), srcRecord(2, "10:30")}})
	if err := rf.Window(windowSummary("10:00", false)); err != nil {
		t.Fatal(err)
	}
	if err := rf.Close(); err != nil {
		t.Fatal(err)
	}
	if got := dirList(t, dir); !slices.Equal(got, []string{"src-1000.csv", "src-1030.csv.tmp"}) {
		t.Fatalf("the directory holds %v", got)
	}
	// Every csv file starts with its header.
	for _, name := range []string{"src-1000.csv", "src-1030.csv.tmp"} {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		if !strings.HasPrefix(string(b), "ts,src,window\n") || strings.Count(string(b), "\n") != 2 {
			t.Errorf("%s: %q, want the header and one record", name, b)
		}
	}
}

// Daily summary files of 30-minute windows: one line per window, the file
// committed when the day's last window closes, retention applied.
func TestSummaryFilesByDay(t *testing.T) {
	dir := t.TempDir()
	sf := NewSummaryFiles(newTestFiles(t, dir, "sum-%F.jsonl", 1))
	day := func(d int, hhmm string, final bool) *record.Summary {
		s := windowSummary(hhmm, final)
		s.StartNs += int64(d) * int64(24*time.Hour)
		s.EndNs += int64(d) * int64(24*time.Hour)
		return s
	}
	for _, s := range []*record.Summary{day(0, "23:00", false), day(0, "23:30", false), day(1, "00:00", false), day(1, "23:30", false), day(2, "00:00", true)} {
		if err := sf.Window(s); err != nil {
			t.Fatal(err)
		}
	}
	sf.Close()
	// Retention 1 keeps the newest day file only.
	if got := dirList(t, dir); !slices.Equal(got, []string{"sum-2026-11-27.jsonl"}) {
		t.Fatalf("the directory holds %v", got)
	}
	rd := NewSummaryReader(strings.NewReader(string(mustReadFile(t, filepath.Join(dir, "sum-2026-11-27.jsonl")))))
	var s record.Summary
	if err := rd.Read(&s); err != nil || !s.Final {
		t.Fatalf("the last day's summary: %+v, %v", s, err)
	}
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Records or summaries of a run without windows cannot name a file.
func TestWindowFilesNeedWindows(t *testing.T) {
	dir := t.TempDir()
	rf, _ := NewRecordFiles(newTestFiles(t, dir, "src-%H.jsonl", 0), "jsonl", flow.KeySrc)
	r := srcRecord(1, "10:00")
	r.WindowNs, r.WindowEndNs, r.Windowed = 0, 0, false
	if err := rf.Records(&record.Batch{Records: []record.Record{r}}); !errors.Is(err, ErrNoWindows) {
		t.Errorf("a record without window: %v, want ErrNoWindows", err)
	}
	sf := NewSummaryFiles(newTestFiles(t, dir, "sum-%H.jsonl", 0))
	if err := sf.Window(&record.Summary{}); !errors.Is(err, ErrNoWindows) {
		t.Errorf("a summary without window: %v, want ErrNoWindows", err)
	}
}

// Once a window's file is open, writing its records allocates nothing.
func TestRecordFilesNoAllocsPerRecord(t *testing.T) {
	dir := t.TempDir()
	rf, _ := NewRecordFiles(newTestFiles(t, dir, "src-%H.jsonl", 0), "jsonl", flow.KeySrc)
	recs := make([]record.Record, 256)
	for i := range recs {
		recs[i] = srcRecord(i, "10:00")
	}
	b := &record.Batch{Records: recs}
	rf.Records(b) // opens the file
	if allocs := testing.AllocsPerRun(50, func() {
		if err := rf.Records(b); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("%v allocations per batch of %d records", allocs, len(recs))
	}
	rf.Close()
}

// The first window Unix ns reach (its start saturated at math.MinInt64),
// windows before 1970, ending at the epoch, starting at it, and the last
// window Unix ns reach (its end saturated at math.MaxInt64) each name
// their file by their start, records and summaries alike: "has a window"
// is Windowed, never a zero bound (issue 25: a window ending at the epoch
// stopped collect with ErrNoWindows). Years before 1970 are four digits
// as any other (Unix ns reach 1677 to 2262), Unix seconds are negative.
func TestWindowFilesAtAnyTime(t *testing.T) {
	const minute = int64(time.Minute)
	last := math.MaxInt64 / minute * minute // 2262-04-11T23:47:00Z
	type window struct{ start, end int64 }
	windows := []window{{math.MinInt64, -153722867 * minute}, {-2 * minute, -minute}, {-minute, 0}, {0, minute}, {last, math.MaxInt64}}
	for _, tc := range []struct {
		pattern string
		names   []string // of each window's file, in order
	}{
		{"%Y%m%dT%H%M.jsonl", []string{"16770921T0012.jsonl", "19691231T2358.jsonl", "19691231T2359.jsonl", "19700101T0000.jsonl", "22620411T2347.jsonl"}},
		{"%F.jsonl", []string{"1677-09-21.jsonl", "1969-12-31.jsonl", "1969-12-31.jsonl", "1970-01-01.jsonl", "2262-04-11.jsonl"}},
		{"%s.jsonl", []string{"-9223372037.jsonl", "-120.jsonl", "-60.jsonl", "0.jsonl", "9223372020.jsonl"}},
	} {
		dir := t.TempDir()
		rf, err := NewRecordFiles(newTestFiles(t, dir, "src-"+tc.pattern, 0), "jsonl", flow.KeySrc)
		if err != nil {
			t.Fatal(err)
		}
		sf := NewSummaryFiles(newTestFiles(t, dir, "sum-"+tc.pattern, 0))
		for i, w := range windows {
			a := netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})
			rec := record.Record{Key: flow.MakeKey(flow.KeySrc, a, netip.Addr{}, 0, 0, 0), TimeNs: w.end - 1, WindowNs: w.start, WindowEndNs: w.end, Windowed: true}
			if err := rf.Records(&record.Batch{Records: []record.Record{rec}}); err != nil {
				t.Fatalf("%s: the record of window [%d, %d): %v", tc.pattern, w.start, w.end, err)
			}
			s := &record.Summary{WindowSummary: record.WindowSummary{StartNs: w.start, EndNs: w.end, Windowed: true, Final: i == len(windows)-1, Packets: uint64(i + 1)}}
			if err := rf.Window(s); err != nil {
				t.Fatalf("%s: records: the summary of window [%d, %d): %v", tc.pattern, w.start, w.end, err)
			}
			if err := sf.Window(s); err != nil {
				t.Fatalf("%s: summaries: the summary of window [%d, %d): %v", tc.pattern, w.start, w.end, err)
			}
		}
		if err := errors.Join(rf.Close(), sf.Close()); err != nil {
			t.Fatal(err)
		}
		wantSrc := map[string][]string{}
		wantPackets := map[string][]uint64{}
		for i, name := range tc.names {
			wantSrc["src-"+name] = append(wantSrc["src-"+name], netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}).String())
			wantPackets["sum-"+name] = append(wantPackets["sum-"+name], uint64(i+1))
		}
		var want []string
		for n := range wantSrc {
			want = append(want, n)
		}
		for n := range wantPackets {
			want = append(want, n)
		}
		slices.Sort(want)
		if got := dirList(t, dir); !slices.Equal(got, want) {
			t.Errorf("%s: the directory holds %v, want %v", tc.pattern, got, want)
			continue
		}
		for n, srcs := range wantSrc {
			if got := sources(t, filepath.Join(dir, n)); !slices.Equal(got, srcs) {
				t.Errorf("%s: %s holds %v, want %v", tc.pattern, n, got, srcs)
			}
		}
		for n, packets := range wantPackets {
			rd := NewSummaryReader(strings.NewReader(string(mustReadFile(t, filepath.Join(dir, n)))))
			var got []uint64
			for range 10 {
				var s record.Summary
				if err := rd.Read(&s); err != nil {
					break
				}
				got = append(got, s.Packets)
				if w := windows[s.Packets-1]; s.StartNs != w.start || s.EndNs != w.end {
					t.Errorf("%s: %s: window [%d, %d) read back as [%d, %d)", tc.pattern, n, w.start, w.end, s.StartNs, s.EndNs)
				}
			}
			if !slices.Equal(got, packets) {
				t.Errorf("%s: %s holds the summaries of packets %v, want %v", tc.pattern, n, got, packets)
			}
		}
	}
}

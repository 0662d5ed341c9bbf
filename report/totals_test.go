package report

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// runTotalsExports are the totals of a run with two export destinations:
// one that lost records for two reasons and left some in the spool, and
// one that lost nothing.
var runTotalsExports = RunTotals{
	WindowSummary: record.WindowSummary{
		StartNs: at("2026-01-01T00:00:00Z"), EndNs: at("2026-01-01T00:02:00Z"),
		Packets: 20000, Keys: 20000, Distinct: 250,
	},
	Windows: 2, Observer: "r1", Filter: "exact", Key: flow.KeySrc,
	DamagedFiles: map[string]uint64{"empty": 1},
	Exports: []record.ExportStats{
		{Dest: "ipfix://127.0.0.1:9", Sent: 100, SentWindows: 1, Spooled: 40, SpooledWins: 1,
			Dropped: map[string]uint64{"queue_full": 0, "shutdown": 110, "rejected": 2}},
		{Dest: "clickhouse://127.0.0.1:8123/flows", Sent: 250, SentWindows: 2, Dropped: map[string]uint64{"shutdown": 0}},
	},
}

// The run totals line, written by hand from the RunTotals and
// runTotalsLine comments: maps in sorted order, reasons with a count of 0
// left out, dropped their sum.
const runTotalsExportsLine = `{"run_totals":{"windows":2,"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T00:02:00Z",` +
	`"packets":20000,"malformed":0,"skipped":0,"keys":20000,"prefiltered":0,"distinct":250,"dropped":0,` +
	`"malformed_by":{},"skipped_by":{},"dropped_by":{},"late":0,"late_by":{},"observer":"r1","filter":"exact","key":"src",` +
	`"damaged_files":{"empty":1},"exports":{` +
	`"clickhouse://127.0.0.1:8123/flows":{"sent":250,"sent_windows":2,"dropped":0,"dropped_by":{},"spooled":0,"spooled_windows":0},` +
	`"ipfix://127.0.0.1:9":{"sent":100,"sent_windows":1,"dropped":112,"dropped_by":{"rejected":2,"shutdown":110},"spooled":40,"spooled_windows":1}}}}` + "\n"

func TestRunTotalsLine(t *testing.T) {
	if got := string(AppendRunTotals(nil, &runTotalsExports)); got != runTotalsExportsLine {
		t.Errorf("run totals:\n got %s\nwant %s", got, runTotalsExportsLine)
	}
	if n := runTotalsExports.Lost(); n != 112 {
		t.Errorf("Lost() = %d, want 112", n)
	}
}

// A reader of summaries (flowdedup merge) skips the run totals line
// wherever it is; a line whose run_totals is not an object is no summary.
func TestSummaryReaderSkipsRunTotals(t *testing.T) {
	if err := record.ParseSummary([]byte(strings.TrimSuffix(runTotalsExportsLine, "\n")), new(record.Summary)); !errors.Is(err, record.ErrRunTotals) {
		t.Errorf("ParseSummary(run totals) = %v, want ErrRunTotals", err)
	}
	in := summary1 + runTotalsExportsLine + summary2 + runTotalsExportsLine
	sums, err := ReadSummaries(strings.NewReader(in))
	if err != nil || len(sums) != 2 || sums[0].Packets != 1000 || sums[1].Packets != 500 {
		t.Errorf("ReadSummaries: %d summaries, %v; want the 2 windows", len(sums), err)
	}
	for _, bad := range []string{`{"run_totals":5}`, `{"run_totals":null}`, `{"run_totals":[]}`} {
		_, err := ReadSummaries(strings.NewReader(summary1 + bad + "\n"))
		var se *SummaryError
		if !errors.As(err, &se) || se.Line != 2 || !errors.Is(err, record.ErrSummary) {
			t.Errorf("%s: %v, want a *SummaryError of line 2", bad, err)
		}
	}
}

// The final window's summary file takes the run totals and is committed
// then; without them (a run without exports) Close commits it.
func TestSummaryFilesRunTotals(t *testing.T) {
	for _, totals := range []bool{true, false} {
		dir := t.TempDir()
		sf := NewSummaryFiles(newTestFiles(t, dir, "sum-%H.jsonl", 0))
		for _, s := range []*record.Summary{windowSummary("10:00", false), windowSummary("10:30", false), windowSummary("11:00", true)} {
			if err := sf.Window(s); err != nil {
				t.Fatal(err)
			}
		}
		if got := dirList(t, dir); !slices.Equal(got, []string{"sum-10.jsonl", "sum-11.jsonl.tmp"}) {
			t.Errorf("totals %v: after the final window the directory holds %v, want the final file still open", totals, got)
		}
		if totals {
			if err := sf.Totals(&runTotalsExports); err != nil {
				t.Fatal(err)
			}
		}
		if err := sf.Close(); err != nil {
			t.Fatal(err)
		}
		if got := dirList(t, dir); !slices.Equal(got, []string{"sum-10.jsonl", "sum-11.jsonl"}) {
			t.Errorf("totals %v: the directory holds %v", totals, got)
		}
		last := string(mustReadFile(t, filepath.Join(dir, "sum-11.jsonl")))
		if got := strings.HasSuffix(last, "\n"+runTotalsExportsLine); got != totals {
			t.Errorf("totals %v: the last file ends with the run totals: %v\n%s", totals, got, last)
		}
		if sums, err := ReadSummaries(strings.NewReader(last)); err != nil || len(sums) != 1 || !sums[0].Final {
			t.Errorf("totals %v: the last file reads as %d summaries, %v; want the final one", totals, len(sums), err)
		}
	}
}

// The totals line of each export says what it sent: IPFIX carries records
// only, so its line counts no window summaries ("sent 100 records and 1
// window summaries" was read as summaries sent over IPFIX).
func TestExportTotalsLine(t *testing.T) {
	for _, c := range []struct {
		st   record.ExportStats
		want string
	}{
		{runTotalsExports.Exports[0],
			"export ipfix://127.0.0.1:9: sent 100 records (IPFIX carries no window summaries), dropped 112 (rejected 2, shutdown 110), 40 records left in the spool for the next run\n"},
		{record.ExportStats{Dest: "ipfix+tcp://[::1]:4739", Sent: 7, SentWindows: 3},
			"export ipfix+tcp://[::1]:4739: sent 7 records (IPFIX carries no window summaries), dropped 0\n"},
		{runTotalsExports.Exports[1],
			"export clickhouse://127.0.0.1:8123/flows: sent 250 records and 2 window summaries, dropped 0\n"},
		{record.ExportStats{Dest: "clickhouse://h:8123/db", Sent: 1, SentWindows: 1, SpooledWins: 1},
			"export clickhouse://h:8123/db: sent 1 records and 1 window summaries, dropped 0, 0 records and 1 window summaries left in the spool for the next run\n"},
	} {
		if got := string(appendExportTotals(nil, c.st)); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}

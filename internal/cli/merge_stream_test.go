package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/sketch"
)

// TestMergeSameAsBefore: merge prints, byte for byte, what it printed
// before it streamed, for the same summary files in text, json and csv,
// by window and by period, with a router's summaries split over two files
// given out of time order (testdata/merge/README says how they were made).
func TestMergeSameAsBefore(t *testing.T) {
	dir := filepath.Join("testdata", "merge")
	in := func(names ...string) []string {
		for i, n := range names {
			names[i] = filepath.Join(dir, n+".jsonl")
		}
		return names
	}
	for _, c := range []struct {
		golden string
		cfg    MergeConfig
		files  []string
	}{
		{"text.out", MergeConfig{Format: "text"}, in("r1b", "r1a", "r2", "r3")},
		{"json.out", MergeConfig{Format: "json"}, in("r1a", "r1b", "r2", "r3")},
		{"by1h.csv", MergeConfig{Format: "csv", By: 3600e9}, in("r2", "r3", "r1a", "r1b")},
		{"by10m.json", MergeConfig{Format: "json", By: 600e9}, in("r3", "r1b")},
	} {
		var out, errb bytes.Buffer
		if err := runMerge(context.Background(), &c.cfg, c.files, nil, &out, &errb); err != nil {
			t.Fatalf("%s: %v", c.golden, err)
		}
		want := mustRead(t, filepath.Join(dir, c.golden))
		if !bytes.Equal(out.Bytes(), want) {
			t.Errorf("%s: merge printed\n%s\nwant, as before it streamed,\n%s", c.golden, out.Bytes(), want)
		}
	}
}

// summaryLine is a summary line of a one-minute window starting at minute
// min, with the sketch sk.
func summaryLine(min int, sk []byte) string {
	start := fmt.Sprintf("2026-01-01T%02d:%02d:00Z", min/60, min%60)
	end := fmt.Sprintf("2026-01-01T%02d:%02d:00Z", (min+1)/60, (min+1)%60)
	return fmt.Sprintf(`{"window_start":%q,"window_end":%q,"packets":1,"malformed":0,"skipped":0,"keys":1,"prefiltered":0,"distinct":1,"dropped":0,`+
		`"malformed_by":{},"skipped_by":{},"dropped_by":{},"final":false,"observer":"r","filter":"exact","key":"src","late":0,"late_by":{},`+
		`"distinct_estimate":0,"sketch":%q}`+"\n", start, end, base64.StdEncoding.EncodeToString(sk))
}

func emptySketch(t *testing.T, p uint8) []byte {
	t.Helper()
	h, err := sketch.New(p, sketch.DefaultSeed)
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A sketch of a higher precision than flowdedup writes (here 18: 256 KiB
// of registers from a line of about 1 KB) is refused before it is
// decoded, with the file and line.
func TestMergeRefusesLargeSketch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p18.jsonl")
	data := summaryLine(0, emptySketch(t, sketch.DefaultPrecision)) + summaryLine(1, emptySketch(t, 18))
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run("merge", path)
	if code != ExitError || !strings.Contains(errs, path+":2:") || !strings.Contains(errs, "precision 18") || !strings.Contains(errs, "flowdedup writes 14") {
		t.Errorf("exit %d, stderr %q; want exit %d naming %s:2 and precision 18", code, errs, ExitError, path)
	}
}

// A file that goes back in time to a window merge has already written
// fails with the file and line, rather than print that window twice; one
// that goes back only within the windows still open merges as before.
func TestMergeOutOfOrder(t *testing.T) {
	sk := emptySketch(t, sketch.DefaultPrecision)
	dir := t.TempDir()
	back := filepath.Join(dir, "back.jsonl")
	if err := os.WriteFile(back, []byte(summaryLine(0, sk)+summaryLine(1, sk)+summaryLine(2, sk)+summaryLine(0, sk)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run("merge", back)
	if code != ExitError || !strings.Contains(errs, back+":4:") || !strings.Contains(errs, "time order") {
		t.Errorf("exit %d, stderr %q; want exit %d naming %s:4 and time order", code, errs, ExitError, back)
	}
	// By the hour, minutes 5 then 3 of the same hour are both in the open
	// period.
	within := filepath.Join(dir, "within.jsonl")
	if err := os.WriteFile(within, []byte(summaryLine(5, sk)+summaryLine(3, sk)+summaryLine(61, sk)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run("merge", "--by", "1h", "--format", "csv", within)
	if code != ExitOK || !strings.Contains(out, "2026-01-01T00:00:00Z,2026-01-01T01:00:00Z,r,2,") || !strings.Contains(out, "2026-01-01T01:00:00Z,2026-01-01T02:00:00Z,r,1,") {
		t.Errorf("exit %d, stderr %q, stdout\n%s\nwant two hours, of 2 and 1 summaries", code, errs, out)
	}
}

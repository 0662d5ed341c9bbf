package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// capRecord is one record of a capture file as the test lays it out from
// the format's length fields: a pcap record or a pcapng block.
type capRecord struct {
	start, total int
	name         string // pcapng: the block's name in messages
	packet       bool
}

// layoutPcap lays out a little-endian pcap file: its records after the
// 24-byte header.
func layoutPcap(t *testing.T, b []byte) []capRecord {
	t.Helper()
	if binary.LittleEndian.Uint32(b) != 0xa1b23c4d && binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 {
		t.Fatal("not a little-endian pcap")
	}
	var out []capRecord
	for off := 24; off < len(b); {
		n := 16 + int(binary.LittleEndian.Uint32(b[off+8:]))
		out = append(out, capRecord{start: off, total: n, packet: true})
		off += n
	}
	return out
}

// layoutNg lays out a little-endian pcapng file: its blocks, the section
// header block first.
func layoutNg(t *testing.T, b []byte) []capRecord {
	t.Helper()
	names := map[uint32]string{0x0a0d0d0a: "the section header block", 1: "an interface description block", 6: "an enhanced packet block"}
	var out []capRecord
	for off := 0; off < len(b); {
		typ := binary.LittleEndian.Uint32(b[off:])
		n := int(binary.LittleEndian.Uint32(b[off+4:]))
		if names[typ] == "" || n < 12 {
			t.Fatalf("block at %d: type %#x, length %d", off, typ, n)
		}
		out = append(out, capRecord{start: off, total: n, name: names[typ], packet: typ == 6})
		off += n
	}
	return out
}

// nthPacket returns the index in recs of the k-th (1-based) packet record,
// and the record number the reader gives it (packets before it, plus one).
func nthPacket(recs []capRecord, k int) (i int, record int) {
	for i, r := range recs {
		if r.packet {
			record++
			if record == k {
				return i, record
			}
		}
	}
	panic("no such packet")
}

func gzipData(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// damageCase is a damaged capture file and what replay must say of it.
type damageCase struct {
	name string
	data []byte // the file
	good []byte // the capture of the records before the damage; nil: none
	warn string // the warning after "flowdedup replay: warning: PATH: "
}

// damageCases builds the damaged files of one format from a good capture
// (plain: little-endian pcap or pcapng), each with the warning it must get,
// computed from the capture's layout: cut inside a record header, inside
// record data (pcapng: inside a block header and a packet block), garbage
// where a record should be, an empty file, one byte, a header cut short;
// for gzip files, the same captures compressed, plus a gzip stream cut in
// the middle.
func damageCases(t *testing.T, plain []byte, ng, gz bool) []damageCase {
	var recs []capRecord
	hdrLen := 24
	if ng {
		recs = layoutNg(t, plain)
		hdrLen = recs[0].total
	} else {
		recs = layoutPcap(t, plain)
	}
	file, where := "file ends", ""
	if gz {
		file, where = "gzip data ends", " of the decompressed data"
	}
	i, rec := nthPacket(recs, 700)
	r := recs[i]
	var cs []damageCase
	add := func(name string, data []byte, goodEnd int, warn string) {
		var good []byte
		if goodEnd > 0 {
			good = data[:goodEnd]
		}
		cs = append(cs, damageCase{name, data, good, warn})
	}
	at := fmt.Sprintf("record %d at offset %d%s", rec, r.start, where)
	if ng {
		add("cut in a block header", plain[:r.start+5], r.start,
			fmt.Sprintf("truncated dump file: %s: %s inside a block header after 5 of its 8 bytes", at, file))
		add("cut in a packet block", plain[:r.start+40], r.start,
			fmt.Sprintf("truncated dump file: %s: %s inside an enhanced packet block after 40 of its %d bytes", at, file, r.total))
		add("garbage block", append(slices.Clone(plain[:r.start]), bytes.Repeat([]byte{0xff}, 64)...), r.start,
			fmt.Sprintf("damaged capture file: %s: block type 0xffffffff: invalid length 4294967295; the rest of the file is skipped", at))
		add("short header", plain[:20], 0,
			fmt.Sprintf("truncated dump file: file header at offset 0%s: %s inside the section header block after 20 of its %d bytes", where, file, hdrLen))
	} else {
		add("cut in a record header", plain[:r.start+7], r.start,
			fmt.Sprintf("truncated dump file: %s: %s inside the record header after 7 of its 16 bytes", at, file))
		add("cut in record data", plain[:r.start+16+5], r.start,
			fmt.Sprintf("truncated dump file: %s: %s inside the record data after 5 of its %d bytes", at, file, r.total-16))
		add("garbage record", append(slices.Clone(plain[:r.start]), bytes.Repeat([]byte{0xff}, 64)...), r.start,
			fmt.Sprintf("damaged capture file: %s: captured length 4294967295 exceeds 262144; the rest of the file is skipped", at))
		add("short header", plain[:20], 0,
			fmt.Sprintf("truncated dump file: file header at offset 0%s: %s inside the pcap file header after 20 of its 24 bytes", where, file))
	}
	if gz {
		add("empty", nil, 0, "truncated dump file: file header at offset 0 of the decompressed data: empty gzip data")
		add("one byte", plain[:1], 0,
			"truncated dump file: file header at offset 0 of the decompressed data: gzip data ends inside the magic number after 1 of its 4 bytes")
	} else {
		add("empty", nil, 0, "truncated dump file: file header at offset 0: empty file")
		add("one byte", plain[:1], 0, "truncated dump file: file header at offset 0: file ends inside the magic number after 1 of its 4 bytes")
	}
	if !gz {
		return cs
	}
	// The same damaged captures, whole in gzip; their good parts stay
	// plain (replay does not care).
	for i := range cs {
		cs[i].data = gzipData(t, cs[i].data)
	}
	// A gzip stream cut in the middle: the records it still decompresses
	// are replayed (klauspost/compress's gzip, which the reader uses and
	// which is not under test, counts them: where inflation stops in a cut
	// stream is the library's choice, and compress/gzip's differs).
	z := gzipData(t, plain)
	cut := z[:len(z)/2]
	zr, err := gzip.NewReader(bytes.NewReader(cut))
	if err != nil {
		t.Fatal(err)
	}
	prefix, _ := io.ReadAll(zr)
	k := 0
	for k < len(recs) && recs[k].start+recs[k].total <= len(prefix) {
		k++
	}
	r = recs[k]
	packets := 0
	for _, x := range recs[:k] {
		if x.packet {
			packets++
		}
	}
	what := fmt.Sprintf("the record data after %d of its %d bytes", len(prefix)-r.start-16, r.total-16)
	switch {
	case ng && len(prefix)-r.start < 8:
		what = fmt.Sprintf("a block header after %d of its 8 bytes", len(prefix)-r.start)
	case ng:
		what = fmt.Sprintf("%s after %d of its %d bytes", r.name, len(prefix)-r.start, r.total)
	case len(prefix)-r.start < 16:
		what = fmt.Sprintf("the record header after %d of its 16 bytes", len(prefix)-r.start)
	}
	cs = append(cs, damageCase{"gzip stream cut", cut, prefix[:r.start],
		fmt.Sprintf("truncated dump file: record %d at offset %d of the decompressed data: gzip stream cut short inside %s", packets+1, r.start, what)})
	return cs
}

// replayFiles runs replay with args, writing records and summaries to
// files, and returns the exit code, stderr, the sorted record lines and
// the summaries.
func replayFiles(t *testing.T, args ...string) (code int, stderr string, records []string, summaries []map[string]any) {
	t.Helper()
	dir := t.TempDir()
	out, sum := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "summary.jsonl")
	code, _, stderr = run(append([]string{"replay", "--out", out, "--summary", sum, "--filter", "exact", "--key", "5tuple",
		"--workers", "2", "--seed", "1"}, args...)...)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("replay %q: exit %d, %s: %v", args, code, stderr, err)
	}
	records = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	slices.Sort(records)
	s, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(s)) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("summary %q: %v", line, err)
		}
		summaries = append(summaries, m)
	}
	return code, stderr, records, summaries
}

// A damaged capture file, of any format and damaged anywhere, gets exactly
// one warning naming it, its record and offset, with what is wrong (the
// expected text is computed from the file's layout); its records before
// the damage and every file after it are replayed, so the records are
// exactly those of a replay of the good part and the next file; the
// summary counts the record the damage cost once (malformed_by
// corrupt_file, and in packets; none for an empty file) and is otherwise
// that of the good part; the totals count the file by its reason. The exit status is 0,
// and 1 with --strict, which changes nothing else.
func TestReplayWarnsOncePerDamagedFile(t *testing.T) {
	t.Parallel()
	after := pcapPath("windows.pcap")
	for _, format := range []string{"pcap", "pcapng", "pcap.gz", "pcapng.gz"} {
		ng := strings.HasPrefix(format, "pcapng")
		src := "small.pcap"
		if ng {
			src = "small.pcapng"
		}
		plain, err := os.ReadFile(pcapPath(src))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range damageCases(t, plain, ng, strings.HasSuffix(format, ".gz")) {
			t.Run(format+"/"+c.name, func(t *testing.T) {
				dir := t.TempDir()
				bad := filepath.Join(dir, "bad."+format)
				if err := os.WriteFile(bad, c.data, 0o644); err != nil {
					t.Fatal(err)
				}
				wantArgs := []string{after}
				if c.good != nil {
					good := filepath.Join(dir, "good.capture")
					if err := os.WriteFile(good, c.good, 0o644); err != nil {
						t.Fatal(err)
					}
					wantArgs = []string{good, after}
				}
				_, _, wantRecs, wantSums := replayFiles(t, wantArgs...)

				for _, strict := range []bool{false, true} {
					args := []string{bad, after}
					wantCode := ExitOK
					if strict {
						args = append([]string{"--strict"}, args...)
						wantCode = ExitError
					}
					code, stderr, recs, sums := replayFiles(t, args...)
					if code != wantCode {
						t.Errorf("strict %v: exit %d, want %d: %s", strict, code, wantCode, stderr)
					}
					var warnings []string
					for line := range strings.Lines(stderr) {
						if strings.Contains(line, "warning:") {
							warnings = append(warnings, line)
						}
					}
					want := "flowdedup replay: warning: " + bad + ": " + c.warn + "\n"
					if len(warnings) != 1 || warnings[0] != want {
						t.Errorf("warnings %q\nwant     %q", warnings, want)
					}
					if strict != strings.Contains(stderr, "flowdedup replay: --strict: 1 of 2 capture files truncated or damaged") {
						t.Errorf("strict %v: stderr %q", strict, stderr)
					}
					if !slices.Equal(recs, wantRecs) {
						t.Errorf("strict %v: %d records, want the %d of a replay of the good part and the next file", strict, len(recs), len(wantRecs))
					}
					if len(sums) != 1 || len(wantSums) != 1 {
						t.Fatalf("summaries %v, want one", sums)
					}
					got, w := sums[0], wantSums[0]
					for _, f := range []string{"keys", "distinct", "skipped"} {
						if got[f] != w[f] {
							t.Errorf("summary %s %v, want %v", f, got[f], w[f])
						}
					}
					// An empty file held no record: it costs none. Any
					// other damage costs the record it was found in.
					lost, reason, malformedBy := 1.0, "truncated", "map[corrupt_file:1]"
					switch {
					case c.name == "empty":
						lost, reason, malformedBy = 0, "empty", "map[]"
					case strings.HasPrefix(c.warn, "damaged"):
						reason = "damaged"
					}
					if got["packets"] != w["packets"].(float64)+lost || got["malformed"] != w["malformed"].(float64)+lost ||
						fmt.Sprint(got["malformed_by"]) != malformedBy {
						t.Errorf("summary %v, want that of the good part %v with the damaged file's lost record counted (%v)", got, w, lost)
					}
					if totals := ", damaged files 1 (" + reason + " 1)\n"; !strings.Contains(stderr, totals) {
						t.Errorf("stderr %q, want the totals to end %q", stderr, totals)
					}
				}
			})
		}
	}
}

// Several damaged files get one warning each, in the order read, and the
// good files among them are read in full.
func TestReplayWarnsForEachFile(t *testing.T) {
	good, err := os.ReadFile(pcapPath("small.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var args []string
	for _, f := range []struct {
		name string
		data []byte
	}{{"a.pcap", nil}, {"b.pcap", good}, {"c.pcap", good[:1]}, {"d.pcap", good[:len(good)-3]}, {"e.pcap", good}} {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	code, stderr, _, sums := replayFiles(t, args...)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var warned []string
	for line := range strings.Lines(stderr) {
		if rest, ok := strings.CutPrefix(line, "flowdedup replay: warning: "); ok {
			warned = append(warned, filepath.Base(strings.SplitN(rest, ":", 2)[0]))
		}
	}
	if fmt.Sprint(warned) != "[a.pcap c.pcap d.pcap]" {
		t.Errorf("warnings for %v, want a.pcap, c.pcap, d.pcap once each:\n%s", warned, stderr)
	}
	// small.pcap twice and all but its last record once: 3*2000-1
	// packets, plus the records two damaged files cost (the empty one
	// cost none).
	if len(sums) != 1 || sums[0]["packets"] != float64(3*2000-1+2) || fmt.Sprint(sums[0]["malformed_by"]) != "map[corrupt_file:2]" {
		t.Errorf("summaries %v", sums)
	}
	if !strings.Contains(stderr, ", damaged files 3 (empty 1, truncated 2)\n") {
		t.Errorf("totals do not count the 3 damaged files by reason:\n%s", stderr)
	}
}

// A file that is no capture at all (no capture begins with its bytes) is
// a wrong argument, not a damaged capture: replay stops before it writes
// anything, naming it, with or without --strict.
func TestReplayRefusesAFileOfAnotherKind(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.pcap")
	if err := os.WriteFile(notes, []byte("these are not packets\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	code, _, stderr := run("replay", "--out", out, pcapPath("small.pcap"), notes)
	if code != ExitError || !strings.Contains(stderr, notes+": not a pcap or pcapng file") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("replay wrote records before refusing the file")
	}
}

// Replay's full help says what happens to a damaged file and what --strict does.
func TestReplayHelpOnDamage(t *testing.T) {
	code, out, _ := run("help", "replay")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{"--strict", "one warning on stderr", "corrupt_file"} {
		if !strings.Contains(out, w) {
			t.Errorf("flowdedup help replay lacks %q", w)
		}
	}
}

// The warning reaches stderr while the replay runs, before the final
// summary, not after the run: a long replay of many files shows a damaged
// one as it is read. The summaries go to the same stderr (--summary -),
// and every line of both stays whole.
func TestReplayWarnsWhileSummariesGoToStderr(t *testing.T) {
	good, err := os.ReadFile(pcapPath("windows.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.pcap")
	if err := os.WriteFile(cut, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"replay", "--filter", "exact", "--window", "1m", "--summary", "-",
		"--out", os.DevNull, cut, pcapPath("windows.pcap")}, &stdout, &stderr)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	warnAt, lastSummary := -1, -1
	for i, line := range strings.Split(stderr.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "flowdedup replay: warning: "+cut+": truncated dump file: record "):
			warnAt = i
		case strings.HasPrefix(line, "{"):
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("summary line %q mixed with another: %v", line, err)
			}
			lastSummary = i
		}
	}
	if warnAt < 0 || lastSummary < 0 || warnAt > lastSummary {
		t.Fatalf("warning on line %d, last summary on line %d: want the warning before the final summary:\n%s", warnAt, lastSummary, stderr.String())
	}
}

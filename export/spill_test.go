package export

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/report"
)

func openSpool(t *testing.T, dir string, max int64) *Spool {
	t.Helper()
	s, err := OpenSpool(dir, max)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// spoolFiles lists the spool files of every destination in dir.
func spoolFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "*"+spoolExt))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestSpoolRestart: with the destination down, batches and summaries go to
// the spool and Close does not wait for the drain time; a new Queue on the
// same directory (a restart) sends them, in order, with their IDs, before
// anything new, and deletes them once delivered.
func TestSpoolRestart(t *testing.T) {
	dir := t.TempDir()
	down := &fakeSink{fail: func(string, *record.Batch) error { return errDown }}
	notices := &testutil.SyncBuffer{}
	spool := openSpool(t, dir, 1<<30)
	cfg := QueueConfig{BatchSize: 25, BatchAge: time.Hour, Spool: spool, RetryMin: time.Millisecond, RetryMax: time.Millisecond, DrainTimeout: time.Hour, Notices: notices}
	q := newTestQueue(t, down, cfg)
	first := genRecords(0, 230)
	put(t, q, first[:100])
	q.Window(&record.Summary{WindowSummary: record.WindowSummary{StartNs: 1, EndNs: 2, Packets: 7}, Observer: "r1"})
	put(t, q, first[100:])
	start := time.Now()
	q.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close waited %v with everything in the spool and the destination down", d)
	}
	st := q.Stats()
	if st.Spooled != 230 || st.SpooledWins != 1 || dropped(st) != 0 || st.Sent != 0 {
		t.Errorf("stats after Close: %+v; want 230 records and 1 summary spooled, nothing lost", st)
	}
	if n := len(spoolFiles(t, dir)); n != 10+1 {
		t.Errorf("%d spool files, want 10 batches and a summary", n)
	}
	if !strings.Contains(notices.String(), "stay in the spool") {
		t.Errorf("notices do not say what stays in the spool:\n%s", notices)
	}
	down.mu.Lock()
	firstIDs := down.tries[0].ID
	down.mu.Unlock()
	spool.Close()

	// The restart.
	up := &fakeSink{}
	spool = openSpool(t, dir, 1<<30)
	defer spool.Close()
	cfg.Spool = spool
	q = newTestQueue(t, up, cfg)
	second := genRecords(1000, 30)
	put(t, q, second)
	q.Close()
	if got, want := up.records(), append(slices.Clone(first), second...); !slices.Equal(got, want) {
		t.Fatalf("after the restart %d records delivered, want the %d of both runs, in order", len(got), len(want))
	}
	batches, windows, order := up.snapshot()
	if len(windows) != 1 || windows[0].Packets != 7 || windows[0].Observer != "r1" || order[4] != "w1" {
		t.Errorf("summary from the spool: %+v at %v", windows, order)
	}
	for i := range 10 {
		// The first batch was attempted (its outcome unknown): Retry.
		if b := batches[i]; b.ID != firstIDs+uint64(i) || b.Retry != (i == 0) {
			t.Errorf("spooled batch %d: ID %d retry %v; want ID %d retry %v", i, b.ID, b.Retry, firstIDs+uint64(i), i == 0)
		}
	}
	if files := spoolFiles(t, dir); len(files) != 0 || spool.Used() != 0 {
		t.Errorf("spool after delivery: %v, %d bytes used; want empty", files, spool.Used())
	}
}

// TestSpoolFull: when the spool cannot take more, batches stay in memory,
// and once memory is full too the newest are dropped and counted as
// spool_full; the spool keeps the oldest, which the next run sends.
func TestSpoolFull(t *testing.T) {
	dir := t.TempDir()
	const batch = 10
	fileSize := len(appendSpoolFile(nil, "fake://dest", &record.Batch{Records: genRecords(0, batch)}, nil, false))
	spool := openSpool(t, dir, int64(3*fileSize)) // three batch files
	notices := &testutil.SyncBuffer{}
	down := &fakeSink{fail: func(string, *record.Batch) error { return errDown }}
	q := newTestQueue(t, down, QueueConfig{BatchSize: batch, MaxQueued: 4 * batch, BatchAge: time.Hour, Spool: spool,
		RetryMin: time.Millisecond, RetryMax: time.Millisecond, DrainTimeout: 10 * time.Millisecond, Notices: notices})
	// One batch at a time, each waited for until it is on disk or the
	// spool said it is full: the fourth does not fit. (Putting batches
	// without waiting, a bounded number of times, failed when the manager
	// was not scheduled before the bound was reached.)
	next := 0
	spoolFull := func() bool { return strings.Contains(notices.String(), "spool full") }
	for !spoolFull() {
		if next == 10*batch {
			t.Fatalf("no spool full notice after %d records:\n%s", next, notices)
		}
		put(t, q, genRecords(next, batch))
		next += batch
		waitFor(t, "the batch on disk, or the spool full", func() bool { return q.Stats().Spooled == next || spoolFull() })
	}
	if next != 4*batch {
		t.Errorf("the spool was full after %d records, want after the 4th batch", next)
	}
	// The spool is full and the destination down: memory no longer
	// drains (the batch in flight and the fourth stay), so what it can
	// take now is exact.
	room := 4*batch - q.Stats().Queued
	before := q.Stats().Dropped
	put(t, q, genRecords(next, 100))
	next += 100
	after := q.Stats().Dropped
	if got := after[DropSpoolFull] - before[DropSpoolFull]; got != uint64(100-room) {
		t.Errorf("100 records with room for %d: %d counted spool_full, want %d", room, got, 100-room)
	}
	q.Close()
	st := q.Stats()
	if st.Spooled != 3*batch || uint64(st.Spooled)+dropped(st) != uint64(next) {
		t.Errorf("after Close: %+v; want 3 batches spooled and the rest of %d records counted", st, next)
	}
	spool.Close()

	up := &fakeSink{}
	spool = openSpool(t, dir, int64(3*fileSize))
	defer spool.Close()
	q = newTestQueue(t, up, QueueConfig{Spool: spool})
	q.Close()
	if got := up.records(); !slices.Equal(got, genRecords(0, 3*batch)) {
		t.Errorf("the next run sent %d records; want the oldest 30, in order", len(got))
	}
}

// TestSpoolCorrupt: spool files that cannot be read back (a flipped bit,
// a truncation, garbage, another destination's file) are moved aside and
// counted in records, as their headers say (1 when a header cannot be
// read), and the others are sent.
func TestSpoolCorrupt(t *testing.T) {
	dir := t.TempDir()
	spool := openSpool(t, dir, 1<<30)
	down := &fakeSink{fail: func(string, *record.Batch) error { return errDown }}
	q := newTestQueue(t, down, QueueConfig{BatchSize: 10, BatchAge: time.Hour, Spool: spool, RetryMin: time.Millisecond, RetryMax: time.Millisecond})
	all := genRecords(0, 60)
	put(t, q, all)
	q.Close()
	// Another destination's file, copied into this one's directory.
	other, err := NewQueue("fake://other", down, QueueConfig{BatchSize: 10, Spool: spool, RetryMin: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	put(t, other, genRecords(500, 10))
	other.Close()
	spool.Close()

	files := spoolFiles(t, dir)
	mine := filepath.Join(dir, destDirName("fake://dest"))
	var own []string
	for _, f := range files {
		if filepath.Dir(f) == mine {
			own = append(own, f)
		} else {
			data, _ := os.ReadFile(f)
			os.WriteFile(filepath.Join(mine, "0000ffffffffffff"+spoolExt), data, 0o600) // sorts last
		}
	}
	slices.Sort(own)
	if len(own) != 6 {
		t.Fatalf("%d spool files of the destination, want 6", len(own))
	}
	flip, _ := os.ReadFile(own[1])
	flip[100] ^= 0x20
	os.WriteFile(own[1], flip, 0o600)
	trunc, _ := os.ReadFile(own[3])
	os.WriteFile(own[3], trunc[:len(trunc)-5], 0o600)
	os.WriteFile(own[4], []byte("not a spool file at all"), 0o600)

	spool = openSpool(t, dir, 1<<30)
	defer spool.Close()
	notices := &testutil.SyncBuffer{}
	up := &fakeSink{}
	q = newTestQueue(t, up, QueueConfig{Spool: spool, Notices: notices})
	q.Close()
	want := slices.Concat(all[0:10], all[20:30], all[50:60])
	if got := up.records(); !slices.Equal(got, want) {
		t.Errorf("sent %d records, want the %d of the sound files", len(got), len(want))
	}
	// Counted in records, as the headers say: 10 each for the flipped,
	// the truncated and the other destination's batch; the garbage's
	// header cannot be read: 1, at least one record.
	if st := q.Stats(); st.Dropped[DropSpoolCorrupt] != 31 || dropped(st) != 31 {
		t.Errorf("dropped %v, want spool_corrupt 31", st.Dropped)
	}
	if n := notices.String(); strings.Count(n, "counted as spool_corrupt: 10 records, as its header says") != 3 ||
		strings.Count(n, "its header cannot be read: counted as 1 spool_corrupt") != 1 {
		t.Errorf("notices do not say what each file counts as:\n%s", n)
	}
	aside, _ := filepath.Glob(filepath.Join(mine, spoolCorrupt, "*"))
	if len(aside) != 4 || strings.Count(notices.String(), "moved to") != 4 {
		t.Errorf("moved aside: %v; notices:\n%s", aside, notices)
	}
	for _, says := range []string{"checksum", "bytes, the header says", "shorter than a header", `for destination "fake://other"`} {
		if !strings.Contains(notices.String(), says) {
			t.Errorf("notices do not say %q:\n%s", says, notices)
		}
	}
}

// TestSpoolExclusive: one process per spool directory, one Queue per
// destination.
func TestSpoolExclusive(t *testing.T) {
	dir := t.TempDir()
	s := openSpool(t, dir, 1<<20)
	defer s.Close()
	if _, err := OpenSpool(dir, 1<<20); !errors.Is(err, ErrSpoolInUse) {
		t.Errorf("second OpenSpool: %v, want ErrSpoolInUse", err)
	}
	q := newTestQueue(t, &fakeSink{}, QueueConfig{Spool: s})
	defer q.Close()
	// A destination of an earlier run, not of this one.
	down := &fakeSink{fail: func(string, *record.Batch) error { return errDown }}
	old, err := NewQueue("ipfix://old:4739", down, QueueConfig{BatchSize: 5, Spool: s, RetryMin: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	put(t, old, genRecords(0, 10))
	old.Close()
	s.Close()
	s = openSpool(t, dir, 1<<20)
	defer s.Close()
	q2 := newTestQueue(t, &fakeSink{}, QueueConfig{Spool: s})
	defer q2.Close()
	if got := s.Unclaimed(); len(got) != 1 || got["ipfix://old:4739"] != 2 {
		t.Errorf("Unclaimed() = %v, want ipfix://old:4739 with 2 files", got)
	}
	if _, err := NewQueue("fake://dest", &fakeSink{}, QueueConfig{Spool: s}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("second Queue for one destination: %v", err)
	}
}

// TestSpoolHighWater: with the destination up but stuck in a call, memory
// more than half full spills to the spool, and when the call returns
// everything arrives in order: the batch in flight, the spooled ones, then
// those still in memory.
func TestSpoolHighWater(t *testing.T) {
	dir := t.TempDir()
	spool := openSpool(t, dir, 1<<30)
	defer spool.Close()
	sink := &fakeSink{gate: make(chan struct{})}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 10, MaxQueued: 40, BatchAge: time.Hour, Spool: spool})
	all := genRecords(0, 200)
	for i := 0; i < 200; i += 10 {
		put(t, q, all[i:i+10])
		waitFor(t, "memory back to half", func() bool { return q.Stats().Queued <= 20 })
	}
	if st := q.Stats(); st.Spooled < 100 || dropped(st) != 0 {
		t.Errorf("stats %+v: want most batches spooled and nothing dropped", st)
	}
	close(sink.gate)
	q.Close()
	if got := sink.records(); !slices.Equal(got, all) {
		t.Errorf("delivered %d records, want the %d given, once each, in order", len(got), len(all))
	}
	if files := spoolFiles(t, dir); len(files) != 0 || dropped(q.Stats()) != 0 {
		t.Errorf("left %v in the spool, dropped %v", files, q.Stats().Dropped)
	}
}

// TestSpoolKeepsObserver: the batches a run spools keep its observer
// (the Reporter's Config.Observer) and observation domain (the Queue's
// QueueConfig.Domain) into a later run with another --observer and
// --observation-domain, which sends them under the first run's name and
// domain, then its own records under its own. A version 1 file, left by a
// flowdedup before batches carried their observer, goes first, as it was
// written first, without an observer or domain: the destination's own.
func TestSpoolKeepsObserver(t *testing.T) {
	dir := t.TempDir()
	down := &fakeSink{fail: func(string, *record.Batch) error { return errDown }}
	spool := openSpool(t, dir, 1<<30)
	cfg := QueueConfig{BatchSize: 25, BatchAge: time.Hour, Spool: spool, RetryMin: time.Millisecond, RetryMax: time.Millisecond}
	run := func(sink *fakeSink, observer string, domain uint32, recs []record.Record) {
		t.Helper()
		cfg.Domain = record.Domain{ID: domain, Valid: true}
		q := newTestQueue(t, sink, cfg)
		r, err := report.New(report.Config{Kind: flow.Key5Tuple, Observer: observer, Exports: []record.Export{q}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			if err := r.Record(&recs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	first := genRecords(0, 60)
	run(down, "edge-fra1", 7, first)
	if n := len(spoolFiles(t, dir)); n != 3 {
		t.Fatalf("%d spool files, want the 3 batches of the first run", n)
	}
	down.mu.Lock()
	for _, b := range down.tries {
		if b.Observer != "edge-fra1" || b.Domain != (record.Domain{ID: 7, Valid: true}) {
			t.Errorf("first run tried batch %d with observer %q, domain %+v; want edge-fra1, 7", b.ID, b.Observer, b.Domain)
		}
	}
	down.mu.Unlock()
	spool.Close()
	old := genRecords(500, 5)
	v1 := appendSpoolFileV1(nil, "fake://dest", &record.Batch{ID: 42, Records: old}, nil, false)
	if err := os.WriteFile(filepath.Join(dir, destDirName("fake://dest"), fmt.Sprintf("%016x%s", uint64(firstSeq-1), spoolExt)), v1, 0o600); err != nil {
		t.Fatal(err)
	}

	// The restart, renamed.
	up := &fakeSink{}
	spool = openSpool(t, dir, 1<<30)
	defer spool.Close()
	cfg.Spool = spool
	second := genRecords(1000, 30)
	run(up, "edge-fra2", 9, second)

	type obsRec struct {
		observer string
		domain   record.Domain
		rec      record.Record
	}
	var want, got []obsRec
	for _, part := range []struct {
		observer string
		domain   record.Domain
		recs     []record.Record
	}{{"", record.Domain{}, old}, {"edge-fra1", record.Domain{ID: 7, Valid: true}, first}, {"edge-fra2", record.Domain{ID: 9, Valid: true}, second}} {
		for _, r := range part.recs {
			want = append(want, obsRec{part.observer, part.domain, r})
		}
	}
	batches, _, _ := up.snapshot()
	for _, b := range batches {
		for _, r := range b.Records {
			got = append(got, obsRec{b.Observer, b.Domain, r})
		}
	}
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("%d records delivered, want %d; record %d under observer %q, domain %+v; want %q, %+v",
					len(got), len(want), i, got[i].observer, got[i].domain, want[i].observer, want[i].domain)
			}
		}
		t.Fatalf("%d records delivered, want %d", len(got), len(want))
	}
	if batches[0].ID != 42 {
		t.Errorf("the version 1 file's batch went out as batch %d, want 42", batches[0].ID)
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Errorf("spool after delivery: %v", files)
	}
}

// A batch whose observer a spool file cannot hold is not spooled: an error
// (record.ErrObserver), no file, nothing taken from the bound. The Reporter never
// makes one (New refuses such an observer).
func TestSpoolObserverBound(t *testing.T) {
	dir := t.TempDir()
	spool := openSpool(t, dir, 1<<30)
	defer spool.Close()
	d, err := spool.claim("fake://dest")
	if err != nil {
		t.Fatal(err)
	}
	long := &record.Batch{ID: 1, Records: genRecords(0, 2), Observer: strings.Repeat("r", record.MaxObserverLen+1)}
	if err := d.put(long, nil, false, false); !errors.Is(err, record.ErrObserver) {
		t.Errorf("put of a batch with an observer of %d bytes: %v, want record.ErrObserver", len(long.Observer), err)
	}
	if files := spoolFiles(t, dir); len(files) != 0 || spool.Used() != 0 || len(d.entries) != 0 {
		t.Errorf("after the refused put: files %v, %d bytes used, %d entries", files, spool.Used(), len(d.entries))
	}
	long.Observer = long.Observer[1:]
	if err := d.put(long, nil, false, false); err != nil {
		t.Errorf("put of a batch with an observer of %d bytes: %v", len(long.Observer), err)
	}
}

// TestQueueKeepsRejected: with a spool, what the destination rejects for
// good is counted as rejected and kept in the destination's rejected
// directory for the operator: each batch's records as JSON lines, a
// summary as its line, and a line per file in errors.log with what the
// destination said; the first rejection is said, with where. The files
// count against the spool's bound, in this run and the next (which says
// they are there); what does not fit is counted and not kept.
func TestQueueKeepsRejected(t *testing.T) {
	dir := t.TempDir()
	spool := openSpool(t, dir, 1<<20)
	sink := &fakeSink{fail: func(op string, b *record.Batch) error {
		switch {
		case op == "records" && b.Records[0].Worker == 1:
			return fmt.Errorf("fake: CANNOT_PARSE_TEXT in row 3: %w", record.ErrRejected)
		case op == "window":
			return fmt.Errorf("fake: no table windows: %w", record.ErrRejected)
		}
		return nil
	}}
	notices := &testutil.SyncBuffer{}
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 10, BatchAge: time.Hour, Spool: spool, Notices: notices})
	all := genRecords(0, 100)
	var rejected [][]record.Record
	for i := 0; i < 100; i += 10 {
		put(t, q, all[i:i+10])
		if all[i].Worker == 1 {
			rejected = append(rejected, all[i:i+10])
		}
	}
	q.Window(&record.Summary{WindowSummary: record.WindowSummary{StartNs: at("2026-01-01T00:00:00Z"), EndNs: at("2026-01-01T01:00:00Z"), Distinct: 70}})
	q.Close()
	if st := q.Stats(); st.Dropped[DropRejected] != 31 || dropped(st) != 31 || st.Sent != 70 {
		t.Errorf("stats %+v: want 70 sent, 30 records and 1 summary rejected", st)
	}
	rdir := filepath.Join(dir, destDirName("fake://dest"), "rejected")
	names, err := filepath.Glob(filepath.Join(rdir, "batch-*.jsonl"))
	if err != nil || len(names) != len(rejected) {
		t.Fatalf("rejected batches kept: %v, %v; want %d", names, err, len(rejected))
	}
	slices.Sort(names) // by batch ID: the order they were given
	for i, name := range names {
		if got := jsonlSources(t, name); !slices.Equal(got, sourcesOf(rejected[i])) {
			t.Errorf("%s holds sources %v, want the rejected batch's %v", filepath.Base(name), got, sourcesOf(rejected[i]))
		}
	}
	sums, _ := filepath.Glob(filepath.Join(rdir, "summary-*.jsonl"))
	if len(sums) != 1 {
		t.Fatalf("rejected summaries kept: %v, want 1", sums)
	}
	if s, err := report.ReadSummaries(bytes.NewReader(readFile(t, sums[0]))); err != nil || len(s) != 1 || s[0].Distinct != 70 {
		t.Errorf("the kept summary reads as %+v, %v", s, err)
	}
	log := string(readFile(t, filepath.Join(rdir, "errors.log")))
	if strings.Count(log, "\n") != 4 || strings.Count(log, "CANNOT_PARSE_TEXT in row 3") != 3 || strings.Count(log, "no table windows") != 1 ||
		!strings.Contains(log, filepath.Base(names[0])+": batch ") || !strings.Contains(log, filepath.Base(sums[0])+": window summary 2026-01-01T00:00:00Z: ") {
		t.Errorf("errors.log:\n%s", log)
	}
	n := notices.String()
	if strings.Count(n, "rejected batch") != 1 || !strings.Contains(n, "kept for inspection in "+names[0]) ||
		!strings.Contains(n, "4 batches and summaries it rejected in this run are kept in "+rdir) {
		t.Errorf("notices:\n%s", n)
	}
	var size int64
	for _, f := range append(append(names, sums...), filepath.Join(rdir, "errors.log")) {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		size += fi.Size()
	}
	if spool.Used() != size {
		t.Errorf("spool uses %d bytes, want the %d of the rejected files", spool.Used(), size)
	}
	spool.Close()

	// The next run counts them against the bound and says they are there;
	// with the bound taken, a rejected batch is counted and not kept.
	spool = openSpool(t, dir, size+100)
	defer spool.Close()
	if spool.Used() != size {
		t.Errorf("reopened: spool uses %d bytes, want %d", spool.Used(), size)
	}
	notices = &testutil.SyncBuffer{}
	q = newTestQueue(t, sink, QueueConfig{BatchSize: 10, BatchAge: time.Hour, Spool: spool, Notices: notices})
	put(t, q, genRecords(1, 10)) // Worker 1 first: rejected
	q.Close()
	n = notices.String()
	if !strings.Contains(n, fmt.Sprintf("4 batches and summaries it rejected are kept in %s (%d bytes of the spool's bound)", rdir, size)) ||
		!strings.Contains(n, "not kept for inspection: export: spool full") {
		t.Errorf("notices of the next run:\n%s", n)
	}
	if st := q.Stats(); st.Dropped[DropRejected] != 10 {
		t.Errorf("next run: dropped %v, want 10 rejected", st.Dropped)
	}
	if files, _ := filepath.Glob(filepath.Join(rdir, "batch-*")); len(files) != len(rejected) {
		t.Errorf("%d rejected batches kept after the bound was reached, want still %d", len(files), len(rejected))
	}
}

// jsonlSources returns the src of each JSON line of path.
func jsonlSources(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for line := range strings.Lines(string(readFile(t, path))) {
		var r struct{ Src string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		out = append(out, r.Src)
	}
	return out
}

func sourcesOf(recs []record.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Key.Src().String())
	}
	return out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A corrupt file counts what its header says, but never more records than
// its size can hold: a flipped bit in the count cannot claim millions.
func TestSpoolEntryLost(t *testing.T) {
	const batch10 = spoolHeaderLen + 16 + 1 + spoolCRCLen + 10*spoolRecordLen // 10 records, a 16-byte destination
	for _, c := range []struct {
		e     spoolEntry
		n     int
		known bool
	}{
		{spoolEntry{known: true, records: 10, size: batch10}, 10, true},
		{spoolEntry{known: true, records: 1 << 22, size: batch10}, 10, true},
		{spoolEntry{known: true, records: 1 << 22, size: 40}, 1, false},
		{spoolEntry{known: true, summary: true, size: 500}, 1, true},
		{spoolEntry{size: 23}, 1, false},
	} {
		if n, known := c.e.lost(); n != c.n || known != c.known {
			t.Errorf("%+v: lost() = %d, %v; want %d, %v", c.e, n, known, c.n, c.known)
		}
	}
}

// TestSpoolKeepsSummariesBehindALargeBatch: at Close, with the destination
// down and a spool with room for the window summaries but not for the
// large batch before them, the summaries go to the spool and only the
// batch is lost (before, the first write that failed stopped the spooling
// and every summary after it was counted as shutdown). The room is the
// spool's bound here; TestSpoolKeepsSummariesOnAFullDisk makes it a full
// file system.
func TestSpoolKeepsSummariesBehindALargeBatch(t *testing.T) {
	const batch = 200
	batchFile := len(appendSpoolFile(nil, "fake://dest", &record.Batch{Records: genRecords(0, batch)}, nil, false))
	spool := openSpool(t, t.TempDir(), int64(batchFile-1))
	defer spool.Close()
	checkSummariesBehindLargeBatch(t, spool, batch)
}

// checkSummariesBehindLargeBatch gives a Queue whose destination is down
// a small batch, 3 window summaries, a batch the spool has no room for,
// then 7 more summaries (the order of the run: 7 of 10 summaries
// were lost), and checks that Close spools all but the large batch, which
// it counts as lost (shutdown).
func checkSummariesBehindLargeBatch(t *testing.T, spool *Spool, batch int) {
	t.Helper()
	notices := &testutil.SyncBuffer{}
	down := &fakeSink{fail: func(string, *record.Batch) error { return errDown }}
	q := newTestQueue(t, down, QueueConfig{BatchSize: batch, BatchAge: time.Hour, Spool: spool, Notices: notices,
		RetryMin: time.Millisecond, RetryMax: time.Millisecond, DrainTimeout: 20 * time.Millisecond})
	window := func(i int) {
		q.Window(&record.Summary{Observer: "r1", WindowSummary: record.WindowSummary{StartNs: int64(i) * int64(time.Minute), EndNs: int64(i+1) * int64(time.Minute)}})
	}
	q.Records(&record.Batch{Records: genRecords(0, 10), Observer: "r0"})
	for i := range 3 {
		window(i)
	}
	q.Records(&record.Batch{Records: genRecords(10, batch), Observer: "r1"}) // seals the small one, then fills one of its own
	for i := 3; i < 10; i++ {
		window(i)
	}
	q.Close()
	st := q.Stats()
	if st.SpooledWins != 10 || st.Spooled != 10 || st.Dropped[DropShutdown] != uint64(batch) || dropped(st) != uint64(batch) {
		t.Errorf("stats %+v: want the small batch and the 10 summaries spooled, and the %d records of the large batch lost (shutdown)\n%s", st, batch, notices)
	}
}

// TestSpoolKeepsSummariesOnAFullDisk: as above, on a real file system
// that is nearly full (a tmpfs of 256 KiB with 100 KiB left), where the
// large batch's write (136 KiB) fails with ENOSPC and the summaries (4 KiB
// each, a page, though they hold 200 bytes) still fit.
func TestSpoolKeepsSummariesOnAFullDisk(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k,mode=0700"); err != nil {
		testutil.SkipOrFail(t, "mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	if err := os.WriteFile(filepath.Join(dir, "filler"), make([]byte, 156<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	spool := openSpool(t, filepath.Join(dir, "spool"), 1<<30) // the bound is far: the disk is the limit
	defer spool.Close()
	const batch = 2000 // a file of 136 KiB
	checkSummariesBehindLargeBatch(t, spool, batch)
}

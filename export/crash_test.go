package export

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/export/clickhouse"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/record"
)

// spoolDown fills a spool in dir with the records of batches batches of
// size records each, and a window summary after them, as a run whose
// destination was down leaves it: the first batch was given to the
// destination (and failed), the others never were.
func spoolDown(t *testing.T, dir string, batches, size int) []record.Record {
	t.Helper()
	spool := openSpool(t, dir, 1<<30)
	defer spool.Close()
	down := &fakeSink{fail: func(string, *record.Batch) error { return errDown }}
	q := newTestQueue(t, down, QueueConfig{BatchSize: size, BatchAge: time.Hour, Spool: spool, RetryMin: time.Hour, RetryMax: time.Hour, DrainTimeout: time.Hour, Notices: &testutil.SyncBuffer{}})
	recs := genRecords(0, batches*size)
	put(t, q, recs)
	q.Window(&record.Summary{WindowSummary: record.WindowSummary{StartNs: at("2026-01-01T00:00:00Z"), EndNs: at("2026-01-01T01:00:00Z"), Packets: uint64(len(recs))}, Observer: "r1"})
	q.Close()
	if st := q.Stats(); st.Spooled != len(recs) || st.SpooledWins != 1 {
		t.Fatalf("spooling: %+v, want %d records and a summary in the spool", st, len(recs))
	}
	return recs
}

// attemptedOnDisk reads the spool files of dir and returns, by batch ID,
// whether each says "attempted".
func attemptedOnDisk(t *testing.T, dir string) map[uint64]bool {
	t.Helper()
	out := map[uint64]bool{}
	for _, path := range spoolFiles(t, dir) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var f spoolFile
		if err := decodeSpoolFile(data, "fake://dest", nil, &f); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !f.summary {
			out[f.id] = f.attempted
		}
	}
	return out
}

// Every batch and summary sent from the spool is marked attempted on disk
// before the destination is given it (issue 25: a batch that landed just
// before a kill -9 was sent again by the next run without the read-back).
// The first attempt of a file that was never given goes without
// record.Batch.Retry (no read-back is needed); one that was goes with it.
func TestSpoolMarkedBeforeSent(t *testing.T) {
	dir := t.TempDir()
	recs := spoolDown(t, dir, 5, 20)
	before := attemptedOnDisk(t, dir)
	if len(before) != 5 {
		t.Fatalf("%d batches in the spool, want 5", len(before))
	}
	var marked []bool // at each Records call: does the batch's file say attempted?
	var retry []bool
	up := &fakeSink{}
	up.fail = func(op string, b *record.Batch) error {
		if op == "records" {
			marked = append(marked, attemptedOnDisk(t, dir)[b.ID])
			retry = append(retry, b.Retry)
		}
		return nil
	}
	spool := openSpool(t, dir, 1<<30)
	defer spool.Close()
	q := newTestQueue(t, up, QueueConfig{BatchSize: 20, BatchAge: time.Hour, Spool: spool, DrainTimeout: time.Hour})
	q.Close()
	if got := up.records(); len(got) != len(recs) {
		t.Fatalf("%d records delivered, want %d", len(got), len(recs))
	}
	batches, _, _ := up.snapshot()
	for i, b := range batches {
		if !marked[i] {
			t.Errorf("batch %d (%d) was given to the destination before its spool file said attempted", i, b.ID)
		}
		if want := before[b.ID]; retry[i] != want {
			t.Errorf("batch %d (%d): Retry %v, want %v (its file said attempted: %v)", i, b.ID, retry[i], want, want)
		}
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Errorf("spool after delivery: %v", files)
	}
}

// A spool file that cannot be marked (the disk fails the write) is not
// sent: the Queue says so once and tries again later; once it can be
// marked, it is sent.
func TestSpoolUnmarkableNotSent(t *testing.T) {
	dir := t.TempDir()
	spoolDown(t, dir, 2, 10)
	var fail atomic.Bool
	fail.Store(true)
	var tries atomic.Int32
	openForMark = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		tries.Add(1)
		if fail.Load() {
			return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EIO}
		}
		return os.OpenFile(name, flag, perm)
	}
	defer func() { openForMark = os.OpenFile }()
	notices := &testutil.SyncBuffer{}
	up := &fakeSink{}
	spool := openSpool(t, dir, 1<<30)
	defer spool.Close()
	q := newTestQueue(t, up, QueueConfig{BatchSize: 10, BatchAge: time.Hour, Spool: spool, RetryMin: time.Millisecond, RetryMax: time.Millisecond, DrainTimeout: time.Hour, Notices: notices})
	// The first file was attempted in the run that spooled it: already
	// marked, it goes. The second is held, and tried again.
	waitFor(t, "the first batch delivered and the second tried again", func() bool { return len(up.records()) == 10 && tries.Load() >= 3 })
	if got := len(up.records()); got != 10 {
		t.Errorf("%d records delivered while the second file cannot be marked, want 10", got)
	}
	if n := strings.Count(notices.String(), "it is not sent until it is marked"); n != 1 {
		t.Errorf("the notice said %d times, want once:\n%s", n, notices)
	}
	fail.Store(false)
	q.Close()
	if got := len(up.records()); got != 20 {
		t.Errorf("%d records delivered once the file could be marked, want 20\n%s", got, notices)
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Errorf("spool after delivery: %v", files)
	}
}

// The environment of the helper process of TestSpoolReplayKilled.
const crashEnv = "FLOWDEDUP_TEST_SPOOL_CRASH"

// crashSink is the destination of the helper process: it passes calls to
// the ClickHouse exporter and kills its own process with SIGKILL at the
// given Records call, before giving it to the exporter ("before": the
// file is marked, nothing sent) or after the exporter took it ("after":
// the rows landed, the file not yet removed).
type crashSink struct {
	record.Destination
	at    int    // the Records call to die at, from 1; 0: never
	when  string // "before" or "after"
	calls int
}

func (c *crashSink) Records(b *record.Batch) error {
	c.calls++
	if c.calls == c.at && c.when == "before" {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never returns
	}
	err := c.Destination.Records(b)
	if c.calls == c.at && c.when == "after" && err == nil {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	return err
}

// TestSpoolReplayHelper is the process TestSpoolReplayKilled starts and
// kills: it replays the spool to ClickHouse, as the next run of flowdedup
// does, and dies at the Records call the environment names.
func TestSpoolReplayHelper(t *testing.T) {
	env := os.Getenv(crashEnv)
	if env == "" {
		t.Skip("the helper process of TestSpoolReplayKilled")
	}
	f := strings.Split(env, "|") // spool dir, address, database, call, before/after
	at, _ := strconv.Atoi(f[3])
	e, err := clickhouse.New(clickhouse.Config{Address: f[1], Database: f[2], Kind: flow.Key5Tuple, Observer: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	spool, err := OpenSpool(f[0], 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer spool.Close()
	q, err := NewQueue("clickhouse://"+f[1]+"/"+f[2], &crashSink{Destination: e, at: at, when: f[4]}, QueueConfig{BatchSize: 20, Spool: spool, DrainTimeout: time.Minute, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	if st := q.Stats(); st.Spooled != 0 || dropped(st) != 0 {
		t.Fatalf("the spool is not drained: %+v", st)
	}
}

// TestSpoolReplayKilled kills the process replaying a spool to a real
// ClickHouse (kill -9) at every point between its batches: just before
// each is given to the destination, and just after each landed, before
// its spool file is removed. Another replay then drains what is left.
// ClickHouse holds every row exactly once: the rows inserted, counted in
// the parts as they were written (level 0, before any merge), are the
// spooled records, not one more (issue 25: kill -9 during the replay
// wrote rows twice, 45,167 inserted for 36,975). docs/export.md: "Retries
// never write a row twice".
func TestSpoolReplayKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a process replaying to ClickHouse, many times: skipped in -short mode")
	}
	ch := testutil.StartClickHouse(t)
	const batches, size = 6, 20
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// replay runs the helper; it reports whether the helper was killed.
	replay := func(t *testing.T, dir, db string, at int, when string) bool {
		t.Helper()
		cmd := exec.Command(exe, "-test.run=^TestSpoolReplayHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+strings.Join([]string{dir, ch.Addr, db, strconv.Itoa(at), when}, "|"))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				return true
			}
		}
		if err != nil {
			t.Fatalf("replay (die at %d %s): %v\n%s", at, when, err, out)
		}
		return false
	}
	type kill struct {
		at   int
		when string
	}
	var cases []kill
	for _, when := range []string{"before", "after"} {
		for at := 1; at <= batches; at++ {
			cases = append(cases, kill{at, when})
		}
	}
	// "chain": every replay is killed just after its second batch landed,
	// until one has fewer than two to send: a run after a run after a
	// crash, each finding the batch the one before left marked.
	cases = append(cases, kill{2, "chain"})
	for _, k := range cases {
		t.Run(fmt.Sprintf("%s-%d", k.when, k.at), func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "spool")
			recs := spoolDown(t, dir, batches, size)
			// spoolDown spooled for fake://dest; the replay's files
			// are for the ClickHouse URL: copy them over as a run of
			// that destination would have written them.
			db := fmt.Sprintf("crash_%s_%d", k.when, k.at)
			respool(t, dir, "fake://dest", "clickhouse://"+ch.Addr+"/"+db)
			if k.when == "chain" {
				runs := 0
				for replay(t, dir, db, k.at, "after") {
					if runs++; runs > batches {
						t.Fatalf("%d replays killed, more than there are batches", runs)
					}
				}
				if runs != batches-1 {
					t.Errorf("%d replays killed, want %d (one per batch but the last)", runs, batches-1)
				}
			} else {
				if !replay(t, dir, db, k.at, k.when) {
					t.Fatalf("the replay was not killed at Records call %d (%s)", k.at, k.when)
				}
				if replay(t, dir, db, 0, "") {
					t.Fatal("the second replay was killed")
				}
			}
			{
				at, when := k.at, k.when
				if files := spoolFiles(t, dir); len(files) != 0 {
					t.Errorf("the spool holds %v after the second replay", files)
				}
				inserted := ch.Query(t, "SELECT sum(rows) FROM system.parts WHERE database = '"+db+"' AND table = 'flows' AND level = 0")
				distinct := ch.Query(t, "SELECT uniqExact(key, ts_ns) FROM "+db+".flows FINAL")
				windows := ch.Query(t, "SELECT count() FROM "+db+".windows FINAL")
				want := strconv.Itoa(len(recs))
				if strings.TrimSpace(inserted) != want || strings.TrimSpace(distinct) != want {
					t.Errorf("killed %s Records call %d: %s rows inserted, %s distinct; want %s of each: every row once", when, at, strings.TrimSpace(inserted), strings.TrimSpace(distinct), want)
				}
				if strings.TrimSpace(windows) != "1" {
					t.Errorf("killed %s Records call %d: %s window rows, want 1", when, at, strings.TrimSpace(windows))
				}
			}
		})
	}
}

// respool rewrites the spool files of destination from in dir as files of
// destination to, keeping their order, IDs and flags.
func respool(t *testing.T, dir, from, to string) {
	t.Helper()
	spool := openSpool(t, dir, 1<<30)
	defer spool.Close()
	src, err := spool.claim(from)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := spool.claim(to)
	if err != nil {
		t.Fatal(err)
	}
	for len(src.entries) > 0 {
		var f spoolFile
		if err := src.load(nil, &f); err != nil {
			t.Fatal(err)
		}
		if f.summary {
			err = dst.put(nil, &f.sum, f.attempted, false)
		} else {
			err = dst.put(&record.Batch{ID: f.id, Records: f.records, Observer: f.observer, Domain: f.domain}, nil, f.attempted, false)
		}
		if err != nil {
			t.Fatal(err)
		}
		src.remove()
	}
}

// BenchmarkSpoolReplay drains a spool of 200 batches of 500 records to a
// destination that takes everything at once: what reading, marking
// (markAttempted: two writes and an fsync per file) and removing the
// files costs. ns/op is per batch.
func BenchmarkSpoolReplay(b *testing.B) {
	const files, size = 200, 500
	recs := genRecords(0, files*size)
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		spool, err := OpenSpool(dir, 1<<32)
		if err != nil {
			b.Fatal(err)
		}
		d, err := spool.claim("fake://dest")
		if err != nil {
			b.Fatal(err)
		}
		for i := range files {
			if err := d.put(&record.Batch{ID: uint64(i + 1), Records: recs[i*size : (i+1)*size]}, nil, false, false); err != nil {
				b.Fatal(err)
			}
		}
		spool.Close()
		spool, err = OpenSpool(dir, 1<<32)
		if err != nil {
			b.Fatal(err)
		}
		up := &fakeSink{}
		b.StartTimer()
		q, err := NewQueue("fake://dest", up, QueueConfig{BatchSize: size, BatchAge: time.Hour, Spool: spool, DrainTimeout: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		q.Close()
		b.StopTimer()
		if got := len(up.records()); got != len(recs) {
			b.Fatalf("%d records delivered, want %d", got, len(recs))
		}
		spool.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*files), "ns/batch")
}

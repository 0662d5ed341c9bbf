package export

import (
	"io"
	"runtime"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/report"
)

// discardSink takes everything at once: the Queue's own cost, not a
// destination's, is what the benchmarks and the allocation test measure.
type discardSink struct{}

func (discardSink) Records(*record.Batch) error  { return nil }
func (discardSink) Window(*record.Summary) error { return nil }
func (discardSink) Flush() error                 { return nil }
func (discardSink) Close() error                 { return nil }

// newBenchReporter returns a Reporter with exports discarding Queues, and
// the Queues.
func newBenchReporter(tb testing.TB, out io.Writer, exports int) (*report.Reporter, []*Queue) {
	tb.Helper()
	var qs []*Queue
	for range exports {
		q, err := NewQueue("discard://", discardSink{}, QueueConfig{})
		if err != nil {
			tb.Fatal(err)
		}
		qs = append(qs, q)
	}
	var ex []record.Export
	for _, q := range qs {
		ex = append(ex, q)
	}
	r, err := report.New(report.Config{Out: out, Kind: flow.Key5Tuple, Exports: ex})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	return r, qs
}

// TestReporterRecordNoAllocs: in steady state Reporter.Record allocates
// nothing per record, with an export Queue or without, the Queue's
// goroutines (which AllocsPerRun counts too) included.
//
// AllocsPerRun counts the allocations of every goroutine, the runtime's
// own included: on a loaded machine a timer or a goroutine's stack growth
// in the Queue's goroutines shows up now and then (seen: 1 in 2^18
// records). maxStrayAllocs tolerates those and still fails an allocation
// per record (2^18) or per Queue batch (256).
func TestReporterRecordNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	recs := genRecords(0, 4096)
	for _, exports := range []int{0, 1} {
		r, qs := newBenchReporter(t, nil, exports)
		i := 0
		record := func() {
			if err := r.Record(&recs[i%len(recs)]); err != nil {
				t.Fatal(err)
			}
			i++
		}
		for j := range 1 << 16 { // warm up: the buffers and items made
			record()
			if j%4096 == 0 {
				for exports > 0 && qs[0].queuedNow.Load() > 0 {
					runtime.Gosched()
				}
			}
		}
		if exports > 0 {
			waitFor(t, "the warm-up delivered", func() bool {
				st := qs[0].Stats()
				return st.Sent+uint64(st.Queued) == 1<<16
			})
		}
		// All the allocations of 2^18 records (256 Queue batches, 1024
		// stages), in one run: AllocsPerRun's average would hide a
		// fraction of one per record.
		// Every 4096 records the loop waits for the Queue to catch up, so
		// that the path measured is the one that delivers (its goroutines
		// compete for the CPU), and the warm-up's buffers suffice.
		const n = 1 << 18
		const maxStrayAllocs = 8
		drained := func() {
			for exports > 0 && qs[0].queuedNow.Load() > 0 {
				runtime.Gosched()
			}
		}
		if allocs := testing.AllocsPerRun(1, func() {
			for j := range n {
				record()
				if j%4096 == 0 {
					drained()
				}
			}
		}); allocs > maxStrayAllocs {
			t.Errorf("%d exports: %v allocations in %d records", exports, allocs, n)
		}
		if exports > 0 {
			if st := qs[0].Stats(); dropped(st) != 0 {
				t.Errorf("the Queue dropped %v: the measure is of a path that drops", st.Dropped)
			}
		}
	}
}

// BenchmarkReporterRecord: the collator's cost per record of the
// Reporter, with no output, with one export Queue, with a jsonl --out to
// io.Discard, and with both.
func BenchmarkReporterRecord(b *testing.B) {
	recs := genRecords(0, 4096)
	for _, bc := range []struct {
		name    string
		out     io.Writer
		exports int
	}{
		{"none", nil, 0},
		{"export", nil, 1},
		{"out", io.Discard, 0},
		{"out+export", io.Discard, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r, qs := newBenchReporter(b, bc.out, bc.exports)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r.Record(&recs[i&4095])
				i++
			}
			b.StopTimer()
			if bc.exports > 0 {
				// Records the Queue could not keep (it is slower than
				// the loop) were dropped: say so, it changes the cost.
				st := qs[0].Stats()
				b.ReportMetric(float64(dropped(st))/float64(b.N), "dropped/op")
			}
		})
	}
}

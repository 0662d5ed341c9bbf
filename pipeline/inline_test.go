package pipeline

import (
	"fmt"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// replayRinged replays paths with cfg, the worker on a goroutine of its own
// (ringed) or on the producer's (where the topology allows it), and returns
// the records in the order the Sink got them, the summaries and the stats,
// and whether the worker ran inline.
func replayRinged(t *testing.T, cfg Config, ringed bool, paths []string) (recs []record.Record, windows []record.WindowSummary, st Stats, inline bool) {
	t.Helper()
	r, err := pcapfile.Open(paths...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sink := &collectSink{}
	p, err := New(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	p.ringed = ringed
	if err := p.Run(t.Context(), capture.Source(r)); err != nil {
		t.Fatal(err)
	}
	if sink.closes != 1 {
		t.Fatalf("Sink.Close called %d times", sink.closes)
	}
	recs, windows = sink.snapshot()
	return recs, windows, statsLessRings(p), p.run.Load().inline
}

// With one source and no parse goroutines, replay runs the workers on the
// producer's goroutine. The output must be that of the workers on
// goroutines of their own: record for record in the Sink's order (with one
// worker; with several, the collator interleaves the workers' batches as
// they come, so the records are compared sorted), summary for summary, and
// the stats the same, on every testdata capture and on the messy generated
// ones (jitter, lateness, time jumps, cut files, pcapng interfaces).
func TestInlineWorkerSameOutput(t *testing.T) {
	type setup = replaySetup
	base := Config{Workers: 1, Seed: 0x5eed, FilterSeed: 3, BatchSize: 64, RingBatches: 4}
	setups := filterWindowSetups(base)
	c := base
	c.Filter, c.BatchSize, c.RingBatches = "qht:mem=64KiB", DefaultBatchSize, 0
	setups = append(setups, setup{"qht/defaults", c})
	// Rings left to their default: inline workers get rings of
	// DefaultInlineRingBatches slots, with windows, markers and small
	// batches that fill them often, and with two workers.
	for _, w := range []int{1, 2} {
		c := base
		c.Filter, c.Workers, c.RingBatches, c.Window, c.Lateness = "qht:mem=64KiB", w, 0, 10*time.Second, 30*time.Second
		setups = append(setups, setup{fmt.Sprintf("qht/defaults/%dworkers/10s+30s", w), c})
	}
	for _, w := range []int{2, 3} {
		c := base
		c.Filter, c.Workers, c.Window, c.Lateness = "qht:mem=64KiB", w, 10*time.Second, 30*time.Second
		setups = append(setups, setup{fmt.Sprintf("qht/%dworkers/10s+30s", w), c})
	}
	kinds := []string{"src", "5tuple"}
	inputs := fanoutInputs(t)
	if raceEnabled || testing.Short() {
		setups = []setup{setups[0], setups[5], setups[len(setups)-1]}
		kinds = kinds[1:]
		for name := range inputs {
			if name != "jitter" && name != "time-jump" && name != "cut-gzip" && name != "testdata" {
				delete(inputs, name)
			}
		}
	}
	for name, paths := range inputs {
		for _, s := range setups {
			for _, kind := range kinds {
				cfg := s.cfg
				var err error
				if cfg.Key, err = flow.ParseKeyKind(kind); err != nil {
					t.Fatal(err)
				}
				what := name + " " + s.name + " " + kind
				wantRecs, wantWindows, wantStats, inl := replayRinged(t, cfg, true, paths)
				if inl {
					t.Fatalf("%s: ringed run ran inline", what)
				}
				if len(wantRecs) == 0 || len(wantWindows) == 0 {
					t.Fatalf("%s: %d records, %d summaries: the comparison would prove nothing", what, len(wantRecs), len(wantWindows))
				}
				gotRecs, gotWindows, gotStats, inl := replayRinged(t, cfg, false, paths)
				if !inl {
					t.Fatalf("%s: one source, no parse goroutines, replay: the workers did not run inline", what)
				}
				if cfg.Workers > 1 {
					sortRecords(gotRecs)
					sortRecords(wantRecs)
				}
				sameReplay(t, what+": inline", "the worker on its own goroutine",
					replayed{gotRecs, gotWindows, gotStats}, replayed{wantRecs, wantWindows, wantStats})
			}
		}
	}
}

// Only replay of one source without parse goroutines runs its workers
// inline: live capture keeps the workers' goroutines (a slow filter must
// not stall the reading of the kernel's ring), and so do several sources
// (a worker takes their rings in turn) and parse goroutines.
func TestInlineOnlyWhereItApplies(t *testing.T) {
	paths := []string{"../testdata/pcaps/small.pcap"}
	for _, tc := range []struct {
		name    string
		cfg     Config
		sources int
		want    bool
	}{
		{"replay, 1 worker", Config{Workers: 1}, 1, true},
		{"replay, 3 workers", Config{Workers: 3}, 1, true},
		{"replay, 2 workers, 2 parsers", Config{Workers: 2, Parsers: 2}, 1, false},
		{"replay, 1 worker, 1 parser", Config{Workers: 1, Parsers: 1}, 1, false},
		{"replay, 2 sources", Config{Workers: 1}, 2, false},
		{"live, 1 worker", Config{Workers: 1, Live: true}, 1, false},
	} {
		cfg := tc.cfg
		cfg.Filter, cfg.Key = "exact", flow.KeySrc
		var srcs []capture.Source
		for range tc.sources {
			r, err := pcapfile.Open(paths...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			srcs = append(srcs, r)
		}
		sink, p := run(t, cfg, srcs...)
		if got := p.run.Load().inline; got != tc.want {
			t.Errorf("%s: inline %v, want %v", tc.name, got, tc.want)
		}
		if recs, _ := sink.snapshot(); len(recs) == 0 {
			t.Errorf("%s: no records", tc.name)
		}
	}
}

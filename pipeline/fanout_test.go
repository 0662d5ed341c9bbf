package pipeline

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/gen"
	"github.com/flowdedup/flowdedup/record"
)

// fanoutInputs returns the captures TestFanoutSameOutput replays: every
// testdata capture, one by one and all in a row, and generated messy ones
// (time going back within the lateness and beyond it, interleaved
// interfaces, malformed frames, a file cut short, gzip, a lone packet ten
// years ahead, a real jump of a year between two files).
func fanoutInputs(t *testing.T) map[string][]string {
	t.Helper()
	testdata, err := filepath.Glob("../testdata/pcaps/*.pcap*")
	if err != nil || len(testdata) == 0 {
		t.Fatalf("no testdata captures: %v", err)
	}
	in := map[string][]string{"testdata": testdata}
	for _, p := range testdata {
		in[filepath.Base(p)] = []string{p}
	}
	dir := t.TempDir()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write := func(name string, cfg gen.Config) string {
		t.Helper()
		var buf bytes.Buffer
		cfg.Packets, cfg.Flows, cfg.Zipf, cfg.IPv6, cfg.Seed = 8000, 1000, 1.0, 0.2, 11
		if cfg.Start.IsZero() {
			cfg.Start = start
		}
		if cfg.Duration == 0 {
			cfg.Duration = 5 * time.Minute
		}
		if _, err := gen.Write(&buf, cfg); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	jitter := write("jitter.pcap", gen.Config{Jitter: 20 * time.Second, Malformed: 0.02, Fragments: 0.05})
	in["jitter"] = []string{jitter}
	in["interfaces"] = []string{write("ifaces.pcapng", gen.Config{Format: gen.FormatPcapNG, Interfaces: 3, InterfaceSkew: 40 * time.Second})}
	in["cut-gzip"] = []string{write("cut.pcap.gz", gen.Config{CutShort: true, Gzip: true}), write("cut.pcapng", gen.Config{CutShort: true, Format: gen.FormatPcapNG, Seed: 2})}
	later := write("later.pcap", gen.Config{Start: start.AddDate(1, 0, 0), VLAN: true})
	in["year-gap"] = []string{jitter, later}

	// One packet ten years ahead in the middle of a pcap file: the
	// time-jump guard's lone wrong timestamp.
	b, err := os.ReadFile(later)
	if err != nil {
		t.Fatal(err)
	}
	off := 24
	for range 500 {
		off += 16 + int(binary.LittleEndian.Uint32(b[off+8:]))
	}
	sec := binary.LittleEndian.Uint32(b[off:])
	binary.LittleEndian.PutUint32(b[off:], sec+10*365*86400)
	jump := filepath.Join(dir, "jump.pcap")
	if err := os.WriteFile(jump, b, 0o644); err != nil {
		t.Fatal(err)
	}
	in["time-jump"] = []string{jump}
	return in
}

// TestFanoutSameOutput: with 1 to 4 parse goroutines, a replay gives the
// records (as a set, and with their times, windows and shards), the
// window summaries and the Stats of the producer parsing alone, for every
// filter (each shard's filter sees the same keys in the same order, so
// even an approximate filter decides the same), with windows off, on and
// with lateness.
func TestFanoutSameOutput(t *testing.T) {
	type setup = replaySetup
	base := Config{Workers: 2, Key: 0, Seed: 0x5eed, FilterSeed: 3, BatchSize: 64, RingBatches: 4}
	setups := filterWindowSetups(base)
	c := base
	c.Filter, c.Workers, c.Window = "exact", 3, time.Minute
	setups = append(setups, setup{"exact/3workers", c})
	c = base
	c.Filter = "exact"
	var err error
	if c.Prefix, err = flow.MakeMask(24, 48); err != nil {
		t.Fatal(err)
	}
	setups = append(setups, setup{"exact/prefix", c})
	kinds := []string{"src", "5tuple"}
	inputs := fanoutInputs(t)
	if raceEnabled || testing.Short() {
		// The race detector makes a run 30 times slower, and so does
		// qemu-user (make test-32bit runs -short under qemu-arm): it checks
		// the hand-offs on the messy inputs, with and without windows.
		setups = []setup{setups[0], setups[len(setups)-2]}
		kinds = kinds[1:]
		for name := range inputs {
			if name != "jitter" && name != "time-jump" && name != "cut-gzip" {
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
				want := replayOnce(t, cfg, paths)
				if len(want.recs) == 0 {
					t.Fatalf("%s %s: no records: the comparison would prove nothing", name, s.name)
				}
				for parsers := 1; parsers <= 4; parsers++ {
					cfg.Parsers = parsers
					got := replayOnce(t, cfg, paths)
					what := fmt.Sprintf("%s %s %s, %d parsers", name, s.name, kind, parsers)
					sameReplay(t, what, "the producer parsing alone", got, want)
				}
			}
		}
	}
}

type replayed struct {
	recs    []record.Record // sorted
	windows []record.WindowSummary
	stats   Stats // less the workers' ring gauges
}

// replayOnce replays paths with cfg and returns what came out.
func replayOnce(t *testing.T, cfg Config, paths []string) replayed {
	t.Helper()
	r, err := pcapfile.Open(paths...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var src capture.Source = r
	sink, p := run(t, cfg, src)
	recs, windows := sink.snapshot()
	sortRecords(recs)
	return replayed{recs, windows, statsLessRings(p)}
}

// statsLessRings returns p's Stats less the workers' ring gauges, which
// differ between runs that give the same output.
func statsLessRings(p *Pipeline) Stats {
	st := p.Stats()
	for i := range st.Workers {
		st.Workers[i].RingLen, st.Workers[i].RingCap = 0, 0
	}
	return st
}

// replaySetup is a named Config the same-output tests replay with.
type replaySetup struct {
	name string
	cfg  Config
}

// filterWindowSetups returns base with each filter the same-output tests
// compare (exact, qht, sbf) crossed with windows off, of a minute, and of
// 10 s with 30 s of lateness.
func filterWindowSetups(base Config) []replaySetup {
	var setups []replaySetup
	for _, filter := range []string{"exact", "qht:mem=64KiB", "sbf:mem=64KiB"} {
		for _, w := range []struct {
			name             string
			window, lateness time.Duration
		}{{"nowindow", 0, 0}, {"1m", time.Minute, 0}, {"10s+30s", 10 * time.Second, 30 * time.Second}} {
			c := base
			c.Filter, c.Window, c.Lateness = filter, w.window, w.lateness
			setups = append(setups, replaySetup{filter + "/" + w.name, c})
		}
	}
	return setups
}

// sameReplay fails t unless got has want's records (in order), summaries
// and stats; what names the run, than names what want came from.
func sameReplay(t *testing.T, what, than string, got, want replayed) {
	t.Helper()
	if !slices.Equal(got.recs, want.recs) {
		for i := range min(len(got.recs), len(want.recs)) {
			if got.recs[i] != want.recs[i] {
				t.Logf("first difference, record %d: got %+v, want %+v", i, got.recs[i], want.recs[i])
				break
			}
		}
		t.Fatalf("%s: %d records differ from the %d of %s", what, len(got.recs), len(want.recs), than)
	}
	if !reflect.DeepEqual(got.windows, want.windows) {
		t.Fatalf("%s: summaries differ:\n got %+v\nwant %+v", what, got.windows, want.windows)
	}
	if !reflect.DeepEqual(got.stats, want.stats) {
		t.Fatalf("%s: stats differ:\n got %+v\nwant %+v", what, got.stats, want.stats)
	}
}

// sortRecords sorts records by window, key, time and worker.
func sortRecords(recs []record.Record) {
	slices.SortFunc(recs, func(a, b record.Record) int {
		return cmp.Or(cmp.Compare(a.WindowNs, b.WindowNs), bytes.Compare(keyBytes(a.Key), keyBytes(b.Key)), cmp.Compare(a.TimeNs, b.TimeNs), cmp.Compare(a.Worker, b.Worker))
	})
}

func keyBytes(k flow.Key) []byte {
	b, _ := k.MarshalBinary()
	return b
}

// An empty capture file (capture.ErrEmpty) is no packet on either path:
// the producer reading frame by frame, and reading batches for parse
// goroutines; other damage costs the frame it was found in on both.
func TestEmptyFileIsNoPacketInBatches(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pcap")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	good, err := filepath.Glob("../testdata/pcaps/small.pcap")
	if err != nil || len(good) != 1 {
		t.Fatalf("testdata/pcaps/small.pcap: %v", err)
	}
	cfg := Config{Workers: 2, Filter: "exact", Key: flow.KeySrc}
	alone := replayOnce(t, cfg, good)
	for parsers := 0; parsers <= 2; parsers++ {
		cfg.Parsers = parsers
		got := replayOnce(t, cfg, []string{empty, good[0]})
		if len(got.windows) != 1 || len(alone.windows) != 1 {
			t.Fatalf("%d parsers: %d summaries, want 1", parsers, len(got.windows))
		}
		if w, a := got.windows[0], alone.windows[0]; w.Packets != a.Packets || w.Malformed != 0 || len(w.MalformedBy) != 0 {
			t.Errorf("%d parsers: %d packets, malformed %v; want the %d of the good file alone, none malformed", parsers, w.Packets, w.MalformedBy, a.Packets)
		}
	}
}

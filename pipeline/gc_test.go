package pipeline

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/gen"
)

// gcCycles is the number of collections the process has completed.
func gcCycles(t *testing.T) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Skip("runtime/metrics has no /gc/cycles/total:gc-cycles")
	}
	return s[0].Value.Uint64()
}

// withDefaultGC runs the test with the collector at its defaults (GOGC=100,
// no memory limit), whatever the environment set, and puts the settings
// back after.
func withDefaultGC(t *testing.T) {
	percent := debug.SetGCPercent(100)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
}

// TestHoldCollectionsSettings checks what the hold does to the runtime's
// settings: the percentage goal off, then a memory limit of twice the
// memory held plus 64 MiB, then the defaults back; and nothing at all when
// the process had changed the defaults.
func TestHoldCollectionsSettings(t *testing.T) {
	withDefaultGC(t)
	h := HoldCollections()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("under the hold GOGC is %d, want -1 (off)", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("before Bound the memory limit is %d, want none", got)
	}
	h.Bound()
	held := heldMemory()
	limit := debug.SetMemoryLimit(-1)
	// Bound read the memory held a moment before this test did, and the
	// test allocates a little in between: the limit is within a few MiB
	// of 2*held + 64 MiB.
	if want := int64(2*held + 64<<20); limit < want-8<<20 || limit > want+8<<20 {
		t.Errorf("memory limit %d after Bound, want about %d (2 x %d + 64 MiB)", limit, want, held)
	}
	h.Release()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after Release GOGC is %d, want 100", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("after Release the memory limit is %d, want none", got)
	}
	h.Release() // twice: still the defaults
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after a second Release GOGC is %d, want 100", got)
	}

	// A process that set GOGC keeps it.
	debug.SetGCPercent(250)
	h = HoldCollections()
	h.Bound()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("with GOGC=250 the hold set a memory limit %d", got)
	}
	h.Release()
	if got := debug.SetGCPercent(100); got != 250 {
		t.Errorf("with GOGC=250 the hold left GOGC at %d", got)
	}

	// So does one that set a memory limit.
	debug.SetMemoryLimit(1 << 40)
	h = HoldCollections()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with a memory limit the hold set GOGC to %d", got)
	}
	h.Bound()
	h.Release()
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Errorf("with a memory limit of 1 TiB the hold left it at %d", got)
	}
}

// TestHoldCollectionsReplay replays a capture whose setup is larger than
// the collector's goal after a collection (two workers with 8 MiB filters:
// 16 MiB of filters alone, against a goal of twice the test's live heap,
// at least 4 MiB) under the hold, and checks that no collection ran in
// the setup or the run; and that without the hold one did, so that the
// first check can fail.
func TestHoldCollectionsReplay(t *testing.T) {
	withDefaultGC(t)
	var buf bytes.Buffer
	if _, err := gen.Write(&buf, gen.Config{Packets: 50_000, Flows: 5_000, Zipf: 1.0, Seed: 4}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gc.pcap")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	buf = bytes.Buffer{}
	open := func() capture.Source {
		r, err := pcapfile.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	replay := func() (uint64, uint64) {
		runtime.GC() // start from a heap of the test's own, well below the goal
		c0 := gcCycles(t)
		h := HoldCollections()
		defer h.Release()
		p, err := New(Config{Workers: 2, Filter: "qht:mem=8MiB", Key: flow.KeySrc, Seed: 1}, &countSink{})
		if err != nil {
			t.Fatal(err)
		}
		h.Bound()
		if err := p.Run(t.Context(), open()); err != nil {
			t.Fatal(err)
		}
		return gcCycles(t) - c0, p.Stats().Packets
	}
	if n, pkts := replay(); n != 0 || pkts != 50_000 {
		t.Errorf("under the hold: %d collections in setup and run, %d packets; want 0 and 50000", n, pkts)
	}

	runtime.GC()
	c0 := gcCycles(t)
	p, err := New(Config{Workers: 2, Filter: "qht:mem=8MiB", Key: flow.KeySrc, Seed: 1}, &countSink{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(t.Context(), open()); err != nil {
		t.Fatal(err)
	}
	if gcCycles(t) == c0 {
		t.Errorf("without the hold no collection ran either: the test does not show what the hold does")
	}
}

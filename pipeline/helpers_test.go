package pipeline

import (
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/record"
)

// udpFrame returns an Ethernet/IPv4/UDP frame from src to dst.
func udpFrame(src, dst netip.Addr, sport, dport uint16) []byte {
	return testutil.UDP4Frame(src, dst, sport, dport, 46)
}

// addr returns the i-th test address, 10.0.0.0 + i.
func addr(i int) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], 10<<24+uint32(i))
	return netip.AddrFrom4(b)
}

// srcFrame is a frame whose source-address key is addr(i).
func srcFrame(i int) []byte { return udpFrame(addr(i), addr(1<<20), 1000, 53) }

func srcKey(i int) flow.Key { return flow.MakeKey(flow.KeySrc, addr(i), netip.Addr{}, 0, 0, 0) }

// pkt is a test frame with its time.
type pkt struct {
	data []byte
	t    int64
}

// fakeSource yields frames from a slice, optionally cycling forever; it can
// hold back at a given frame until released, and tell when it returned
// io.EOF.
type fakeSource struct {
	pkts   []pkt
	i      int
	cycle  bool          // start over at the end, never io.EOF
	step   int64         // cycle: added to the times on each round
	gateAt int           // with gate: Next blocks before returning pkts[gateAt]
	gate   chan struct{} // closed to release
	endErr error         // returned once at the end, before io.EOF
	pace   func()        // when not nil, called before each frame is returned
	eof    chan struct{} // closed when the end is returned
	ended  bool
	read   atomic.Int64  // frames returned
	drops  atomic.Uint64 // KernelDrops, when used through dropSource
	round  int64
}

func newSource(pkts []pkt) *fakeSource {
	return &fakeSource{pkts: pkts, eof: make(chan struct{}), gateAt: -1}
}

func (s *fakeSource) Next(p *capture.Packet) error {
	if s.i == s.gateAt && s.gate != nil {
		<-s.gate
	}
	if s.i == len(s.pkts) {
		if !s.cycle || len(s.pkts) == 0 {
			if !s.ended {
				close(s.eof)
				s.ended = true
				if s.endErr != nil {
					return s.endErr
				}
			}
			// As capture.Source requires: after a corrupt file, a source
			// with no further file ends.
			return io.EOF
		}
		s.i = 0
		s.round++
	}
	if s.pace != nil {
		s.pace()
	}
	k := &s.pkts[s.i]
	s.i++
	p.Data = k.data
	p.WireLen = len(k.data)
	p.TimeNs = k.t + s.round*s.step
	p.LinkType = flow.LinkEthernet
	s.read.Add(1)
	return nil
}

func (s *fakeSource) Close() error { return nil }

// dropSource adds capture.DropCounter.
type dropSource struct{ *fakeSource }

func (s dropSource) KernelDrops() (uint64, error) { return s.drops.Load(), nil }

var _ capture.DropCounter = dropSource{}

// collectSink keeps copies of what it is given.
type collectSink struct {
	mu       sync.Mutex
	records  []record.Record
	windows  []record.WindowSummary
	closes   int
	failAt   int           // fail the failAt-th Record (1-based); 0: never
	failErr  error         // what to fail with
	block    chan struct{} // Record waits on it while non-nil
	recorded atomic.Int64
}

func (s *collectSink) Record(r *record.Record) error {
	if s.block != nil {
		<-s.block
	}
	n := s.recorded.Add(1)
	if s.failAt != 0 && n >= int64(s.failAt) {
		return s.failErr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// No record may follow its window's summary.
	for _, w := range s.windows {
		if r.WindowEndNs != 0 && r.WindowNs == w.StartNs {
			return errors.New("collectSink: record after its window's summary")
		}
	}
	s.records = append(s.records, *r)
	return nil
}

func (s *collectSink) Window(w *record.WindowSummary) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Summaries come in window order.
	if n := len(s.windows); n > 0 && w.StartNs < s.windows[n-1].EndNs && w.EndNs != 0 {
		return errors.New("collectSink: summaries out of window order")
	}
	s.windows = append(s.windows, *w)
	return nil
}

func (s *collectSink) Close() error {
	s.mu.Lock()
	s.closes++
	s.mu.Unlock()
	return nil
}

func (s *collectSink) snapshot() ([]record.Record, []record.WindowSummary) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.records), slices.Clone(s.windows)
}

// run builds a pipeline and runs it over the sources, failing the test on
// an error.
func run(t *testing.T, cfg Config, sources ...capture.Source) (*collectSink, *Pipeline) {
	t.Helper()
	sink := &collectSink{}
	p, err := New(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(t.Context(), sources...); err != nil {
		t.Fatal(err)
	}
	if sink.closes != 1 {
		t.Fatalf("Sink.Close called %d times", sink.closes)
	}
	return sink, p
}

// keySet returns the set of the records' keys, failing on a duplicate
// within a window.
func keySet(t *testing.T, recs []record.Record) map[flow.Key]bool {
	t.Helper()
	m := map[flow.Key]bool{}
	for _, r := range recs {
		if m[r.Key] {
			t.Fatalf("key %v reported twice in window %d", r.Key, r.WindowNs)
		}
		m[r.Key] = true
	}
	return m
}

// byWindow groups records by WindowNs.
func byWindow(recs []record.Record) map[int64][]record.Record {
	m := map[int64][]record.Record{}
	for _, r := range recs {
		m[r.WindowNs] = append(m[r.WindowNs], r)
	}
	return m
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// workersParked reports whether every worker of p's run is parked: it
// found nothing it may read and sleeps until a producer wakes it.
func workersParked(p *Pipeline) bool {
	top := p.run.Load()
	if top == nil {
		return false
	}
	for _, w := range top.workers {
		if !w.park.waiting.Load() {
			return false
		}
	}
	return true
}

// sameSet reports the keys in want and not in got, and the reverse.
func sameSet(t *testing.T, what string, got, want map[flow.Key]bool) {
	t.Helper()
	missing, extra := 0, 0
	for k := range want {
		if !got[k] {
			missing++
		}
	}
	for k := range got {
		if !want[k] {
			extra++
		}
	}
	if missing != 0 || extra != 0 {
		t.Errorf("%s: %d keys missing, %d unexpected (got %d, want %d)", what, missing, extra, len(got), len(want))
	}
}

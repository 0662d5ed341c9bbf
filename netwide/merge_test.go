package netwide

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/sketch"
)

// t0 is a time on the hour, as flowdedup's windows are aligned.
var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixNano()

const minute = int64(time.Minute)

// key is the i-th test key: a source address (IPv4 for even i, IPv6 for
// odd), all distinct.
func key(i int) flow.Key {
	if i%2 == 0 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], 0x0a000000+uint32(i))
		return flow.MakeKey(flow.KeySrc, netip.AddrFrom4(b), netip.Addr{}, 0, 0, 0)
	}
	var b [16]byte
	b[0], b[1] = 0x20, 0x01
	binary.BigEndian.PutUint64(b[8:], uint64(i))
	return flow.MakeKey(flow.KeySrc, netip.AddrFrom16(b), netip.Addr{}, 0, 0, 0)
}

// hll returns the sketch of the keys of ids.
func hll(t testing.TB, p uint8, seed uint64, ids []int) *sketch.HLL {
	t.Helper()
	h, err := sketch.New(p, seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		k := key(id)
		h.Insert(&k)
	}
	return h
}

// summary is the summary a router would write of the keys ids.
func summary(t testing.TB, observer string, start, end int64, p uint8, seed uint64, ids []int) Summary {
	t.Helper()
	h := hll(t, p, seed, ids)
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return Summary{Observer: observer, StartNs: start, EndNs: end, Distinct: uint64(len(ids)), DistinctEstimate: h.Estimate(), Sketch: b,
		Source: fmt.Sprintf("%s.jsonl:%d", observer, (start-t0)/minute+1)}
}

// tolerance: 4 standard errors of a sketch of precision p (1.04/sqrt(2^p),
// Flajolet et al., AofA 2007) of n keys, plus one for rounding: a normal
// error goes beyond it with probability 6e-5; the data are fixed, so the
// tests are deterministic. Exactness is checked apart, register by register.
func tolerance(p uint8, n int) float64 {
	return 4*1.04/math.Sqrt(float64(uint64(1)<<p))*float64(n) + 1
}

// fleet is three routers' 1-minute windows over ten minutes: router r in
// window w sees 2000 keys drawn from [1500w, 1500w+6000), so routers share
// keys, and consecutive windows too.
type fleet struct {
	summaries []Summary
	keys      map[[2]int][]int // by (router, window)
}

func newFleet(t testing.TB, p uint8, seed uint64) *fleet {
	f := &fleet{keys: map[[2]int][]int{}}
	rng := rand.New(rand.NewPCG(1, 1))
	for w := range 10 {
		for r := range 3 {
			ids := make([]int, 2000)
			for i := range ids {
				ids[i] = 1500*w + rng.IntN(6000)
			}
			f.keys[[2]int{r, w}] = ids
			start := t0 + int64(w)*minute
			f.summaries = append(f.summaries, summary(t, fmt.Sprint("r", r+1), start, start+minute, p, seed, ids))
		}
	}
	return f
}

// union returns the distinct ids of the routers' windows in [w0, w1).
func (f *fleet) union(w0, w1 int) []int {
	set := map[int]bool{}
	for w := w0; w < w1; w++ {
		for r := range 3 {
			for _, id := range f.keys[[2]int{r, w}] {
				set[id] = true
			}
		}
	}
	var ids []int
	for id := range set {
		ids = append(ids, id)
	}
	return ids
}

// checkGroup compares a group with the sketch of the exact union of its
// keys, and its sums with the summaries'.
func checkGroup(t *testing.T, g Group, p uint8, seed uint64, union []int, sums []Summary) {
	t.Helper()
	ref := hll(t, p, seed, union)
	if !g.Sketch.Equal(ref) {
		t.Errorf("group %d: merged sketch != sketch of the union of its %d keys", g.StartNs, len(union))
	}
	if g.Estimate != ref.Estimate() {
		t.Errorf("group %d: estimate %d, the union's sketch %d", g.StartNs, g.Estimate, ref.Estimate())
	}
	if d := math.Abs(float64(g.Estimate) - float64(len(union))); d > tolerance(p, len(union)) {
		t.Errorf("group %d: estimate %d of %d distinct keys", g.StartNs, g.Estimate, len(union))
	}
	var est, dist uint64
	for _, s := range sums {
		est += s.DistinctEstimate
		dist += s.Distinct
	}
	if g.Summaries != len(sums) || g.SumEstimates != est || g.SumDistinct != dist || !slices.Equal(g.Observers, []string{"r1", "r2", "r3"}) {
		t.Errorf("group %d: %d summaries, sums %d %d, observers %v; want %d, %d %d, r1-r3", g.StartNs, g.Summaries, g.SumEstimates, g.SumDistinct, g.Observers, len(sums), est, dist)
	}
	if g.Estimate >= g.SumEstimates {
		t.Errorf("group %d: the union's estimate %d is not below the sum %d, though routers share keys", g.StartNs, g.Estimate, g.SumEstimates)
	}
}

// TestMergeByWindow: three routers' summaries of the same windows merge,
// per window, into the sketch of the union of their keys.
func TestMergeByWindow(t *testing.T) {
	const p, seed = 12, 42
	f := newFleet(t, p, seed)
	gs, err := Merge(f.summaries, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 10 {
		t.Fatalf("%d groups, want 10", len(gs))
	}
	for w, g := range gs {
		if g.StartNs != t0+int64(w)*minute || g.EndNs != g.StartNs+minute {
			t.Errorf("group %d spans [%d, %d)", w, g.StartNs, g.EndNs)
		}
		checkGroup(t, g, p, seed, f.union(w, w+1), f.summaries[3*w:3*w+3])
	}
}

// TestMergeByPeriod: with By, the windows of each period merge into one
// group: the sketch of the union of the keys of every router and window in
// it, on period boundaries aligned on the epoch.
func TestMergeByPeriod(t *testing.T) {
	const p, seed = 12, 42
	f := newFleet(t, p, seed)
	gs, err := Merge(f.summaries, Options{By: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 2 {
		t.Fatalf("%d groups, want 2", len(gs))
	}
	for i, g := range gs {
		if g.StartNs != t0+int64(i)*5*minute || g.EndNs != g.StartNs+5*minute {
			t.Errorf("period %d spans [%d, %d)", i, g.StartNs, g.EndNs)
		}
		checkGroup(t, g, p, seed, f.union(5*i, 5*i+5), f.summaries[15*i:15*i+15])
	}
	// An hour holds all ten minutes: 10:00 to 11:00.
	gs, err = Merge(f.summaries, Options{By: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 1 || gs[0].StartNs != t0 || gs[0].EndNs != t0+60*minute {
		t.Fatalf("by hour: %d groups (%+v)", len(gs), gs)
	}
	checkGroup(t, gs[0], p, seed, f.union(0, 10), f.summaries)
}

// TestMergeOrder: the order of the summaries does not matter (merging is
// commutative and associative): shuffled input gives equal groups.
func TestMergeOrder(t *testing.T) {
	f := newFleet(t, 10, 1)
	want, err := Merge(f.summaries, Options{By: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 3))
	for range 3 {
		s := slices.Clone(f.summaries)
		rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		got, err := Merge(s, Options{By: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d groups, want %d", len(got), len(want))
		}
		for i := range got {
			if !got[i].Sketch.Equal(want[i].Sketch) || got[i].Estimate != want[i].Estimate || got[i].SumEstimates != want[i].SumEstimates {
				t.Errorf("group %d differs with shuffled input", i)
			}
		}
	}
}

// TestMergeMillion: three routers of 400000 keys each, overlapping, whose
// union is exactly 10^6 keys: the merged estimate is within 2% (2.5
// standard errors at precision 14, as in package sketch's
// TestEstimateMillion), while the sum of the routers' estimates is 1.2
// million.
func TestMergeMillion(t *testing.T) {
	if testing.Short() {
		t.Skip("1.2 million insertions; -short")
	}
	var sums []Summary
	for r := range 3 {
		ids := make([]int, 400000)
		for i := range ids {
			ids[i] = 300000*r + i
		}
		sums = append(sums, summary(t, fmt.Sprint("r", r+1), t0, t0+minute, 14, sketch.DefaultSeed, ids))
	}
	gs, err := Merge(sums, Options{})
	if err != nil {
		t.Fatal(err)
	}
	est := float64(gs[0].Estimate)
	t.Logf("union estimate %d of 10^6 (%+.2f%%); sum of the routers' estimates %d", gs[0].Estimate, 100*(est/1e6-1), gs[0].SumEstimates)
	if math.Abs(est/1e6-1) > 0.02 {
		t.Errorf("estimate %d of 10^6 distinct keys: beyond 2%%", gs[0].Estimate)
	}
	if math.Abs(float64(gs[0].SumEstimates)/1.2e6-1) > 0.02 {
		t.Errorf("sum of estimates %d, want about 1.2 million", gs[0].SumEstimates)
	}
}

// TestMergeErrors: each misuse fails with its error, naming the summary.
func TestMergeErrors(t *testing.T) {
	ids := []int{1, 2, 3}
	good := summary(t, "r1", t0, t0+minute, 12, 5, ids)
	for _, tc := range []struct {
		name   string
		sums   []Summary
		opt    Options
		want   error
		inText []string
	}{
		{"no sketch", []Summary{good, {Observer: "r2", StartNs: t0, EndNs: t0 + minute, Source: "r2.jsonl:7"}}, Options{},
			ErrNoSketch, []string{"r2.jsonl:7", "--summary-sketch"}},
		{"seed", []Summary{good, summary(t, "r2", t0, t0+minute, 12, 6, ids)}, Options{},
			sketch.ErrSeedMismatch, []string{"r2.jsonl:1", "r1.jsonl:1", "--sketch-seed"}},
		{"seed, other window", []Summary{good, summary(t, "r2", t0+minute, t0+2*minute, 12, 6, ids)}, Options{},
			sketch.ErrSeedMismatch, []string{"r2.jsonl:2"}},
		{"precision", []Summary{good, summary(t, "r2", t0, t0+minute, 14, 5, ids)}, Options{},
			sketch.ErrPrecisionMismatch, []string{"r2.jsonl:1", "precision 14", "of 12"}},
		{"garbage", []Summary{{Observer: "r2", StartNs: t0, EndNs: t0 + minute, Sketch: []byte("not a sketch at all"), Source: "x:3"}}, Options{},
			sketch.ErrFormat, []string{"x:3"}},
		{"not nested", []Summary{good, summary(t, "r1", t0+minute, t0+2*minute, 12, 5, ids)}, Options{By: 90 * time.Second},
			ErrNotNested, []string{"r1.jsonl:2", "10:01:00Z", "10:01:30Z"}},
		{"overlap", []Summary{good, summary(t, "r2", t0, t0+5*minute, 12, 5, ids)}, Options{},
			ErrOverlap, []string{"5m0s", "1m0s"}},
		{"ends before start", []Summary{{StartNs: t0, EndNs: t0 - 1, Sketch: good.Sketch}}, Options{},
			ErrBadWindow, nil},
		{"negative period", []Summary{good}, Options{By: -time.Minute},
			ErrBadPeriod, nil},
	} {
		_, err := Merge(tc.sums, tc.opt)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			continue
		}
		for _, s := range tc.inText {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", tc.name, err, s)
			}
		}
	}
	// The overlap is fine by a period holding both windows.
	if gs, err := Merge([]Summary{good, summary(t, "r2", t0, t0+5*minute, 12, 5, []int{3, 4})}, Options{By: 5 * time.Minute}); err != nil || len(gs) != 1 || gs[0].Summaries != 2 {
		t.Errorf("by 5m: %v, %+v", err, gs)
	}
}

// kinded returns s counting key kind k, from source src.
func kinded(s Summary, k flow.KeyKind, src string) Summary {
	s.Key, s.Source = k, src
	return s
}

// TestMergeKinds: summaries of different known key kinds are refused with
// ErrKindMismatch, naming both kinds and both summaries, whichever window
// or period they are in, and the refused one is not merged; summaries of
// unknown kind (older files) merge with any, are counted, and leave the
// kind to the known ones.
func TestMergeKinds(t *testing.T) {
	ids := []int{1, 2, 3}
	base := summary(t, "r1", t0, t0+minute, 12, 5, ids)
	other := summary(t, "r2", t0+minute, t0+2*minute, 12, 5, []int{4, 5})

	for _, opt := range []Options{{}, {By: time.Hour}} {
		m, err := New(opt)
		if err != nil {
			t.Fatal(err)
		}
		src := kinded(base, flow.KeySrc, "r1.jsonl:1")
		dst := kinded(other, flow.KeyDst, "r2.jsonl:4")
		if err := m.Add(&src); err != nil {
			t.Fatal(err)
		}
		err = m.Add(&dst)
		if !errors.Is(err, ErrKindMismatch) {
			t.Fatalf("by %v: src then dst: %v, want ErrKindMismatch", opt.By, err)
		}
		for _, want := range []string{"r2.jsonl:4", "dst", "r1.jsonl:1", "src", "--key"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("by %v: %q does not say %q", opt.By, err, want)
			}
		}
		gs, err := m.Groups()
		if err != nil || len(gs) != 1 || gs[0].Summaries != 1 || gs[0].Key != flow.KeySrc || m.Kind() != flow.KeySrc {
			t.Errorf("by %v: after the refused dst: %v, %+v, kind %v; want the src summary alone", opt.By, err, gs, m.Kind())
		}
	}

	// Unknown kinds (zero, or not valid) before and after a known one:
	// accepted, counted, and the groups say the known kind.
	sums := []Summary{
		kinded(base, 0, "old.jsonl:1"),
		kinded(other, flow.KeyPair, "new.jsonl:2"),
		kinded(base, flow.Key5Tuple+1, "odd.jsonl:3"),
		kinded(other, flow.KeyPair, "new.jsonl:3"),
	}
	m, _ := New(Options{})
	for i := range sums {
		if err := m.Add(&sums[i]); err != nil {
			t.Fatalf("summary %d (key %v): %v", i, sums[i].Key, err)
		}
	}
	gs, err := m.Groups()
	if err != nil || len(gs) != 2 || gs[0].Summaries != 2 || gs[1].Summaries != 2 {
		t.Fatalf("pair and unknown: %v, %+v", err, gs)
	}
	if m.Kind() != flow.KeyPair || m.UnknownKind() != 2 || gs[0].Key != flow.KeyPair || gs[1].Key != flow.KeyPair {
		t.Errorf("kind %v, %d unknown, groups' %v and %v; want pair, 2, pair, pair", m.Kind(), m.UnknownKind(), gs[0].Key, gs[1].Key)
	}

	// Only unknown kinds: no kind, nothing refused.
	gs, err = Merge([]Summary{base, other}, Options{})
	if err != nil || len(gs) != 2 || gs[0].Key != 0 {
		t.Errorf("unknown only: %v, %+v", err, gs)
	}

	// An empty summary skipped for crossing periods still says what its
	// router counts.
	m, _ = New(Options{By: time.Hour})
	idle := kinded(summary(t, "r2", t0, t0+200000*minute, 12, 5, nil), flow.KeyDst, "idle.jsonl:1")
	busy := kinded(base, flow.KeySrc, "busy.jsonl:1")
	if err := m.Add(&idle); err != nil || m.SkippedEmpty() != 1 {
		t.Fatalf("idle dst: %v, %d skipped", err, m.SkippedEmpty())
	}
	if err := m.Add(&busy); !errors.Is(err, ErrKindMismatch) || !strings.Contains(err.Error(), "idle.jsonl:1 counts dst") {
		t.Errorf("src after a skipped dst: %v, want ErrKindMismatch naming idle.jsonl:1 counts dst", err)
	}

	// The first known kind is the reference even when an unknown one came
	// first, and a mismatch wins over the summary's other faults: the
	// message is about what the router counted.
	noSketch := Summary{Observer: "r3", StartNs: t0, EndNs: t0 + minute, Key: flow.KeyDst, Source: "r3.jsonl:9"}
	_, err = Merge([]Summary{kinded(base, 0, "old.jsonl:1"), kinded(base, flow.KeySrc, "a.jsonl:1"), noSketch}, Options{})
	if !errors.Is(err, ErrKindMismatch) || !strings.Contains(err.Error(), "a.jsonl:1 counts src") || !strings.Contains(err.Error(), "r3.jsonl:9: counts key kind dst") {
		t.Errorf("dst without a sketch after old, src: %v; want a kind mismatch naming a.jsonl:1 counts src", err)
	}
}

// TestMergeAddAfterError: a summary that fails leaves the Merger as it was.
func TestMergeAddAfterError(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	good := summary(t, "r1", t0, t0+minute, 12, 5, []int{1, 2, 3})
	bad := summary(t, "r2", t0, t0+minute, 12, 6, []int{4, 5})
	for _, s := range []Summary{good, bad} {
		_ = m.Add(&s)
	}
	gs, err := m.Groups()
	if err != nil || len(gs) != 1 || gs[0].Summaries != 1 || !gs[0].Sketch.Equal(hll(t, 12, 5, []int{1, 2, 3})) {
		t.Errorf("after a failed Add: %v, %+v", err, gs)
	}
}

// TestMergeEmpty: the empty summaries of a router's idle time neither
// overlap nor cross anything: one spanning many windows (which flowdedup
// writes for a gap of more than 100000 windows) is its own group of
// estimate 0 by window, and skipped, counted, by period; ordinary empty
// windows are groups of estimate 0.
func TestMergeEmpty(t *testing.T) {
	busy := summary(t, "r1", t0+minute, t0+2*minute, 12, 5, []int{1, 2})
	idle := summary(t, "r2", t0, t0+200000*minute, 12, 5, nil)
	quiet := summary(t, "r1", t0+3*minute, t0+4*minute, 12, 5, nil)
	gs, err := Merge([]Summary{busy, idle, quiet}, Options{})
	if err != nil || len(gs) != 3 || gs[0].Estimate != 0 || gs[1].Estimate != 2 || gs[2].Estimate != 0 {
		t.Errorf("by window: %v, %+v", err, gs)
	}
	m, _ := New(Options{By: time.Hour})
	for _, s := range []Summary{busy, idle, quiet} {
		if err := m.Add(&s); err != nil {
			t.Fatal(err)
		}
	}
	gs, err = m.Groups()
	if err != nil || len(gs) != 1 || gs[0].Summaries != 2 || gs[0].Estimate != 2 || m.SkippedEmpty() != 1 {
		t.Errorf("by hour: %v, %+v, skipped %d", err, gs, m.SkippedEmpty())
	}
	// A non-empty summary crossing periods is an error.
	wide := summary(t, "r3", t0, t0+200000*minute, 12, 5, []int{9})
	if err := m.Add(&wide); !errors.Is(err, ErrNotNested) {
		t.Errorf("crossing summary with keys: %v", err)
	}
}

func TestPeriod(t *testing.T) {
	for _, tc := range []struct{ t, by, want int64 }{
		{0, 10, 0}, {9, 10, 0}, {10, 10, 10}, {-1, 10, -10}, {-10, 10, -10}, {-11, 10, -20},
	} {
		if got := period(tc.t, tc.by); got != tc.want {
			t.Errorf("period(%d, %d) = %d, want %d", tc.t, tc.by, got, tc.want)
		}
	}
}

// TestFlush: summaries given in time order, with Flush before each, give
// the groups Merge gives, in the same order, each once, and the Merger
// holds no more than the open groups; a summary of a group already given
// out is refused (ErrOrder), and so is a sketch above MaxPrecision
// (ErrTooPrecise), before anything of it is kept.
func TestFlush(t *testing.T) {
	const p, seed = 12, 42
	f := newFleet(t, p, seed)
	for _, by := range []time.Duration{0, 5 * time.Minute} {
		want, err := Merge(f.summaries, Options{By: by})
		if err != nil {
			t.Fatal(err)
		}
		m, err := New(Options{By: by, MaxPrecision: p})
		if err != nil {
			t.Fatal(err)
		}
		var got []Group
		emit := func(g *Group) error {
			got = append(got, *g)
			return nil
		}
		for i := range f.summaries {
			s := &f.summaries[i]
			if err := m.Flush(s.StartNs, emit); err != nil {
				t.Fatal(err)
			}
			if len(m.groups) > 1 {
				t.Errorf("by %v: %d groups held before summary %d, want the open one at most", by, len(m.groups), i)
			}
			if err := m.Add(s); err != nil {
				t.Fatal(err)
			}
		}
		rest, err := m.Groups()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rest...)
		if len(got) != len(want) {
			t.Fatalf("by %v: %d groups, want %d", by, len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.StartNs != w.StartNs || g.EndNs != w.EndNs || g.Estimate != w.Estimate || g.Summaries != w.Summaries ||
				!slices.Equal(g.Observers, w.Observers) || g.SumDistinct != w.SumDistinct || g.SumEstimates != w.SumEstimates {
				t.Errorf("by %v, group %d: %+v, want %+v", by, i, g, w)
			}
		}
		late := f.summaries[0]
		if err := m.Add(&late); !errors.Is(err, ErrOrder) {
			t.Errorf("by %v: a summary of a group given out: %v, want ErrOrder", by, err)
		}
	}
	m, _ := New(Options{MaxPrecision: p - 1})
	s := f.summaries[0]
	if err := m.Add(&s); !errors.Is(err, ErrTooPrecise) || len(m.groups) != 0 {
		t.Errorf("a sketch of precision %d with MaxPrecision %d: %v, %d groups", p, p-1, err, len(m.groups))
	}
}

// TestMergePrefixes: summaries of keys by network merge with those of the
// same prefix lengths only: hosts and /24s, or /24s and /16s, are refused
// with ErrKindMismatch naming both; the groups say the lengths.
func TestMergePrefixes(t *testing.T) {
	base := summary(t, "r1", t0, t0+minute, 12, 5, []int{1, 2, 3})
	other := summary(t, "r2", t0, t0+minute, 12, 5, []int{3, 4})
	m24, _ := flow.ParseMask("24,64")
	m16, _ := flow.ParseMask("16,64")
	withPrefix := func(s Summary, m flow.Mask, src string) Summary {
		s = kinded(s, flow.KeySrc, src)
		s.Prefix = m
		return s
	}
	for _, c := range []struct {
		a, b Summary
		msg  string
	}{
		{withPrefix(base, flow.Mask{}, "hosts.jsonl:1"), withPrefix(other, m24, "net.jsonl:1"), "net.jsonl:1: counts key kind src/24,64 but hosts.jsonl:1 counts src "},
		{withPrefix(base, m24, "net.jsonl:1"), withPrefix(other, flow.Mask{}, "hosts.jsonl:1"), "hosts.jsonl:1: counts key kind src but net.jsonl:1 counts src/24,64 "},
		{withPrefix(base, m24, "a.jsonl:1"), withPrefix(other, m16, "b.jsonl:1"), "counts key kind src/16,64 but a.jsonl:1 counts src/24,64"},
	} {
		_, err := Merge([]Summary{c.a, c.b}, Options{})
		if !errors.Is(err, ErrKindMismatch) || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "--prefix") {
			t.Errorf("%v then %v: %v; want ErrKindMismatch saying %q", c.a.Prefix, c.b.Prefix, err, c.msg)
		}
	}
	gs, err := Merge([]Summary{withPrefix(base, m24, "a.jsonl:1"), withPrefix(other, m24, "b.jsonl:1"), kinded(base, 0, "old.jsonl:1")}, Options{})
	if err != nil || len(gs) != 1 || gs[0].Summaries != 3 || gs[0].Key != flow.KeySrc || gs[0].Prefix != m24 {
		t.Errorf("two /24 summaries and an old one: %v, %+v", err, gs)
	}
}

package netwide

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/sketch"
)

// Errors. Merger wraps them with the summary at fault (Summary.Source);
// match them with errors.Is. Sketches of different seeds or precisions fail
// with sketch.ErrSeedMismatch or sketch.ErrPrecisionMismatch, and bytes
// that are not a sketch with sketch.ErrFormat.
var (
	// ErrNoSketch: a summary without a sketch, from a router that ran
	// without --summary-sketch (pipeline.Config.KeepSketch): its keys
	// cannot be merged with the others'.
	ErrNoSketch = errors.New("netwide: summary has no sketch (run flowdedup with --summary-sketch)")
	// ErrNotNested: with Options.By, a window that crosses a period
	// boundary, so belongs to no one period: the period is not a multiple
	// of the window, or the windows are not aligned on the Unix epoch as
	// flowdedup's are.
	ErrNotNested = errors.New("netwide: window crosses a period boundary")
	// ErrOverlap: without Options.By, two different windows that overlap,
	// from routers that ran with different --window lengths (or without
	// windows): merging by window would count their common time twice
	// over, and merging nothing would compare unlike spans. Merge them by
	// a period that is a multiple of every window (Options.By).
	ErrOverlap = errors.New("netwide: different windows overlap")
	// ErrBadWindow: a summary whose window ends before it starts.
	ErrBadWindow = errors.New("netwide: bad window")
	// ErrBadPeriod: an Options.By below zero.
	ErrBadPeriod = errors.New("netwide: negative period")
	// ErrOrder: a summary of a window (or period) whose group Merger.Flush
	// has already given out: an input that goes back in time further than
	// the merge has gone forward. flowdedup writes each summary file in
	// time order.
	ErrOrder = errors.New("netwide: summary out of time order")
	// ErrTooPrecise: a sketch of a higher precision than
	// Options.MaxPrecision: more memory per group than the caller allows
	// (2^p bytes), and more than flowdedup writes.
	ErrTooPrecise = errors.New("netwide: sketch precision above the limit")
	// ErrKindMismatch: a summary that counts another key kind (--key), or
	// keys by network of other prefix lengths (--prefix), than the
	// summaries added before it: distinct sources and distinct
	// destinations do not add up to anything, nor do hosts and /24s.
	// Summaries of unknown kind (Summary.Key not valid) are not checked.
	ErrKindMismatch = errors.New("netwide: summaries count different key kinds")
)

// Summary is one router's summary of one window, as the merge needs it: the
// fields of a flowdedup summary line (docs/architecture.md#records-and-summaries).
type Summary struct {
	Observer         string // the router (--observer)
	StartNs, EndNs   int64  // the window, [StartNs, EndNs), Unix ns
	Distinct         uint64 // the router's filter's distinct count ("distinct")
	DistinctEstimate uint64 // its sketch's estimate ("distinct_estimate")
	Sketch           []byte // the sketch's binary form (sketch.HLL); nil without --summary-sketch
	// Key is the key kind the summary counts ("key"). Zero, or any kind
	// that is not valid, means unknown: a summary of a flowdedup that did
	// not say, which Add takes to count the kind of the others.
	Key flow.KeyKind
	// Prefix is the prefix lengths of the keys of a summary that counts
	// networks (--prefix; "key":"src/24,64"), the zero Mask for hosts.
	// It is part of what the summary counts, checked with Key.
	Prefix flow.Mask
	// Source says where the summary came from ("file:line"), for errors.
	Source string
	// Spread says the summary carried spread lists (--spread,
	// record.Summary.Spread). A merge drops them and counts the summary
	// (Merger.DroppedSpreads): see the package documentation.
	Spread bool
}

// Options says how summaries are grouped.
type Options struct {
	// By merges all windows of each period of this length, periods being
	// aligned on the Unix epoch (UTC) as flowdedup's windows are: a By of
	// one hour merges the 1-minute windows of each hour, on the hour. Every
	// window must lie within one period (ErrNotNested otherwise). 0 groups
	// summaries by window: those with equal start and end merge.
	By time.Duration
	// MaxPrecision refuses sketches of a higher precision (ErrTooPrecise)
	// before they are decoded: a group's sketch takes 2^p bytes. Zero
	// allows every precision package sketch decodes (up to
	// sketch.MaxPrecision, 256 KiB). flowdedup writes
	// sketch.DefaultPrecision.
	MaxPrecision uint8
}

// Group is the network-wide result of one window or period.
type Group struct {
	StartNs, EndNs int64    // the window, or the period
	Observers      []string // the routers with a summary in it, sorted
	Summaries      int      // summaries merged
	// Estimate is the distinct keys of the union of the summaries' sketches:
	// a key seen by several routers, or in several windows of a period,
	// counts once. Its standard error is that of one sketch (0.81% at
	// precision 14), however many were merged.
	Estimate uint64
	// SumEstimates and SumDistinct add up the summaries' own estimates and
	// filter counts: what adding per-router counts would say, for
	// comparison; they count a key once per router and window it was in.
	SumEstimates uint64
	SumDistinct  uint64
	// Sketch is the merged sketch. From Groups it belongs to the caller;
	// from Flush it is valid until the emit function returns.
	Sketch *sketch.HLL
	// Key is the key kind of every summary that said its kind, in this
	// group or any other (Merger.Kind); zero when none did. Prefix is
	// their prefix lengths (Merger.Prefix).
	Key    flow.KeyKind
	Prefix flow.Mask
}

// Merger merges summaries, one at a time, into groups. Memory is one sketch
// (2^p bytes) per group held, whatever the number of summaries: all groups
// until Groups, or only those still open when the caller gives summaries in
// time order and calls Flush as it goes. The zero Merger is not usable:
// make one with New.
type Merger struct {
	by      int64
	maxP    uint8
	groups  map[span]*group
	skipped int

	// buf holds the registers of the summary being added; reused.
	buf []byte

	// Flush has given out every group that starts before cutoff (when
	// flushed); reach is, of the groups with keys given out so far, the
	// one that ends last (when hasReach), for ErrOverlap.
	cutoff   int64
	flushed  bool
	reach    span
	hasReach bool

	// The first summary's sketch's precision and seed fingerprint, which
	// every other must share, and its Source.
	p       uint8
	fp      uint64
	firstAt string

	// The first known key kind, which every other known kind must equal,
	// where it came from, and how many summaries did not say theirs.
	kind    flow.KeyKind
	prefix  flow.Mask
	kindAt  string
	unknown int

	droppedSpreads int
}

// span is a group's key: its bounds.
type span struct{ start, end int64 }

type group struct {
	Group
	observers map[string]bool
	regs      []byte // the merged registers; Group.Sketch is made of them when the group is done
}

// estimate returns the estimate of the registers regs.
func estimate(p uint8, fp uint64, regs []byte) uint64 {
	h, err := sketch.FromRegisters(p, fp, regs)
	if err != nil {
		return 0 // never: regs came from sketch.Registers
	}
	return h.Estimate()
}

// New returns a Merger grouping as opt says.
func New(opt Options) (*Merger, error) {
	if opt.By < 0 {
		return nil, fmt.Errorf("%w: %v", ErrBadPeriod, opt.By)
	}
	return &Merger{by: int64(opt.By), maxP: opt.MaxPrecision, groups: map[span]*group{}}, nil
}

// Add merges summary s into its group. On an error nothing of s is kept and
// the Merger can go on with other summaries.
//
// With Options.By, a summary that crosses a period boundary is an error,
// except an empty one (estimate 0, an empty sketch: a gap in a router's
// traffic, which flowdedup writes as one summary when it spans more than
// 100000 windows): having no key to add, it is skipped, and counted by
// SkippedEmpty.
//
// Every summary that says its key kind must say the same one as the first
// that did, with the same prefix lengths (ErrKindMismatch otherwise, naming
// both kinds and summaries): the distinct sources of one router and the
// distinct destinations of another make no count, nor do one router's
// hosts and another's /24s. A summary that does not say (Key zero: one of a
// flowdedup from before summaries carried "key"; or a Key not valid) is
// taken to count that kind, so that older routers' files still merge;
// DroppedSpreads returns the number of summaries added whose spread
// lists (Summary.Spread) the merge dropped: top-N lists do not merge
// soundly (see the package documentation). A caller says so.
func (m *Merger) DroppedSpreads() int { return m.droppedSpreads }

// UnknownKind counts them.
func (m *Merger) Add(s *Summary) error {
	if s.EndNs < s.StartNs {
		return fmt.Errorf("%s%w: window [%d, %d) ends before it starts", at(s), ErrBadWindow, s.StartNs, s.EndNs)
	}
	if err := m.checkKind(s); err != nil {
		return err
	}
	if s.Spread {
		m.droppedSpreads++
	}
	if len(s.Sketch) == 0 {
		return fmt.Errorf("%s%w", at(s), ErrNoSketch)
	}
	if m.maxP != 0 {
		if p, err := sketch.PrecisionOf(s.Sketch); err != nil {
			return fmt.Errorf("%s%w", at(s), err)
		} else if p > m.maxP {
			return fmt.Errorf("%s%w: sketch of precision %d (%d KiB of registers), more than %d: flowdedup writes %d",
				at(s), ErrTooPrecise, p, 1<<p>>10, m.maxP, sketch.DefaultPrecision)
		}
	}
	// The sketch's registers, decoded into the Merger's one buffer: a
	// summary allocates nothing, a group one sketch.
	prec, fp, regs, buf, err := sketch.Registers(s.Sketch, m.buf)
	m.buf = buf
	if err != nil {
		return fmt.Errorf("%s%w", at(s), err)
	}
	if err := m.check(prec, fp, s); err != nil {
		return err
	}
	sp := span{s.StartNs, s.EndNs}
	if m.by != 0 {
		p := period(s.StartNs, m.by)
		if last := max(s.StartNs, s.EndNs-1); period(last, m.by) != p {
			if s.DistinctEstimate == 0 && estimate(prec, fp, regs) == 0 {
				m.skipped++
				m.keepKind(s)
				return nil
			}
			return fmt.Errorf("%s%w: window %s to %s crosses the boundary at %s of the %v periods",
				at(s), ErrNotNested, fmtNs(s.StartNs), fmtNs(s.EndNs), fmtNs(p+m.by), time.Duration(m.by))
		}
		sp = span{p, p + m.by}
	}
	if m.flushed && sp.start < m.cutoff {
		return fmt.Errorf("%s%w: window %s to %s, but the merge has given out its results up to %s (every input must be in time order, as flowdedup writes summaries)",
			at(s), ErrOrder, fmtNs(s.StartNs), fmtNs(s.EndNs), fmtNs(m.cutoff))
	}
	if m.p == 0 {
		m.p, m.fp, m.firstAt = prec, fp, s.Source
		if m.firstAt == "" {
			m.firstAt = "the first summary"
		}
	}
	g := m.groups[sp]
	if g == nil {
		g = &group{Group: Group{StartNs: sp.start, EndNs: sp.end}, observers: map[string]bool{}}
		m.groups[sp] = g
	}
	if g.regs == nil {
		g.regs = slices.Clone(regs)
	} else {
		sketch.MergeRegisters(g.regs, regs) // check has compared p and fp with the first's
	}
	m.keepKind(s)
	g.observers[s.Observer] = true
	g.Summaries++
	g.SumEstimates += s.DistinctEstimate
	g.SumDistinct += s.Distinct
	return nil
}

// at prefixes messages about s with where it came from.
func at(s *Summary) string {
	if s.Source == "" {
		return ""
	}
	return s.Source + ": "
}

// check requires a sketch of precision p and seed fingerprint fp to have
// those of the first sketch added, so that sketches that cannot merge fail
// whichever groups they are in, naming both summaries.
func (m *Merger) check(p uint8, fp uint64, s *Summary) error {
	switch {
	case m.p == 0:
		return nil
	case p != m.p:
		return fmt.Errorf("%ssketch of precision %d, %s's of %d (routers must use one precision): %w",
			at(s), p, m.firstAt, m.p, sketch.ErrPrecisionMismatch)
	case fp != m.fp:
		return fmt.Errorf("%ssketch seed fingerprint %016x, %s's %016x (routers must share --sketch-seed): %w",
			at(s), fp, m.firstAt, m.fp, sketch.ErrSeedMismatch)
	}
	return nil
}

// checkKind requires s, if it says its key kind, to say the kind of the
// summaries before it that said theirs.
func (m *Merger) checkKind(s *Summary) error {
	if !s.Key.IsValid() || m.kind == 0 || (s.Key == m.kind && s.Prefix == m.prefix) {
		return nil
	}
	return fmt.Errorf("%scounts key kind %v but %s counts %v (routers whose summaries are merged must run with one --key and one --prefix): %w",
		at(s), flow.KeySpec{Kind: s.Key, Mask: s.Prefix}, m.kindAt, flow.KeySpec{Kind: m.kind, Mask: m.prefix}, ErrKindMismatch)
}

// keepKind notes the key kind of s, once s is added.
func (m *Merger) keepKind(s *Summary) {
	switch {
	case !s.Key.IsValid():
		m.unknown++
	case m.kind == 0:
		m.kind, m.prefix, m.kindAt = s.Key, s.Prefix, cmp.Or(s.Source, "the first summary of a known kind")
	}
}

// Kind returns the key kind of the summaries added that said theirs (all
// say the same: Add refuses others), or zero when none did.
func (m *Merger) Kind() flow.KeyKind { return m.kind }

// Prefix returns the prefix lengths of the keys of the summaries that said
// their kind (all say the same), the zero Mask for hosts.
func (m *Merger) Prefix() flow.Mask { return m.prefix }

// UnknownKind returns how many of the summaries added did not say their
// key kind (an older flowdedup's), and were taken to count Kind.
func (m *Merger) UnknownKind() int { return m.unknown }

// SkippedEmpty returns how many empty summaries Add skipped because they
// crossed a period boundary.
func (m *Merger) SkippedEmpty() int { return m.skipped }

// Groups returns the groups not given out by Flush, by start then end,
// with their estimates. The groups' sketches are the Merger's own: adding
// more summaries afterwards changes them. Without Options.By, two
// different windows that overlap fail with ErrOverlap, unless one of them
// has no key at all.
func (m *Merger) Groups() ([]Group, error) {
	gs := m.sorted(func(*group) bool { return true })
	out := make([]Group, len(gs))
	reach, has := m.reach, m.hasReach
	for i, g := range gs {
		var err error
		if out[i], err = m.finish(g, &reach, &has); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Flush gives emit, by start then end, every group that no summary
// starting at t or later can join, and forgets it: without Options.By the
// windows that start before t, with it the periods that end by t's
// period. A caller that gives summaries in time order (from several
// inputs, by merging them on start) calls Flush(t) before adding a
// summary that starts at t, so that the Merger holds only the groups
// still open; Groups then returns the rest. Add refuses a summary of a
// group Flush gave out (ErrOrder). An error of emit, or ErrOverlap, stops
// Flush and is returned.
func (m *Merger) Flush(t int64, emit func(*Group) error) error {
	cut := t
	if m.by != 0 {
		cut = period(t, m.by)
	}
	if m.flushed && cut <= m.cutoff {
		return nil
	}
	m.cutoff, m.flushed = cut, true
	for _, g := range m.sorted(func(g *group) bool { return g.StartNs < cut }) {
		delete(m.groups, span{g.StartNs, g.EndNs})
		out, err := m.finish(g, &m.reach, &m.hasReach)
		if err != nil {
			return err
		}
		if err := emit(&out); err != nil {
			return err
		}
	}
	return nil
}

// sorted returns the groups for which keep is true, by start then end.
func (m *Merger) sorted(keep func(*group) bool) []*group {
	var gs []*group
	for _, g := range m.groups {
		if keep(g) {
			gs = append(gs, g)
		}
	}
	slices.SortFunc(gs, func(a, b *group) int {
		return cmp.Or(cmp.Compare(a.StartNs, b.StartNs), cmp.Compare(a.EndNs, b.EndNs))
	})
	return gs
}

// finish completes g's Group: its estimate, observers and kind. Groups
// come in order of start; reach is, of those with keys so far, the span
// that ends last (when has), against which g is checked for overlap.
func (m *Merger) finish(g *group, reach *span, has *bool) (Group, error) {
	if g.Sketch == nil {
		h, err := sketch.FromRegisters(m.p, m.fp, g.regs)
		if err != nil {
			return Group{}, err // never: the registers came from sketch.Registers
		}
		g.Sketch = h
	}
	g.Estimate = g.Sketch.Estimate()
	g.Observers = make([]string, 0, len(g.observers))
	for o := range g.observers {
		g.Observers = append(g.Observers, o)
	}
	slices.Sort(g.Observers)
	g.Key, g.Prefix = m.kind, m.prefix
	if g.Estimate == 0 {
		return g.Group, nil
	}
	if m.by == 0 && *has && g.StartNs < reach.end {
		return Group{}, fmt.Errorf("%w: window %s to %s and window %s to %s (merge by a period that is a multiple of both windows' lengths, %v and %v)",
			ErrOverlap, fmtNs(reach.start), fmtNs(reach.end), fmtNs(g.StartNs), fmtNs(g.EndNs),
			time.Duration(reach.end-reach.start), time.Duration(g.EndNs-g.StartNs))
	}
	if !*has || g.EndNs > reach.end {
		*reach, *has = span{g.StartNs, g.EndNs}, true
	}
	return g.Group, nil
}

// Merge merges summaries with a new Merger: a shorthand for New, Add for
// each, Groups.
func Merge(summaries []Summary, opt Options) ([]Group, error) {
	m, err := New(opt)
	if err != nil {
		return nil, err
	}
	for i := range summaries {
		if err := m.Add(&summaries[i]); err != nil {
			return nil, err
		}
	}
	return m.Groups()
}

// period returns the start of the period of length by holding t.
func period(t, by int64) int64 {
	p := t / by * by
	if p > t {
		p -= by // t < 0: division truncates towards zero
	}
	return p
}

// fmtNs formats a Unix ns time for messages.
func fmtNs(ns int64) string {
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

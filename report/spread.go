package report

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/spread"
)

// SpreadConfig asks the Reporter for each window's top spreaders
// (--spread; record.Summary.Spread, docs/spread.md). A side with N 0 is
// not asked for.
type SpreadConfig struct {
	Src, Dst int // N: how many hosts each list gives
	// Counters is M, the Space-Saving counters of each side of each open
	// window (spread.New): the counts are exact (every error 0) in a
	// window of at most M hosts on that side; otherwise a count
	// overcounts by at most the window's records / M. At least the
	// largest N.
	Counters int
	// Seed is the counters' hash seed; take a random one (spread.New).
	Seed uint64
}

// On reports whether any side is asked for.
func (c SpreadConfig) On() bool { return c.Src > 0 || c.Dst > 0 }

// check refuses a side the key kind has no address for, and counters
// fewer than the lists they give.
func (c SpreadConfig) check(kind flow.KeyKind) error {
	if c.Src < 0 || c.Dst < 0 {
		return fmt.Errorf("report: spread: negative list length")
	}
	if c.Src > 0 && kind == flow.KeyDst {
		return fmt.Errorf("report: spread src: %v keys have no source", kind)
	}
	if c.Dst > 0 && kind == flow.KeySrc {
		return fmt.Errorf("report: spread dst: %v keys have no destination", kind)
	}
	if c.On() && (c.Counters < max(c.Src, c.Dst) || c.Counters > spread.MaxCounters) {
		return fmt.Errorf("report: spread: %d counters for lists of %d: want from the longest list to %d", c.Counters, max(c.Src, c.Dst), spread.MaxCounters)
	}
	return nil
}

// spreadWindow counts the records of one open window.
type spreadWindow struct {
	startNs  int64
	windowed bool
	used     bool
	src, dst *spread.Counter // nil for a side not asked for
}

// spreads counts each open window's records by source and by
// destination. A window's counters are made when its first record comes
// and reused, emptied, for a later window once its summary is out: there
// are as many as windows open at once (the pipeline's bound, 64 at
// most), each with Counters counters per side asked for.
type spreads struct {
	cfg     SpreadConfig
	kind    flow.KeyKind
	mask    flow.Mask
	windows []*spreadWindow
	last    *spreadWindow // the window of the last record
	entries []spread.Entry
}

func newSpreads(cfg SpreadConfig, kind flow.KeyKind, mask flow.Mask) *spreads {
	return &spreads{cfg: cfg, kind: kind, mask: mask, entries: make([]spread.Entry, 0, max(cfg.Src, cfg.Dst))}
}

// window returns the counters of the window of a record (or summary) of
// window start ns, windowed w; nil when create is false and there are
// none.
func (sp *spreads) window(ns int64, w bool, create bool) *spreadWindow {
	if l := sp.last; l != nil && l.used && l.startNs == ns && l.windowed == w {
		return l
	}
	var free *spreadWindow
	for _, sw := range sp.windows {
		if sw.used && sw.startNs == ns && sw.windowed == w {
			sp.last = sw
			return sw
		}
		if !sw.used && free == nil {
			free = sw
		}
	}
	if !create {
		return nil
	}
	if free == nil {
		free = &spreadWindow{}
		// The config was checked: New cannot fail.
		if sp.cfg.Src > 0 {
			free.src, _ = spread.New(sp.cfg.Counters, sp.cfg.Seed)
		}
		if sp.cfg.Dst > 0 {
			free.dst, _ = spread.New(sp.cfg.Counters, sp.cfg.Seed^0x9e3779b97f4a7c15)
		}
		sp.windows = append(sp.windows, free)
	}
	free.startNs, free.windowed, free.used = ns, w, true
	sp.last = free
	return free
}

// add counts rec. It does not allocate once its window's counters are
// made.
func (sp *spreads) add(rec *record.Record) {
	sw := sp.window(rec.WindowNs, rec.Windowed, true)
	if sw.src != nil {
		sw.src.Add(rec.Key.Src())
	}
	if sw.dst != nil {
		sw.dst.Add(rec.Key.Dst())
	}
}

// take returns the spread of the window of summary s and frees its
// counters for a later window. The Spread and its lists are new, never
// written again: an export queue that keeps the summary (a shallow copy)
// keeps them. A window's lists are its one allocation, of N entries a
// side.
func (sp *spreads) take(s *record.WindowSummary) *record.Spread {
	sw := sp.window(s.StartNs, s.Windowed, false)
	if sw == nil && !s.Windowed {
		// A run without windows whose records said otherwise cannot
		// happen; a run whose one summary spans the packets' times
		// has its records unwindowed: start 0.
		sw = sp.window(0, false, false)
	}
	out := &record.Spread{
		Src: sp.side(sp.cfg.Src, sw, true),
		Dst: sp.side(sp.cfg.Dst, sw, false),
	}
	if sw != nil {
		if sw.src != nil {
			sw.src.Reset()
		}
		if sw.dst != nil {
			sw.dst.Reset()
		}
		sw.used = false
		if sp.last == sw {
			sp.last = nil
		}
	}
	return out
}

// side returns the top n of one side of sw: nil when n is 0 (not asked
// for), empty without counters (no record in the window).
func (sp *spreads) side(n int, sw *spreadWindow, src bool) []record.SpreadEntry {
	if n == 0 {
		return nil
	}
	if sw == nil {
		return []record.SpreadEntry{}
	}
	c := sw.dst
	if src {
		c = sw.src
	}
	sp.entries = c.Top(sp.entries[:0], n)
	list := make([]record.SpreadEntry, 0, len(sp.entries))
	for _, e := range sp.entries {
		list = append(list, record.SpreadEntry{Addr: sp.addr(e.Item), Distinct: e.Count, Error: e.Error})
	}
	return list
}

// addr writes a as the records do: a host, or with --prefix its network
// in CIDR form (flow.Key.AppendSrc).
func (sp *spreads) addr(a netip.Addr) string {
	if sp.mask.IsZero() {
		return a.String()
	}
	return netip.PrefixFrom(a, sp.mask.Bits(a.Is6())).String()
}

// spreadNoun says what a side's count counts, for the text lines.
func spreadNoun(kind flow.KeyKind, src bool) string {
	switch {
	case kind == flow.Key5Tuple:
		return "distinct flows"
	case kind == flow.KeyPair && src:
		return "distinct destinations"
	case kind == flow.KeyPair:
		return "distinct sources"
	}
	return "distinct keys"
}

// appendSpreadText appends the text lines of a window's spread (records
// in --format text), one per host, after the window's records:
//
//	2026-01-01T00:00:00Z  spread dst 1: 10.9.9.9 2000 distinct sources (error 0)
//	2026-01-01T00:00:00Z  spread src 1: 10.0.0.66 1500 distinct destinations (error 0)
//
// The time is the window's start.
func appendSpreadText(b []byte, s *record.Summary) []byte {
	if s.Spread == nil {
		return b
	}
	for _, side := range []struct {
		name string
		list []record.SpreadEntry
	}{{"src", s.Spread.Src}, {"dst", s.Spread.Dst}} {
		for i, e := range side.list {
			b = appendTime(b, s.StartNs)
			b = append(b, "  spread "...)
			b = append(b, side.name...)
			b = append(b, ' ')
			b = strconv.AppendInt(b, int64(i+1), 10)
			b = append(b, ": "...)
			b = append(b, e.Addr...)
			b = append(b, ' ')
			b = strconv.AppendUint(b, e.Distinct, 10)
			b = append(b, ' ')
			b = append(b, spreadNoun(s.Key, side.name == "src")...)
			b = append(b, " (error "...)
			b = strconv.AppendUint(b, e.Error, 10)
			b = append(b, ")\n"...)
		}
	}
	return b
}

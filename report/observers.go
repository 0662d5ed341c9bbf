package report

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/flowdedup/flowdedup/record"
)

// Records of several observation points in one run: flowdedup collect
// gathers the records of many routers, and numbers each router's
// observation domain in record.Record.ObserverID. This file holds what the
// Reporter and the record writers do with those numbers; a run of one
// observation point (replay, run) never sets Config.Observers and none of
// it happens.

// ObserverNames names the observers of records (record.Record.ObserverID):
// collect.Collector implements it. A name is at most MaxObserverLen bytes
// of characters that need no quoting in JSON or CSV.
type ObserverNames interface {
	ObserverName(id uint32) string
}

// Export staging by observer. An export destination stores a batch under
// one observer (Batch.Observer: ClickHouse's observer column), and its
// queue begins a new batch when the observer changes, so records of many
// exporters handed on as they come would make batches of a few records
// each. The Reporter gathers each observer's records apart instead, and
// hands an observer's on when it has observerStageSize of them, when they are
// observerAge old, when a window closes and at the end.
const (
	observerStageSize = 4096
	observerAge       = time.Second
	// maxObserverStaged bounds the records held for all observers
	// together; past it, every observer's are handed on.
	maxObserverStaged = 1 << 16
)

// observerStages gathers the records of each observer for the exports,
// and counts each observer's records of each window.
type observerStages struct {
	names  ObserverNames
	stages map[uint32]*observerStage
	staged int
	oldest time.Time                   // of the oldest record staged; zero when none
	counts map[int64]map[uint32]uint64 // by window start, then observer: records
	// whole counts the records of a run without windows (record.Record
	// and record.WindowSummary not Windowed), by observer: its one
	// summary spans the packets read, whatever the records' WindowNs.
	whole map[uint32]uint64
	free  []*observerStage
}

type observerStage struct {
	id   uint32
	recs []record.Record
}

func newObserverStages(names ObserverNames) *observerStages {
	return &observerStages{names: names, stages: map[uint32]*observerStage{}, counts: map[int64]map[uint32]uint64{}}
}

// add stages rec for the exports and counts it in its window; it reports
// whether the stages should be handed on (one is full, or all together
// hold too many).
func (o *observerStages) add(rec *record.Record) bool {
	var c map[uint32]uint64
	if rec.Windowed {
		if c = o.counts[rec.WindowNs]; c == nil {
			c = map[uint32]uint64{}
			o.counts[rec.WindowNs] = c
		}
	} else {
		if o.whole == nil {
			o.whole = map[uint32]uint64{}
		}
		c = o.whole
	}
	c[rec.ObserverID]++
	st := o.stages[rec.ObserverID]
	if st == nil {
		if n := len(o.free); n > 0 {
			st, o.free = o.free[n-1], o.free[:n-1]
		} else {
			st = &observerStage{}
		}
		st.id = rec.ObserverID
		o.stages[rec.ObserverID] = st
	}
	if o.staged == 0 {
		o.oldest = time.Now()
	}
	st.recs = append(st.recs, *rec)
	o.staged++
	return len(st.recs) >= observerStageSize || o.staged >= maxObserverStaged
}

// due reports whether the oldest staged record has waited long enough.
func (o *observerStages) due() bool {
	return o.staged > 0 && time.Since(o.oldest) >= observerAge
}

// dispatch hands every observer's staged records to the exports, one
// batch per observer named by it.
func (o *observerStages) dispatch(exports []record.Export, b *record.Batch) {
	for id, st := range o.stages {
		if len(st.recs) > 0 {
			b.Records, b.Observer = st.recs, o.names.ObserverName(id)
			for _, q := range exports {
				q.Records(b)
			}
			b.ID++
		}
		st.recs = st.recs[:0]
		if cap(st.recs) > observerStageSize {
			st.recs = nil // do not keep a burst's memory
		}
		delete(o.stages, id)
		o.free = append(o.free, st)
	}
	o.staged = 0
}

// distinct returns (and forgets) the records of the window of s by
// observer.
func (o *observerStages) distinct(s *record.Summary) map[uint32]uint64 {
	if !s.Windowed {
		c := o.whole
		o.whole = nil
		return c
	}
	c := o.counts[s.StartNs]
	delete(o.counts, s.StartNs)
	return c
}

// finishExporters fills in each exporter's Distinct for the window of s,
// adding an entry for an exporter with records in the window that the
// annotation left out.
func (o *observerStages) finishExporters(s *record.Summary) {
	c := o.distinct(s)
	if s.Collect == nil {
		return
	}
	for i := range s.Collect.Exporters {
		e := &s.Collect.Exporters[i]
		e.Distinct = c[e.ID]
		delete(c, e.ID)
	}
	first := len(s.Collect.Exporters)
	for id, n := range c {
		s.Collect.Exporters = append(s.Collect.Exporters, record.ExporterCounts{ID: id, Exporter: o.names.ObserverName(id), Distinct: n})
	}
	added := s.Collect.Exporters[first:]
	slices.SortFunc(added, func(a, b record.ExporterCounts) int { return cmp.Compare(a.ID, b.ID) })
}

// errSetObservers: SetObservers on a writer that has written records.
var errSetObservers = errors.New("report: SetObservers after the first record")

// SetObservers makes the writer add each record's observer name (an
// "exporter" field in jsonl, a last column in csv and text) for records
// that carry one. Call it before the first record.
func (rw *RecordWriter) SetObservers(n ObserverNames) error {
	if rw.started {
		return errSetObservers
	}
	rw.names = n
	if rw.format == formatCSV {
		rw.buf = rw.appendHeader(rw.buf[:0])
	}
	return nil
}

// SetObservers makes every file's records carry their observer's name
// (RecordWriter.SetObservers). Call it before the first record.
func (rf *RecordFiles) SetObservers(n ObserverNames) { rf.names = n }

// appendObserver appends the name of r's observer to a record just
// appended to b in format f: it goes before the record's closing brace
// (jsonl) or newline (csv, text). A record of no observer gets an empty
// name in csv and nothing in jsonl and text.
func appendObserver(b []byte, f format, names ObserverNames, r *record.Record) []byte {
	name := ""
	if r.ObserverID != 0 {
		name = names.ObserverName(r.ObserverID)
	}
	switch f {
	case formatJSONL:
		if name == "" {
			return b
		}
		b = append(b[:len(b)-2], `,"exporter":"`...) // before "}\n"
		b = append(b, name...)
		return append(b, "\"}\n"...)
	case formatCSV:
		b = append(b[:len(b)-1], ',')
		b = append(b, name...)
		return append(b, '\n')
	}
	if name == "" {
		return b
	}
	b = append(b[:len(b)-1], "  "...)
	b = append(b, name...)
	return append(b, '\n')
}

package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/record"
)

// Config says where a Reporter writes. The Reporter does not close any of
// the writers; it closes the Destinations and Exports it is given.
type Config struct {
	Out     io.Writer    // distinct-flow records; nil writes none
	Format  string       // record format, one of Formats; "" is jsonl
	Kind    flow.KeyKind // key kind of the records and summaries (Summary.Key)
	Prefix  flow.Mask    // prefix lengths of the keys (Summary.Prefix); zero for hosts
	Summary io.Writer    // window summaries, one JSON line each; nil writes none
	Totals  io.Writer    // run totals, one text line on Close (stderr), and a line per export; nil writes none

	// Observer names this observation point in every summary and in every
	// batch of records (Batch.Observer) (--observer); at most
	// MaxObserverLen bytes.
	Observer string
	// Filter is the effective filter spec, in every summary.
	Filter string
	// Destinations are more synchronous destinations (per-window files),
	// fed after Out and Summary: their first error stops the run, as a
	// file's does.
	Destinations []record.Destination
	// Exports are the --export destinations, each in its queue (package
	// export, opened by URL with export.Open): they are fed
	// every record and summary without ever making the Reporter wait, and
	// what they cannot deliver is counted (Summary.ExportDropped), never an
	// error.
	Exports []record.Export
	// DamagedFiles, when not nil, is called once, by Close, for the input
	// files the run found damaged, by reason (replay's: "empty",
	// "truncated", "damaged"), which the run totals show apart from the
	// packets: an empty file held no frame, so it is no packet.
	DamagedFiles func() map[string]uint64

	// Observers, when set, names the observers of records that carry one
	// (record.Record.ObserverID: flowdedup collect's exporters). The
	// record file (Out) writes each record's observer; the exports get
	// each observer's records in batches of their own, named by it
	// (Batch.Observer), while summaries keep Observer (the collector).
	Observers ObserverNames
	// Segments says that the run keys segments (a --decap with vxlan or
	// geneve, without novni): a csv record file (Out) has a vni column
	// (RecordWriter.SetSegments).
	Segments bool
	// Annotate, when set, is called with each summary before it is handed
	// on (flowdedup collect adds Summary.Collect); the Reporter then
	// counts each exporter's records of the window in
	// Summary.Collect.Exporters[i].Distinct.
	Annotate func(*record.Summary)
	// Spread asks for each window's top spreaders in its summary
	// (Summary.Spread; --spread): the Reporter counts the hosts of the
	// window's distinct records. Off when no side is asked for.
	Spread SpreadConfig
}

// stageSize is how many records the Reporter gathers before handing them
// on: enough that a Queue's lock is taken once per 256 records, few enough
// that records reach a file within moments of the pipeline's idle Flush.
const stageSize = 256

// Reporter is the pipeline.Sink of the CLI: it hands records and window
// summaries to its Destinations and Exports, and on Close writes the run totals.
//
// The synchronous sinks are the record file (--out, a RecordWriter), the
// summary file (--summary, a SummaryWriter) and Config.Destinations; the first
// error of any of them stops the Reporter: it is returned by that call and
// by every later one, Close included. The records of a window reach every
// sink before its summary does, so a summary on disk implies its records
// are too. The export Queues get the same records and summaries, copied,
// and never return an error.
//
// Records are gathered into batches of up to 256, each with the Config's
// Observer (Batch.Observer), and handed on when a batch fills, when a
// window closes, and on Flush (the pipeline calls it when idle). Each summary the sinks get is the pipeline's, with the
// Observer, Filter and Kind (as Summary.Key) of the Config and what each
// export Queue dropped since the previous summary (Summary.ExportDropped).
//
// Window counts every summary in the totals even after an error, since
// the pipeline still gives the summaries of the windows it closes while
// it stops, so the totals are the run's real ones.
//
// A Reporter is used from one goroutine, as pipeline.Sink says.
type Reporter struct {
	sinks   []record.Destination
	exports []record.Export
	stage   record.Batch
	sum     record.Summary
	out     io.Writer // for totals
	damaged func() map[string]uint64
	totals  record.WindowSummary
	windows uint64
	firstNs int64 // the first window's start
	lastNs  int64 // the last window's end
	final   *RunTotals
	err     error
	closed  bool

	obs      *observerStages // Config.Observers: the exports' records by observer
	obsBatch record.Batch    // the batch obs hands on
	annotate func(*record.Summary)
	spreads  *spreads // Config.Spread, nil when off
}

var _ pipeline.Sink = (*Reporter)(nil)
var _ pipeline.Flusher = (*Reporter)(nil)

// New returns a Reporter writing as cfg says. Format and Kind are checked
// even when Out is nil.
func New(cfg Config) (*Reporter, error) {
	if _, err := parseFormat(cfg.Format); err != nil {
		return nil, err
	}
	if !cfg.Kind.IsValid() {
		return nil, fmt.Errorf("report: %w: %v", flow.ErrBadKind, cfg.Kind)
	}
	if len(cfg.Observer) > record.MaxObserverLen {
		return nil, fmt.Errorf("%w: %d bytes, want at most %d", record.ErrObserver, len(cfg.Observer), record.MaxObserverLen)
	}
	if err := cfg.Spread.check(cfg.Kind); err != nil {
		return nil, err
	}
	r := &Reporter{out: cfg.Totals, exports: cfg.Exports, damaged: cfg.DamagedFiles}
	if cfg.Out != nil {
		records, err := NewRecordWriter(cfg.Out, cfg.Format, cfg.Kind)
		if err != nil {
			return nil, err
		}
		if cfg.Observers != nil {
			records.SetObservers(cfg.Observers) // a new writer: cannot fail
		}
		if cfg.Segments {
			records.SetSegments() // a new writer: cannot fail
		}
		r.sinks = append(r.sinks, records)
	}
	if cfg.Summary != nil {
		r.sinks = append(r.sinks, NewSummaryWriter(cfg.Summary))
	}
	r.sinks = append(r.sinks, cfg.Destinations...)
	r.stage.Records = make([]record.Record, 0, stageSize)
	r.stage.Observer = cfg.Observer
	if cfg.Observers != nil {
		r.obs = newObserverStages(cfg.Observers)
	}
	r.annotate = cfg.Annotate
	if cfg.Spread.On() {
		r.spreads = newSpreads(cfg.Spread, cfg.Kind, cfg.Prefix)
	}
	r.sum.Observer, r.sum.Filter, r.sum.Key, r.sum.Prefix = cfg.Observer, cfg.Filter, cfg.Kind, cfg.Prefix
	r.totals.MalformedBy = make(map[string]uint64)
	r.totals.SkippedBy = make(map[string]uint64)
	r.totals.DroppedBy = make(map[string]uint64)
	r.totals.LateBy = make(map[string]uint64)
	return r, nil
}

// Record takes the distinct-flow record rec. It does not allocate.
func (r *Reporter) Record(rec *record.Record) error {
	if r.err != nil {
		return r.err
	}
	r.stage.Records = append(r.stage.Records, *rec)
	if r.spreads != nil {
		r.spreads.add(rec)
	}
	if r.obs != nil && r.obs.add(rec) {
		r.obs.dispatch(r.exports, &r.obsBatch)
	}
	if len(r.stage.Records) == stageSize {
		return r.dispatch()
	}
	return nil
}

// dispatch hands the gathered records to the exports, then to the sinks.
func (r *Reporter) dispatch() error {
	if len(r.stage.Records) == 0 {
		return r.err
	}
	if r.obs == nil {
		for _, q := range r.exports {
			q.Records(&r.stage)
		}
	}
	for _, s := range r.sinks {
		if r.err = s.Records(&r.stage); r.err != nil {
			break
		}
	}
	r.stage.ID++
	r.stage.Records = r.stage.Records[:0]
	return r.err
}

// Window hands on the records gathered, then the summary of the closed
// window s. It counts s in the totals even after an error.
func (r *Reporter) Window(s *record.WindowSummary) error {
	r.add(s)
	if r.err != nil {
		return r.err
	}
	if err := r.dispatch(); err != nil {
		return err
	}
	if r.obs != nil {
		r.obs.dispatch(r.exports, &r.obsBatch)
	}
	sum := &r.sum
	sum.WindowSummary = *s
	sum.ExportDropped = nil
	sum.Collect = nil
	sum.Spread = nil
	if r.spreads != nil {
		sum.Spread = r.spreads.take(s)
	}
	if r.annotate != nil {
		r.annotate(sum)
	}
	if r.obs != nil {
		r.obs.finishExporters(sum)
	}
	for _, q := range r.exports {
		q.TakeDropped(&sum.ExportDropped)
	}
	for _, q := range r.exports {
		q.Window(sum)
	}
	for _, snk := range r.sinks {
		if r.err = snk.Window(sum); r.err != nil {
			break
		}
	}
	sum.WindowSummary = record.WindowSummary{} // keep no pointer into the pipeline's memory
	return r.err
}

// Flush hands on the records gathered and flushes the synchronous sinks.
// The export Queues send on their own schedule (QueueConfig.BatchAge).
func (r *Reporter) Flush() error {
	if r.err != nil {
		return r.err
	}
	if err := r.dispatch(); err != nil {
		return err
	}
	if r.obs != nil && r.obs.due() {
		r.obs.dispatch(r.exports, &r.obsBatch)
	}
	for _, s := range r.sinks {
		if r.err = s.Flush(); r.err != nil {
			break
		}
	}
	return r.err
}

// Close hands on the records gathered, closes the record outputs and
// the export Queues (which drain, all at once, each for up to its
// DrainTimeout), then, when there are exports, gives the summary outputs
// the run totals (RunTotals, their last line: what the exports lost at the
// end is in no window summary), closes them, and writes the totals on
// Config.Totals: a line of the run's counts and a line per export. The
// summary outputs get the totals only when no output failed before: their
// lines are then complete; a run without exports writes summaries only,
// one per window, as it always did. Close returns the first error of the Reporter's life; calls
// after Close return an error.
func (r *Reporter) Close() error {
	if r.closed {
		return errFirst(r.err, errClosed)
	}
	r.closed = true
	if r.err == nil {
		r.dispatch()
	}
	if r.obs != nil {
		r.obs.dispatch(r.exports, &r.obsBatch)
	}
	// The record files are complete: they need not wait for the drain.
	var summaries []totalsDestination
	for _, s := range r.sinks {
		if td, ok := s.(totalsDestination); ok {
			summaries = append(summaries, td)
			continue
		}
		r.err = errFirst(r.err, s.Close())
	}
	var wg sync.WaitGroup
	for _, q := range r.exports {
		wg.Go(func() { q.Close() })
	}
	wg.Wait()
	t := r.runTotals()
	r.final = t
	for _, s := range summaries {
		if r.err == nil && len(r.exports) > 0 {
			r.err = s.Totals(t)
		}
		r.err = errFirst(r.err, s.Close())
	}
	if r.out != nil {
		line := appendTotals(nil, &r.totals, r.windows, t.DamagedFiles)
		for _, st := range t.Exports {
			line = appendExportTotals(line, st)
		}
		tw := wholeWriter{w: r.out, op: "totals"}
		r.err = errFirst(r.err, tw.write(line, 1))
	}
	err := r.err
	r.err = errFirst(err, errClosed)
	return err
}

// Totals returns the run totals Close gave the summary outputs, or nil
// before Close. The caller must not change them.
func (r *Reporter) Totals() *RunTotals { return r.final }

func (r *Reporter) add(s *record.WindowSummary) {
	if r.windows == 0 {
		r.firstNs = s.StartNs
	}
	r.lastNs = s.EndNs
	t := &r.totals
	t.Packets += s.Packets
	t.Malformed += s.Malformed
	t.Skipped += s.Skipped
	t.Keys += s.Keys
	t.Prefiltered += s.Prefiltered
	t.Distinct += s.Distinct
	t.Dropped += s.Dropped
	for reason, n := range s.MalformedBy {
		t.MalformedBy[reason] += n
	}
	for reason, n := range s.SkippedBy {
		t.SkippedBy[reason] += n
	}
	for reason, n := range s.DroppedBy {
		t.DroppedBy[reason] += n
	}
	t.Late += s.Late
	for reason, n := range s.LateBy {
		t.LateBy[reason] += n
	}
	r.windows++
}

// appendTotals appends the one-line run totals:
//
//	totals: packets 1000, malformed 3 (bad_header 1, truncated 2), skipped 2 (not_ip 2), keys 995, distinct 120, dropped 0, windows 2
//
// and, when files were damaged, ", damaged files 2 (empty 1, truncated 1)".
func appendTotals(b []byte, t *record.WindowSummary, windows uint64, damaged map[string]uint64) []byte {
	b = append(b, "totals: packets "...)
	b = strconv.AppendUint(b, t.Packets, 10)
	b = append(b, ", malformed "...)
	b = appendCountBy(b, t.Malformed, t.MalformedBy)
	b = append(b, ", skipped "...)
	b = appendCountBy(b, t.Skipped, t.SkippedBy)
	b = append(b, ", keys "...)
	b = strconv.AppendUint(b, t.Keys, 10)
	if t.Prefiltered != 0 {
		b = append(b, " (prefiltered in the kernel "...)
		b = strconv.AppendUint(b, t.Prefiltered, 10)
		b = append(b, ')')
	}
	b = append(b, ", distinct "...)
	b = strconv.AppendUint(b, t.Distinct, 10)
	b = append(b, ", dropped "...)
	b = appendCountBy(b, t.Dropped, t.DroppedBy)
	if t.Late != 0 {
		b = append(b, ", late "...)
		b = appendCountBy(b, t.Late, t.LateBy)
	}
	b = append(b, ", windows "...)
	b = strconv.AppendUint(b, windows, 10)
	var files uint64
	for _, n := range damaged {
		files += n
	}
	if files != 0 {
		b = append(b, ", damaged files "...)
		b = appendCountBy(b, files, damaged)
	}
	return append(b, '\n')
}

// appendExportTotals appends the line of an export's totals:
//
//	export clickhouse://127.0.0.1:8123/flows: sent 1200 records and 2 window summaries, dropped 5 (queue_full 5), 7 records and 1 window summaries left in the spool for the next run
//	export ipfix://127.0.0.1:4739: sent 1200 records (IPFIX carries no window summaries), dropped 0
//
// The spool part is there only with a spool. IPFIX exports records only
// (export/ipfix's Window flushes them), so its line counts no summaries.
func appendExportTotals(b []byte, st record.ExportStats) []byte {
	var dropped uint64
	for _, n := range st.Dropped {
		dropped += n
	}
	if recordsOnly(st.Dest) {
		b = fmt.Appendf(b, "export %s: sent %d records (IPFIX carries no window summaries), dropped ", st.Dest, st.Sent)
	} else {
		b = fmt.Appendf(b, "export %s: sent %d records and %d window summaries, dropped ", st.Dest, st.Sent, st.SentWindows)
	}
	b = appendCountBy(b, dropped, st.Dropped)
	switch {
	case recordsOnly(st.Dest) && st.Spooled != 0:
		b = fmt.Appendf(b, ", %d records left in the spool for the next run", st.Spooled)
	case !recordsOnly(st.Dest) && (st.Spooled != 0 || st.SpooledWins != 0):
		b = fmt.Appendf(b, ", %d records and %d window summaries left in the spool for the next run", st.Spooled, st.SpooledWins)
	}
	return append(b, '\n')
}

// recordsOnly reports whether the export destination dest (its URL) takes
// records only: IPFIX has no Information Elements for a window's summary.
func recordsOnly(dest string) bool {
	scheme, _, _ := strings.Cut(dest, "://")
	return scheme == "ipfix" || scheme == "ipfix+tcp"
}

// appendCountBy appends n and, when any is not zero, the counts by reason
// in sorted order: "3 (bad_header 1, truncated 2)".
func appendCountBy(b []byte, n uint64, by map[string]uint64) []byte {
	b = strconv.AppendUint(b, n, 10)
	sep := " ("
	for _, reason := range slices.Sorted(maps.Keys(by)) {
		if by[reason] == 0 {
			continue
		}
		b = fmt.Appendf(b, "%s%s %d", sep, reason, by[reason])
		sep = ", "
	}
	if sep != " (" {
		b = append(b, ')')
	}
	return b
}

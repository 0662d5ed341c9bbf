// Package report is the output end of the flowdedup pipeline: it writes the
// distinct flows a pipeline reports, a summary of every closed window and
// the run totals, and serves the pipeline's counters to Prometheus.
//
// [Reporter] is the pipeline.Sink the CLI hands to the pipeline. It passes
// what the pipeline gives it on to [Destination]s, the contract every
// output implements (records in a [Batch], window summaries as a
// [Summary]):
//
//   - synchronous destinations, called from the pipeline's collator
//     goroutine: the record file ([RecordWriter]: --out, --format jsonl,
//     csv or text), the summary file ([SummaryWriter]: --summary), and
//     per-window files ([RecordFiles], [SummaryFiles]: -w with a time
//     pattern, see package report/outfile). Their first error stops the
//     run: a full disk must not lose records silently.
//   - [Export]s: --export destinations (package export/ipfix,
//     export/clickhouse) in the queues of package export, which deliver
//     from goroutines of their own. The Reporter never waits for them; what
//     they cannot deliver is counted by reason in every summary
//     (Summary.ExportDropped) and in the totals.
//
// The Reporter gathers records 256 at a time and hands them on when the
// stage fills, when a window closes and when the pipeline is idle (Flush),
// so that live records reach the files within moments. Each summary gets
// the Config's Observer, Filter and key kind. Close closes the
// destinations and exports and writes the totals: one line of the run's
// counts, then one line per export.
//
// Files: records are buffered (64 KiB) and written whole: each Write ends
// at a record boundary, and a regular file that takes only part of a
// failed write (a full disk) is truncated back to the last whole record.
// The records of a window are flushed before its summary is written. The
// first write error is a [*WriteError], which says how many records it
// cost; it is returned by the call that met it and by every later one.
// Close flushes but never closes the files, which belong to the caller.
//
// Summaries are JSON lines ([AppendSummary] writes one); [SummaryReader]
// and [ReadSummaries] read them back strictly, naming the line of any
// defect, for flowdedup merge. [NewCollector] turns a pipeline.Stats
// snapshot function into a prometheus.Collector and [Serve] serves a
// registry on /metrics.
//
// Example:
//
//	r, err := report.New(report.Config{Out: os.Stdout, Kind: flow.KeySrc, Summary: os.Stderr})
//	...
//	p, err := pipeline.New(pipeline.Config{Key: flow.KeySrc, Window: time.Hour}, r)
//	err = p.Run(ctx, sources...) // Run closes r
package report

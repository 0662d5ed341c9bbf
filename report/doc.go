// Package report is the output end of the flowdedup pipeline: it writes the
// distinct flows a pipeline reports, a summary of every closed window and
// run totals, and exports the pipeline's counters to Prometheus.
//
// [Reporter] is the [pipeline.Sink] the CLI hands to the pipeline. It is
// built from a [RecordWriter] (--out, --format: jsonl, csv or text, see
// [NewRecordWriter] for the formats) and a [SummaryWriter] (--summary), and
// prints one totals line on Close. All three are used from the pipeline's
// reporter goroutine only.
//
// # Lifecycle and failure
//
// Records are buffered (64 KiB) and written whole: each Write a destination
// receives ends at a record boundary, and a regular file that takes only
// part of a failed write (a full disk) is truncated back to the last whole
// record. The records of a window are flushed before its summary is
// written, and each summary is written as soon as its window closes. The
// first write error is returned as a [*WriteError], which says how many
// records it cost, by the call that met it and by every later call: the
// pipeline stops on it, and nothing is written after a gap. Close flushes;
// it never closes the destinations, which belong to the caller.
//
// # Metrics
//
// [NewCollector] turns a pipeline.Stats snapshot function into a
// prometheus.Collector (metric names are listed there); [Serve] serves a
// registry on /metrics until its context ends.
package report

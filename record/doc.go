// Package record holds what a run hands on to where its output goes, in
// the one place both sides import: the distinct-flow [Record] and the
// pipeline's [WindowSummary] it is made with, a [Batch] of records, a closed
// window's [Summary] and its JSON line, and the [Destination] contract they
// are given through (with [Export], a Destination that delivers on its
// own).
//
// Package pipeline makes Records and WindowSummaries; package report writes
// them to the local outputs (records, summaries, per-window files, metrics,
// totals) and feeds every Destination; package export and its
// export/ipfix and export/clickhouse send them away from the box. Those
// import record, and record imports none of them: only package flow, for
// the key.
package record

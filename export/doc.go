// Package export sends what leaves the box. It opens the --export
// destinations of replay, run and collect by URL (see [Open]; the
// destinations themselves are packages export/ipfix and export/clickhouse)
// and carries a run's records and window summaries to its
// --export destinations (an IPFIX collector, ClickHouse) without ever
// slowing the pipeline, and counts what it could not deliver.
//
// A [Queue] wraps one record.Destination. Records and Window copy what they
// are given into memory bounded by QueueConfig.MaxQueued and return at
// once; a manager goroutine decides what to send, spool or drop, and a
// caller goroutine makes the destination's calls, one at a time. A Queue is
// a record.Export: hand it to report.Config.Exports.
//
//   - Batching: records go out in batches of QueueConfig.BatchSize, sealed
//     when full or BatchAge after their first record, then a Flush; a
//     window's summary follows the records given before it. A batch has an
//     ID (a random base per Queue plus a sequence) and keeps it, with its
//     observer and observation domain, on every retry and through the
//     spool, so a destination can make a retried write idempotent.
//   - Retry: an error that does not wrap record.ErrRejected is transient:
//     the batch is retried, in order, after a backoff doubling from
//     RetryMin to RetryMax with jitter. The error is said once when the
//     destination begins to fail, and once more for each new thing the
//     operator must fix (record.Fixer), never at each retry. A rejected
//     batch is counted and, with a spool, kept in the destination's
//     rejected directory of the spool for inspection (records as JSON
//     lines, errors.log saying why), within the spool's bound.
//   - Spool ([Spool], --spool DIR, bounded by --spool-max): while a
//     destination fails, or when memory is half full, batches go to disk,
//     oldest first, and come back in order before anything newer, in this
//     run or the next. The file format is in spoolfile.go.
//   - Losses are counted by reason ([DropReasons]): in each summary
//     (export_dropped), in the totals, and in Prometheus ([NewCollector]).
//     A full memory drops the newest records (the caller never waits,
//     unless QueueConfig.Wait and the destination is up: replay); a full
//     spool likewise.
//   - Close delivers what is left, from memory and spool, for up to
//     QueueConfig.DrainTimeout (--export-drain), then spools or counts the
//     rest as shutdown.
//
// Notices (a destination down, back, a first rejection, a full or corrupt
// spool) go to QueueConfig.Notices, one line each.
//
// # Opening destinations
//
// [Open] reads a destination's URL, makes the Destination of its scheme and
// wraps it in a Queue, which the CLI gives to the Reporter
// (report.Config.Exports) and to Prometheus ([NewCollector]).
// [Check] refuses a malformed URL with Open's error without opening
// anything, for a command line's usage errors.
//
// Schemes:
//
//	ipfix://HOST:PORT                          IPFIX over UDP (package export/ipfix)
//	ipfix+tcp://HOST:PORT                      IPFIX over TCP (package export/ipfix)
//	clickhouse://[USER@]HOST:PORT/DB[?password_file=PATH]  ClickHouse's HTTP interface (package export/clickhouse)
//
// A ClickHouse user's password comes from PATH, else from the environment
// variable FLOWDEDUP_CLICKHOUSE_PASSWORD (clickhouse.URL.Config), looked up
// in Options.Env; USER:PASSWORD@ in the URL works too, and Open warns on
// Options.Notices that every user of the host can read it there.
//
// Each scheme also chooses its batching: IPFIX takes small batches
// (DefaultBatchSize, DefaultBatchAge), so that records reach
// the collector within a second; ClickHouse large ones (65536 rows, at
// most every 2 s), as it asks for few, large inserts. An IPFIX Queue
// gives its batches the run's Options.ObservationDomain
// (QueueConfig.Domain), so that a batch spooled by one run goes out
// under that run's domain when a later run, with another
// --observation-domain, sends it. A destination is named in summaries,
// metrics, notices and the spool by [Dest]: its URL without credentials,
// query or fragment.
//
// Lifecycle: Open starts the Queue's goroutines; the Reporter closes the
// Queue (draining it for up to Options.DrainTimeout), which closes the
// Destination. A destination that is down at start is not an error of Open: the
// Queue retries, spools (Options.Spool) or counts, and says so once on
// Options.Notices.
//
// Example:
//
//	spool, err := export.OpenSpool("/var/spool/flowdedup", 1<<30)
//	q, err := export.NewQueue("ipfix://collector:4739", exporter, export.QueueConfig{Spool: spool, Notices: os.Stderr})
//	r, err := report.New(report.Config{Kind: flow.KeySrc, Exports: []record.Export{q}})
package export

// Package report is the output end of the flowdedup pipeline: it writes the
// distinct flows a pipeline reports, a summary of every closed window and
// run totals, exports them to other systems, and exports the pipeline's
// counters to Prometheus.
//
// [Reporter] is the [pipeline.Sink] the CLI hands to the pipeline. It hands
// what the pipeline gives it to [Sink]s, the contract every output
// implements (records in a [Batch], window summaries as a [Summary]):
//
//   - synchronous sinks, called from the pipeline's collator goroutine:
//     the record file ([RecordWriter]: --out, --format jsonl, csv or text,
//     see [NewRecordWriter]), the summary file ([SummaryWriter]:
//     --summary) and Config.Sinks. Their first error stops the run: a full
//     disk must not lose records silently.
//   - export destinations (--export: IPFIX in package report/ipfix, opened
//     by URL with package report/export), each wrapped in a [Queue], which
//     calls its Sink from goroutines of its own. A slow, dead or hung
//     destination never slows the pipeline, and what a Queue cannot
//     deliver is counted by reason, never an error of the run.
//
// The Reporter gathers records 256 at a time and hands them on when the
// stage fills, when a window closes and when the pipeline is idle (Flush),
// so that live records reach the files within moments. Each summary gets
// the Config's Observer and Filter and, in ExportDropped, what each Queue
// dropped since the summary before. Close closes the sinks and the Queues
// and writes the totals: one line of the run's counts, then one line per
// export destination.
//
// # Files: lifecycle and failure
//
// Records are buffered (64 KiB) and written whole: each Write a destination
// receives ends at a record boundary, and a regular file that takes only
// part of a failed write (a full disk) is truncated back to the last whole
// record. The records of a window are flushed before its summary is
// written, and each summary is written as soon as its window closes. The
// first write error is returned as a [*WriteError], which says how many
// records it cost, by the call that met it and by every later call: the
// pipeline stops on it, and nothing is written after a gap. The pipeline
// still gives the summaries of the windows it closes as it stops, and the
// Reporter counts them, so the totals after a write error are the run's.
// Close flushes; it never closes the files, which belong to the caller.
//
// Summaries are JSON lines (see [SummaryWriter] for the fields);
// [SummaryReader] and [ReadSummaries] read them back strictly, naming the
// line of any defect, for flowdedup merge.
//
// # Export queues
//
// A [Queue] copies what it is given into memory bounded by
// QueueConfig.MaxQueued (DefaultMaxQueued records) and returns at once; one
// manager goroutine decides what to send, spool or drop, and one caller
// goroutine makes the Sink calls, one at a time, so that the manager stays
// free while a call blocks. Policies:
//
//   - Batching: records go out in batches of QueueConfig.BatchSize,
//     sealed when full or BatchAge after their first record, then a Flush;
//     a window's summary goes after the records given before it, following
//     the batch that was being filled when it came (a window does not cut
//     a batch short: a replay closes many windows a second, and each
//     short batch would hold a whole buffer of the memory bound). The
//     defaults (1024 records, 1 s) suit IPFIX; report/export sets each
//     scheme's.
//   - Batch IDs: a random 64-bit base per Queue plus a sequence. A batch
//     keeps its ID on every retry and in the spool, so a destination can
//     make a retried write idempotent; Batch.Retry is set when an earlier
//     attempt's outcome is unknown (it may have landed). It keeps its
//     observer (Batch.Observer, the Reporter's Config.Observer) likewise,
//     so a batch spooled by one run and sent by the next, after
//     --observer changed, is stored and looked for under the first; and
//     its observation domain (Batch.Domain, the Queue's
//     QueueConfig.Domain, which report/export sets to
//     --observation-domain for IPFIX), so an IPFIX collector files it
//     under the domain of the run that saw it.
//   - Retry: a transient error (any error not wrapping ErrRejected) is
//     retried after a backoff that doubles from RetryMin (100 ms) to
//     RetryMax (30 s), less a random part of up to half ("equal jitter").
//     The batch in flight is retried until it is delivered, so order is
//     kept: nothing overtakes it. A Flush that fails is retried as a Flush
//     (the Sink holds the records), not by giving the batch again.
//   - Rejection: a batch (or summary) the destination refuses for good
//     (ErrRejected) is dropped and counted as rejected; the first is said.
//   - Notices: one line on QueueConfig.Notices (stderr) when the
//     destination becomes unreachable, one when it is back, and one for
//     the first rejection, a full spool, each corrupt spool file, and what
//     Close left behind.
//   - Losses, counted per destination by reason ([DropReasons]), in
//     records (a summary counts 1): queue_full (memory full and no spool,
//     or the spool could not keep up), spool_full (memory and spool full),
//     rejected, shutdown (not delivered when Close's drain time ran out,
//     and not spooled), spool_corrupt (spool files that could not be read
//     back, 1 per file). They appear in each summary (export_dropped: by
//     destination, by reason, what was lost since the previous summary),
//     in the totals, and in Prometheus ([NewExportCollector]).
//   - Full memory: the newest records are dropped, in the caller, without
//     waiting. The oldest are kept because they are what the destination
//     is missing, in order, and keeping them needs no work in the caller's
//     goroutine. With QueueConfig.Wait (replay: report/export's
//     Options.Wait), the caller waits for room instead while the
//     destination is up, so that a destination slower than the replay
//     slows it rather than lose records; while it fails, Wait changes
//     nothing.
//   - Close: Queue.Close delivers what is queued, from memory and spool,
//     for up to QueueConfig.DrainTimeout (DefaultDrainTimeout, 10 s;
//     --export-drain), then closes the Sink. A destination that is failing
//     when everything is on disk is not waited for: the spool keeps it for
//     the next run. When the time runs out, what is in memory goes to the
//     spool if there is one and room, and the rest is counted as shutdown;
//     a Sink call still running then is abandoned (its goroutine ends when
//     the call returns; that Sink is not closed).
//
// # Spool
//
// With a [Spool] (--spool DIR, bounded by --spool-max bytes) a Queue moves
// batches and summaries to disk, oldest first, whenever its destination
// fails, and when its memory is more than half full; it sends them back,
// in order, before anything newer, and deletes each file once delivered or
// rejected. The batch in flight when the destination fails goes to disk
// too, as the oldest file, marked as attempted. Files left by an earlier
// run (a crash, a stop while the destination was down) are sent first
// when a Queue for their destination starts ([Spool.Unclaimed] lists those
// of destinations not exported to in this run). A lock file keeps two
// processes out of one spool directory.
//
// Layout: DIR/.lock, and a directory per destination named after it (its
// URL made safe for a file name, and a hash of it), holding one file per
// batch or summary, named by a 16-hex-digit sequence number that orders
// them, with the extension .spool. A file is written under a temporary
// name (.tmp-SEQ), fsync'd, renamed, and the directory fsync'd, so a crash
// leaves either the whole file or a temporary one, which OpenSpool
// deletes. The format (version 2, big-endian):
//
//	offset     size  field
//	0          8     magic "FDDSPOOL"
//	8          2     version, 2
//	10         1     type: 1 a batch of records, 2 a window summary
//	11         1     flags: bit 0 attempted (sent before, outcome
//	                 unknown); bit 1 the domain is there (P = 4)
//	12         8     batch ID; 0 for a summary
//	20         4     records in the batch; 0 for a summary
//	24         4     payload length L
//	28         2     destination length D
//	30         D     destination (the --export URL without credentials)
//	30+D       1     observer length O (at most 255); 0 for a summary
//	31+D       O     observer: the --observer of the run that made the
//	                 batch, so that a later run sends it under that name
//	31+D+O     P     with flag bit 1 (P = 4, else 0): the IPFIX
//	                 observation domain ID of the run that made the batch;
//	                 a flag, since 0 is a domain too
//	31+D+O+P   L     payload: a batch's records, 68 bytes each (the key's
//	                 40-byte binary form, flow.Key.AppendBinary, then
//	                 TimeNs, WindowNs, WindowEndNs as 8-byte two's
//	                 complement and Worker in 4 bytes), or a summary's JSON
//	                 line (which holds its observer)
//	31+D+O+P+L 4     CRC-32C (Castagnoli) of all the bytes before it
//
// Version 1 files (flowdedup before batches carried their observer) are
// still read: the same without the observer length, observer and domain,
// their batches sent under the observer and domain of the run that sends
// them. A version 2 batch without the domain (flag bit 1 clear: its Queue
// had no QueueConfig.Domain, as a clickhouse:// destination's) goes out
// under the domain of the run that sends it, which only IPFIX uses.
//
// A file whose destination is not its directory's, or that is truncated,
// fails its checksum, has an unknown version or holds a key that is not
// valid, is moved to the destination's corrupt/ directory, said, and
// counted as spool_corrupt; it no longer counts against the bound.
//
// Full spool: a batch that would take the spool past --spool-max (or that
// the file system refuses for want of room) stays in memory, and when
// memory is full too the newest records are dropped and counted as
// spool_full ("drop newest"). The spool then holds the oldest records, a
// gap-free prefix of what the destination missed, its files are never
// rewritten, and the loss is at the end, where the counts say it is.
//
// # Metrics
//
// [NewCollector] turns a pipeline.Stats snapshot function into a
// prometheus.Collector (metric names are listed there), and
// [NewExportCollector] does the same for the export Queues; [Serve] serves
// a registry on /metrics until its context ends.
package report

// Package export opens the --export destinations of replay and run: [Open]
// reads a destination's URL, makes the Destination of its scheme and wraps
// it in a export.Queue, which the CLI gives to the Reporter
// (report.Config.Exports) and to Prometheus (export.NewCollector).
// [Check] refuses a malformed URL with Open's error without opening
// anything, for a command line's usage errors.
//
// Schemes:
//
//	ipfix://HOST:PORT                          IPFIX over UDP (package report/ipfix)
//	ipfix+tcp://HOST:PORT                      IPFIX over TCP (package report/ipfix)
//	clickhouse://[USER@]HOST:PORT/DB[?password_file=PATH]  ClickHouse's HTTP interface (package report/clickhouse)
//
// A ClickHouse user's password comes from PATH, else from the environment
// variable FLOWDEDUP_CLICKHOUSE_PASSWORD (clickhouse.URL.Config), looked up
// in Options.Env; USER:PASSWORD@ in the URL works too, and Open warns on
// Options.Notices that every user of the host can read it there.
//
// Each scheme also chooses its batching: IPFIX takes small batches
// (export.DefaultBatchSize, export.DefaultBatchAge), so that records reach
// the collector within a second; ClickHouse large ones (65536 rows, at
// most every 2 s), as it asks for few, large inserts. An IPFIX Queue
// gives its batches the run's Options.ObservationDomain
// (export.QueueConfig.Domain), so that a batch spooled by one run goes out
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
package export

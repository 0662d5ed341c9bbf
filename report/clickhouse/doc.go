// Package clickhouse writes distinct-flow records and window summaries to
// a ClickHouse database over its HTTP interface: the
// --export clickhouse://HOST:PORT/DB destination of DESIGN.md section 7.
// [ParseURL] reads such a URL, [URL.Config] makes its Config (finding the
// password, see Passwords), [New] makes an [Exporter], which is a
// report.Destination. It works with Debian's clickhouse-server 18.16 (the tests
// run it) and is written to the SQL and HTTP interface that current
// releases accept too (see "ClickHouse 18.16 and current releases").
//
// # Passwords
//
// The URL names the user; the password is best kept out of it, since a
// command line is visible to every user of the host (ps,
// /proc/PID/cmdline) and to anyone who may read the service's unit
// (systemctl show). When the URL has a user and no password, [URL.Config]
// takes it, in this order, from:
//
//  1. the file of the query parameter password_file=PATH, its one trailing
//     newline dropped (as `echo secret > PATH` leaves one): mode 0600, or
//     systemd's LoadCredential=clickhouse-password:/etc/flowdedup/clickhouse-password
//     with password_file=${CREDENTIALS_DIRECTORY}/clickhouse-password,
//     a ${CREDENTIALS_DIRECTORY} that flowdedup replaces itself, since
//     systemd does not expand it within an EnvironmentFile's values;
//  2. the environment variable FLOWDEDUP_CLICKHOUSE_PASSWORD, when set
//     (clickhouse-client reads CLICKHOUSE_PASSWORD alike);
//  3. nothing: an empty password.
//
// A password file that cannot be read is an error (ErrPasswordFile) that
// names the file: the command line is refused before anything runs.
// USER:PASSWORD@ in the URL still works (percent-encode / ? # % @ : [ ] in
// it), and flowdedup warns once on stderr (package report/export). The lookups go through an [Env],
// so that tests give their own environment. No error of this package
// holds a password: URLs are shown without it and without their query,
// the server's answers to a failed login name the user only, and requests
// carry it in the Authorization header, never in the URL.
//
// # Tables
//
// The first write creates the database and the two tables when they are
// missing, and checks the columns of tables that exist. flows holds one
// row per distinct-flow record:
//
//	observer  String           --observer: the router that saw the flow
//	window    DateTime('UTC')  start of the record's window (0, 1970-01-01, when windows are off)
//	ts        DateTime('UTC')  the record's time (its first packet in the window), whole seconds
//	ts_ns     UInt32           nanoseconds within that second: ts and ts_ns give the time to the ns
//	key       String           the key in flow.Key's text form (below)
//	src       String           source address as the jsonl records print it; "" for dst keys
//	dst       String           destination address likewise; "" for src keys
//	proto     UInt8            IP protocol of 5-tuple keys, else 0
//	sport     UInt16           ports of 5-tuple keys with ports, else 0
//	dport     UInt16
//	kind      String           the key kind: src, dst, pair or 5tuple
//	batch     UInt64           report.Batch.ID of the insert that wrote the row
//
//	ENGINE = ReplacingMergeTree PARTITION BY toYYYYMM(window)
//	ORDER BY (window, observer, src, dst, kind, key, ts, ts_ns)
//
// A row's observer is its batch's (report.Batch.Observer: the --observer of
// the run that saw the flow, kept in the spool when a later run sends the
// batch), or Config.Observer for a batch without one.
//
// windows holds one row per closed window's summary (report.Summary):
//
//	observer, window_start, window_end          String, DateTime('UTC'), DateTime('UTC')
//	packets, malformed, skipped, keys, distinct, distinct_estimate, dropped     UInt64
//	sketch       String   the window's HyperLogLog (pipeline.WindowSummary.Sketch) in
//	                      standard base64, as --summary writes it; "" without --summary-sketch
//	prefiltered, late     UInt64
//	final        UInt8    1 for the last window of a run
//	filter       String   the filter spec
//	kind         String   the key kind, as in flows
//	id           UInt64   FNV-1a hash of the row's other columns (see Idempotency)
//
//	ENGINE = ReplacingMergeTree PARTITION BY toYYYYMM(window_start) ORDER BY (window_start, observer, id)
//
// Section 7's columns are all there, with its names and types (the
// DateTimes are in UTC, so that they print as the jsonl records do whatever
// the server's time zone); kind, batch, the other counts, filter, final and
// id are added. The sort keys serve per-window queries: a window's rows are
// contiguous, so uniqExact(src) over one window reads that window only.
// They also say which rows are the same: the sort key of flows is every
// column that says what was seen (not batch), that of windows ends with id,
// and ReplacingMergeTree folds rows with equal sort keys into one when it
// merges parts. An import run twice (the same capture, observer and
// filter) thus counts each row once in queries with FINAL (SELECT count()
// FROM DB.flows FINAL), and in every query once the parts are merged;
// uniqExact needs no FINAL. Tables of the earlier MergeTree design are
// still written, and double on a re-run; the repository's docs/export.md
// has the statements that move one to this design.
// Partitions are months, so that old data goes with
// ALTER TABLE ... DROP PARTITION 202601 (18.16 has no TTL).
//
// Existing tables are written if they have at least these columns with
// these types (a DateTime of any time zone will do: the values are seconds
// since the epoch either way); other columns get their defaults. Anything
// else is a *SchemaError naming the first column that does not fit.
//
// # Keys and times
//
// key is flow.Key.AppendText's form, stable by contract:
//
//	src, dst   10.0.0.1                          2001:db8::1
//	pair       10.0.0.1 > 10.0.0.2
//	5tuple     tcp 10.0.0.1:1234 > 10.0.0.2:80   udp [2001:db8::1]:53 > [2001:db8::2]:5353
//	           icmp 10.0.0.1 > 10.0.0.2          47 10.0.0.1 > 10.0.0.2  (no ports; protocol number)
//
// Addresses in key, src and dst are in net/netip's form (RFC 5952 for
// IPv6; IPv4-mapped IPv6 stays ::ffff:a.b.c.d), the form of the jsonl
// records. A record's time in nanoseconds is
// toUnixTimestamp(ts) * 1000000000 + ts_ns. DateTime holds 1970 to 2106;
// records outside are rejected. Windows shorter than a second, or not
// starting on a whole second, lose the fraction in window and window_start.
//
// Network-wide distinct sources per hour, over the rows of every router
// (src is empty in rows of dst keys, hence the condition):
//
//	SELECT toStartOfHour(window) AS hour, uniqExact(src) AS sources
//	FROM DB.flows WHERE src != ''
//	GROUP BY hour ORDER BY hour
//
// With --window 1h, window is the hour already, and DESIGN.md's form does
// the same: SELECT window, uniqExact(src) FROM DB.flows GROUP BY window.
// Summing distinct_estimate of windows over routers counts a source seen by
// two routers twice; `flowdedup merge` merges the sketches instead.
//
// # Inserts
//
// Records inserts each report.Batch in one request (INSERT ... FORMAT
// RowBinary, the rows in the body): batching policy, sizes and ages are
// the caller's (delivery.Queue), and batches are never joined. RowBinary is
// the leanest format both releases read: fixed-width little-endian numbers
// and length-prefixed strings, no escaping, no time zone; encoding a batch
// reuses one buffer and allocates nothing. Window inserts one row.
//
// An insert is atomic per part, not per statement: the server cuts the
// rows of one request into blocks of max_insert_block_size rows (1048576 by
// default) and each block into one part per partition it touches, and
// commits each part on its own (the rename of its directory). A batch
// within one month is one part, whole or absent; a batch that spans a
// month boundary is two, and a server that fails between them keeps the
// first. Idempotent retries below do not rely on either.
//
// # Idempotency
//
// A retry after an insert whose outcome is unknown (a timeout, a broken
// connection, an error answer) must not write rows twice. ClickHouse 18.16
// deduplicates inserts only into Replicated tables, which need ZooKeeper;
// so this package does it itself:
//
//   - Every flows row carries its batch's ID. When a batch is given again
//     with Batch.Retry, or after its previous insert failed in a way that
//     may have left rows (the Exporter remembers the last 4096 such IDs),
//     Records first reads back the rows with that ID and observer, within
//     the batch's windows (the sort key makes that cheap), and inserts only
//     the records that are not there, matching every column; a record that
//     occurs n times in the batch needs n rows. A batch that landed whole
//     is not written again; one that landed in part (one month's part of
//     two) gets the rest.
//   - The read-back must see everything the earlier attempt will ever
//     write. Every request of an Exporter goes in one HTTP session
//     (session_id), and the server handles one request of a session at a
//     time, from the moment it reads the request's headers until it
//     answers: while the earlier attempt is still in the server's hands
//     (the server is slow, or still receiving the body when the client
//     gave up), the read-back fails with SESSION_IS_LOCKED, a transient
//     error, and the caller retries later.
//   - A summary has no Retry flag, so Window always reads first whether
//     windows has a row with the same observer, window start and id, the
//     hash of all the row's other columns, and inserts only when not.
//     Two runs with identical summaries in every column (the same capture
//     replayed twice with the same observer, filter and kind) therefore
//     leave one row; a report.Summary ID, like Batch.ID, would tell them
//     apart.
//
// What this does not cover: a request the server had not even begun to
// read (its bytes waiting in a socket queue for longer than the client's
// Timeout, 30 s by default) and begins after the retry's read-back; and
// retries by another process (a spool replayed after a restart) while an
// attempt of the dead process is still in the server's hands, since
// sessions are per process. Both need a server that sits on a request for
// longer than the timeout.
//
// # Failures
//
// New sends nothing and fails only for a malformed Config: a server that
// is down is reported by the writes. Errors of Records and Window are of
// four kinds:
//
//   - Permanent, wrapping report.ErrRejected (the caller drops the batch
//     and counts it): only a rejection of the rows themselves. Records no
//     row can hold (ErrBadRecord: a key of another kind than Config.Kind,
//     a time outside 1970 to 2106), checked before anything is sent; and
//     answers that sending the same rows again cannot change (*ServerError
//     with Permanent true): malformed data or a bad statement (the
//     ClickHouse error codes in permanentCodes), or, without a ClickHouse
//     code, HTTP 400, 413, 415 or 422.
//   - Transient, waiting for the operator: a refused login (wrong or
//     missing password, unknown user, a host the user may not log in
//     from), a user without the right to write (readonly, a database it
//     may not use), an address that answers but is not a ClickHouse HTTP
//     interface (3xx, 401, 403, 404 without a code), and a table whose
//     columns do not fit (*SchemaError, which names the column, the type
//     it has and the type wanted). The error says what to fix
//     (ServerError.Fix); a delivery.Queue says it once when the destination
//     starts failing, and with --spool the batches wait on disk until the
//     operator has fixed it, in this run or the next.
//   - Transient, waiting for the server: no connection, a timeout, a
//     broken connection, an answer that is not what was asked for
//     (ErrBadAnswer), and server errors that may pass: a 5xx without a
//     code, timeouts, memory, too many parts or queries, a locked session,
//     a server shutting down, codes not listed.
//   - Transient, and the tables are looked at again on the next call: the
//     database, a table or a column is gone (a table dropped or altered
//     under a running Exporter). The next call creates what is missing, or
//     returns the *SchemaError.
//
// *ServerError carries the HTTP status, the ClickHouse error code (from
// the X-ClickHouse-Exception-Code header of current releases, or the
// "Code: N" that begins the text in both) and the server's text, shortened
// and made printable. Nothing in an answer can make this package panic
// (fuzzed).
//
// # ClickHouse 18.16 and current releases
//
// Only what both accept is used: the HTTP interface (POST, the statement
// in the body or, for INSERT, in the query parameter), RowBinary input and
// output, JSONEachRow and TabSeparated output, CREATE DATABASE/TABLE IF
// NOT EXISTS, MergeTree and ReplacingMergeTree with PARTITION BY and ORDER
// BY clauses, FINAL,
// DateTime('UTC'), toYYYYMM, system.columns, backquoted identifiers,
// HTTP basic authentication, and the session_id and wait_end_of_query
// parameters. Avoided, since 18.16 lacks them or has them only as
// experiments: insert deduplication outside Replicated tables
// (insert_deduplication_token, non_replicated_deduplication_window),
// LowCardinality, DateTime64, the IPv4 and IPv6 column types (also, the
// text form matches the jsonl records), TTL, data-skipping indexes, Map,
// query parameters ({name:Type}), the input() table function, async
// inserts, and the X-ClickHouse-User and X-ClickHouse-Key headers. The
// tests run against 18.16 only (Debian's package); the error texts of
// current releases are parsed from their documented form (table-tested).
//
// # Why not a library
//
// DESIGN.md asks for a well-kept client where one does the job. The
// official github.com/ClickHouse/clickhouse-go/v2 (v2.50.0) speaks HTTP,
// but every request it sends carries the setting client_protocol_version,
// which 18.16 refuses ("Code: 115, Unknown setting
// client_protocol_version"): it cannot even ping the server, and has no
// option to leave the setting out. github.com/mailru/go-clickhouse, an
// HTTP database/sql driver, is not served by the module proxy. The
// protocol needed here is small (three statements, RowBinary rows), so
// net/http it is.
//
// # Lifecycle
//
// An Exporter is used from one goroutine at a time (report.Destination's rule)
// and starts no goroutines. Records and Window write before they return,
// so Flush has nothing to do; Close releases the idle connection, and
// later calls return ErrClosed.
package clickhouse

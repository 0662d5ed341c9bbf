// Package clickhouse writes distinct-flow records and window summaries to
// a ClickHouse database over its HTTP interface: the
// --export clickhouse://[USER@]HOST:PORT/DB destination.
//
// [ParseURL] reads such a URL; [URL.Config] makes its [Config], finding the
// password where the URL says (the file of password_file=PATH, with a
// ${CREDENTIALS_DIRECTORY} of systemd's replaced; else the environment
// variable FLOWDEDUP_CLICKHOUSE_PASSWORD; else none), through an [Env];
// [New] makes an [Destination], which is a record.Destination. A password file
// that cannot be read is [ErrPasswordFile]. No error holds a password:
// URLs are shown without it, and requests carry it in the Authorization
// header.
//
// The first write creates the database and its three tables, flows (one
// row per record), windows (one row per window summary) and spread (one
// row per host of a summary's spread lists, --spread), when they are
// missing, and checks the columns of tables that exist, adding to an
// older flows table the columns that came later (vni and has_vni, a key's
// VXLAN or Geneve segment). Inserts are one request per record.Batch
// (INSERT ... FORMAT RowBinary), whose rows are encoded as the request's
// body is sent, a chunk at a time, allocating nothing per row; a retry or
// a gzipped insert encodes the batch into one reused buffer first. Large
// buffers live outside Go's heap (package export/internal/hugepage). A
// batch given again after an unknown
// outcome (record.Batch.Retry, or a failure that may have left rows) is
// read back first by its ID, so that a retry never writes a row twice. The
// tables, their sort keys, the idempotent retries and their limits, and the
// SQL this package keeps to (what both 18.16 and current releases accept)
// are described for users in the repository's docs/export.md, "ClickHouse".
//
// # Errors
//
// New sends nothing and fails only for a malformed Config: a server that is
// down is reported by the writes. An error of Records or Window that wraps
// record.ErrRejected is permanent (the caller drops the batch and counts
// it): records no row can hold ([ErrBadRecord]: a key of another kind than
// Config.Kind, a time outside 1970 to 2106), and server answers that
// sending the same rows again cannot change ([*ServerError] with Permanent
// true: malformed data or statement). Everything else is transient and
// worth a retry: no connection, timeouts, overload, a refused login or a
// user without the right to write ([ServerError.Fix] says what the
// operator should change), a table whose columns do not fit
// ([*SchemaError] names the column), a dropped database or table (created
// again on the next call). Nothing in a server's answer can make the
// package panic (fuzzed).
//
// # Lifecycle
//
// A Destination is used from one goroutine at a time (record.Destination's
// rule) and starts no goroutines. Records and Window write before they
// return, so Flush has nothing to do; Close releases the idle connection,
// and later calls return [ErrClosed]. It works with Debian's
// clickhouse-server 18.16, which the tests run.
//
// Example, with a export.Queue in front of it as `--export` does:
//
//	u, err := clickhouse.ParseURL("clickhouse://writer@127.0.0.1:8123/flows?password_file=/etc/flowdedup/clickhouse-password")
//	cfg, err := u.Config(clickhouse.OSEnv())
//	cfg.Kind, cfg.Observer = flow.KeySrc, "edge-fra1"
//	e, err := clickhouse.New(cfg)
//	q, err := export.NewQueue("clickhouse://127.0.0.1:8123/flows", e, export.QueueConfig{Notices: os.Stderr})
//
// Why net/http rather than a ClickHouse client library:
// docs/decisions/clickhouse-client.md.
package clickhouse

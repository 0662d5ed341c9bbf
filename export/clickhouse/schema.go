package clickhouse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Names of the tables in the database (docs/architecture.md#export).
const (
	FlowsTable   = "flows"
	WindowsTable = "windows"
	// SpreadTable holds the windows' spread lists (--spread,
	// record.Summary.Spread): a row per host listed.
	SpreadTable = "spread"
)

// A column of a table, in the order rows are written.
type column struct {
	name string
	// typ is the type CREATE TABLE gives it, as system.columns shows it.
	typ string
}

// table is one of the tables Destination writes, with the statements it
// needs, made once.
type table struct {
	name    string
	cols    []column
	engine  string // the rest of CREATE TABLE after the column list
	columns string // the column list, quoted: `a`, `b`, ...
	// added holds the columns a table of an earlier release may lack,
	// which ALTER TABLE ... ADD COLUMN adds (addSQL).
	added map[string]bool
}

// addSQL returns the ALTER TABLE statement that adds to t in db those of
// its added columns have lacks, in t's order, or "" when none is missing.
// 18.16 has no ADD COLUMN IF NOT EXISTS: a column another writer added
// meanwhile makes it fail (code 44, column already exists), and the caller
// lists the columns again.
func (t *table) addSQL(db string, have tableColumns) string {
	var b strings.Builder
	for _, c := range t.cols {
		if _, there := have[c.name]; !t.added[c.name] || there {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("ALTER TABLE " + qualified(db, t.name))
		} else {
			b.WriteByte(',')
		}
		b.WriteString(" ADD COLUMN " + quoteIdent(c.name) + " " + c.typ)
	}
	return b.String()
}

// flowsColumns are the columns of flows: those of the first release, then
// kind and batch. They are written in this order.
var flowsColumns = []column{
	{"observer", "String"},
	{"window", "DateTime('UTC')"},
	{"ts", "DateTime('UTC')"},
	{"ts_ns", "UInt32"},
	{"key", "String"},
	{"src", "String"},
	{"dst", "String"},
	{"proto", "UInt8"},
	{"sport", "UInt16"},
	{"dport", "UInt16"},
	// kind tells keys of routers run with different --key apart: a src
	// column filled by pair keys and one filled by src keys hold the same
	// kind of value, but 5-tuple rows are not distinct sources.
	{"kind", "String"},
	// batch is record.Batch.ID: a retried insert looks for it (see
	// Destination.Records).
	{"batch", "UInt64"},
	// vni is the VXLAN or Geneve VNI of a key taken inside such a tunnel
	// (flow.Key.Segment, --decap), has_vni 1 for those keys: VNI 0 is a
	// valid segment, so vni alone cannot tell "no segment". Keys without
	// one have 0 and 0. Tables of earlier releases get both columns at
	// the first write (flowsAdded).
	{"vni", "UInt32"},
	{"has_vni", "UInt8"},
}

// flowsAdded are the columns of flows that came after tables existed:
// a flows table without them gets them (ALTER TABLE ... ADD COLUMN),
// rather than waiting for an operator; the rows already there read as the
// type's default, 0. Other missing columns are a *SchemaError. The columns
// are added without a DEFAULT clause: 18.16 fails to read the old parts
// of a table given two columns of DEFAULT 0 ("Column '0' already
// exists"), and the types' own default is 0 anyway.
var flowsAdded = map[string]bool{"vni": true, "has_vni": true}

// windowsColumns are the columns of windows: those of the first release,
// then the other counts of a summary, its filter, kind and final flag, and id.
var windowsColumns = []column{
	{"observer", "String"},
	{"window_start", "DateTime('UTC')"},
	{"window_end", "DateTime('UTC')"},
	{"packets", "UInt64"},
	{"malformed", "UInt64"},
	{"skipped", "UInt64"},
	{"keys", "UInt64"},
	{"distinct", "UInt64"},
	{"distinct_estimate", "UInt64"},
	{"dropped", "UInt64"},
	{"sketch", "String"},
	{"prefiltered", "UInt64"},
	{"late", "UInt64"},
	{"final", "UInt8"},
	{"filter", "String"},
	{"kind", "String"},
	// id is a hash of the row's other columns: a summary that is written
	// again is found by it (see Destination.Window).
	{"id", "UInt64"},
}

// spreadColumns are the columns of spread: a row per host of a window's
// spread list (record.SpreadEntry), side "src" or "dst", with the key
// kind the counts are of (pair: distinct destinations per source,
// distinct sources per destination; 5tuple: distinct flows).
var spreadColumns = []column{
	{"observer", "String"},
	{"window", "DateTime('UTC')"},
	{"side", "String"},
	{"addr", "String"},
	{"distinct", "UInt64"},
	{"error", "UInt64"},
	{"kind", "String"},
}

// The engines. The tables are ReplacingMergeTree: rows equal in every
// column of the sort key are one row once the server has merged their
// parts, and every query with FINAL counts them once before that. A
// flows row's sort key is every column that says what was seen (observer,
// window, key, its time; src, dst and kind follow from the key), so that
// the same capture exported twice (a re-run import, a spool sent again
// by another process) is counted once; batch, which differs between runs,
// is not in it. A windows row's key ends with id, the hash of every other
// column. Both begin with the window and observer, so per-window queries
// read their window's rows only, and addresses of a window compress
// together.
const (
	flowsEngine = "ENGINE = ReplacingMergeTree PARTITION BY toYYYYMM(`window`) " +
		"ORDER BY (`window`, `observer`, `src`, `dst`, `kind`, `key`, `ts`, `ts_ns`)"
	windowsEngine = "ENGINE = ReplacingMergeTree PARTITION BY toYYYYMM(`window_start`) " +
		"ORDER BY (`window_start`, `observer`, `id`)"
	// A spread row's sort key is what it is about: the window, the
	// observer, the side, the host and the kind. A summary written again
	// (a retry) gives the same rows, which replace each other.
	spreadEngine = "ENGINE = ReplacingMergeTree PARTITION BY toYYYYMM(`window`) " +
		"ORDER BY (`window`, `observer`, `side`, `addr`, `kind`)"
)

var (
	// One partition per month of windows: old months go with ALTER
	// TABLE ... DROP PARTITION.
	flowsTable   = newTable(FlowsTable, flowsColumns, flowsEngine)
	windowsTable = newTable(WindowsTable, windowsColumns, windowsEngine)
	spreadTable  = newTable(SpreadTable, spreadColumns, spreadEngine)
)

// tables are the tables Exporter makes and writes.
var tables = []*table{flowsTable, windowsTable, spreadTable}

func init() { flowsTable.added = flowsAdded }

func newTable(name string, cols []column, engine string) *table {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteIdent(c.name))
	}
	return &table{name: name, cols: cols, engine: engine, columns: b.String()}
}

// createSQL returns the CREATE TABLE statement of t in db.
func (t *table) createSQL(db string) string {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS ")
	b.WriteString(qualified(db, t.name))
	b.WriteString(" (")
	for i, c := range t.cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteIdent(c.name))
		b.WriteByte(' ')
		b.WriteString(c.typ)
	}
	b.WriteString(") ")
	b.WriteString(t.engine)
	return b.String()
}

// quoteIdent quotes an identifier in backquotes, which both ClickHouse
// 18.16 and current releases accept; distinct is a keyword. Names here are
// plain identifiers (checkDatabase and the tables above), so nothing in
// them needs escaping.
func quoteIdent(s string) string { return "`" + s + "`" }

func qualified(db, table string) string { return quoteIdent(db) + "." + quoteIdent(table) }

// quoteString returns s as an SQL string literal. ClickHouse's literals
// take backslash escapes; every other byte stands for itself.
func quoteString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '\'':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// columnsSQL lists the columns of the tables in db, one JSON object per
// line: {"table":"flows","name":"ts","type":"DateTime('UTC')"}.
func columnsSQL(db string) string {
	return "SELECT table, name, type FROM system.columns WHERE database = " + quoteString(db) +
		" AND table IN (" + quoteString(FlowsTable) + ", " + quoteString(WindowsTable) + ", " + quoteString(SpreadTable) + ") FORMAT JSONEachRow"
}

// tableColumns maps a table's column names to their types.
type tableColumns map[string]string

// parseColumns reads the answer to columnsSQL. A line that is not such an
// object is an error: the answer did not come from a ClickHouse.
func parseColumns(answer []byte) (map[string]tableColumns, error) {
	tables := make(map[string]tableColumns)
	for line := range bytes.Lines(answer) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var c struct{ Table, Name, Type string }
		if err := json.Unmarshal(line, &c); err != nil || c.Table == "" || c.Name == "" || c.Type == "" {
			return nil, fmt.Errorf("unexpected answer listing the columns: %q", shorten(line, 200))
		}
		if tables[c.Table] == nil {
			tables[c.Table] = make(tableColumns)
		}
		tables[c.Table][c.Name] = c.Type
	}
	return tables, nil
}

// check returns a *SchemaError for the first column of t (in t's order)
// that have is missing or has a type this package cannot write. Columns
// have holds beyond t's are left alone: the server fills them with their
// defaults.
func (t *table) check(db string, have tableColumns) error {
	for _, c := range t.cols {
		got, ok := have[c.name]
		if !ok || !sameType(c.typ, got) {
			return &SchemaError{Table: db + "." + t.name, Column: c.name, Want: c.typ, Got: got}
		}
	}
	return nil
}

// sameType reports whether a column of type got takes the values of type
// want in RowBinary. A DateTime of any time zone does: its values are
// seconds since the epoch, the zone only says how they print.
func sameType(want, got string) bool {
	if want == got {
		return true
	}
	if strings.HasPrefix(want, "DateTime(") {
		return got == "DateTime" || (strings.HasPrefix(got, "DateTime('") && strings.HasSuffix(got, "')"))
	}
	return false
}

// SchemaError says that a table exists with a column this package cannot
// write: missing, or of another type. It wraps ErrSchema and is transient
// (the rows are not at fault, the table is): the batches wait, in the spool
// with --spool, until the table is altered or dropped, and the next attempt
// looks at it again.
type SchemaError struct {
	Table  string // DB.TABLE
	Column string
	Want   string // the type this package writes
	Got    string // the table's type, "" when it has no such column
}

func (e *SchemaError) Error() string {
	if e.Got == "" {
		return fmt.Sprintf("clickhouse: table %s has no column %s (want %s): add it, or drop the table and let it be created", e.Table, e.Column, e.Want)
	}
	return fmt.Sprintf("clickhouse: table %s: column %s is %s, want %s: alter it, or drop the table and let it be created", e.Table, e.Column, e.Got, e.Want)
}

// Unwrap returns ErrSchema.
func (e *SchemaError) Unwrap() error { return ErrSchema }

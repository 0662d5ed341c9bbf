package clickhouse

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/flowdedup/flowdedup/record"
)

// Errors of the package, wrapped with more detail.
var (
	// ErrURL: an --export URL this package cannot serve (see ParseURL).
	ErrURL = errors.New("clickhouse: invalid export URL")
	// ErrPasswordFile: the password file of an --export URL cannot be read
	// (see URL.Config). The error names the file, never its content.
	ErrPasswordFile = errors.New("clickhouse: cannot read the password file")
	// ErrConfig: a Config that New cannot serve.
	ErrConfig = errors.New("clickhouse: invalid configuration")
	// ErrClosed: the Destination was used after Close.
	ErrClosed = errors.New("clickhouse: exporter closed")
	// ErrSchema is wrapped by a *SchemaError: a table exists with columns
	// this package cannot write.
	ErrSchema = errors.New("clickhouse: table schema mismatch")
	// ErrBadRecord: a record or summary that no table row can hold (a key
	// of another kind than Config.Kind, a time outside 1970 to 2106). It
	// comes with record.ErrRejected.
	ErrBadRecord = errors.New("clickhouse: record cannot be stored")
	// ErrBadAnswer: the server's answer to a successful request was not
	// what this package asked for (a proxy in the way, a truncated
	// answer). It is transient.
	ErrBadAnswer = errors.New("clickhouse: unexpected answer")
)

// ClickHouse error codes this package acts on (src/Common/ErrorCodes.cpp
// of ClickHouse; the numbers are stable across releases).
const (
	codeNotFoundColumnInBlock = 10
	codeNoSuchColumnInTable   = 16
	// codeColumnExists is ILLEGAL_COLUMN, which ALTER TABLE ... ADD
	// COLUMN of a column the table has answers.
	codeColumnExists      = 44
	codeUnknownIdentifier = 47
	codeUnknownTable      = 60
	codeUnknownDatabase   = 81
	codeSessionIsLocked   = 373
)

// permanentCodes are the error codes of requests that fail the same way
// however often they are sent: the rows or the statement are wrong. Only
// they wrap record.ErrRejected. Everything else (a refused login, a user
// without the right to write, timeouts, memory or part limits, too many
// queries, a locked session, a server shutting down, codes this list does
// not know) is taken as transient: the batches wait (in the spool, with
// --spool) until the operator or the server fixes it.
var permanentCodes = map[int]string{
	1:   "UNSUPPORTED_METHOD",
	6:   "CANNOT_PARSE_TEXT",
	7:   "INCORRECT_NUMBER_OF_COLUMNS",
	20:  "NUMBER_OF_COLUMNS_DOESNT_MATCH",
	25:  "CANNOT_PARSE_ESCAPE_SEQUENCE",
	26:  "CANNOT_PARSE_QUOTED_STRING",
	27:  "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
	32:  "ATTEMPT_TO_READ_AFTER_EOF",
	33:  "CANNOT_READ_ALL_DATA",
	36:  "BAD_ARGUMENTS",
	38:  "CANNOT_PARSE_DATE",
	41:  "CANNOT_PARSE_DATETIME",
	43:  "ILLEGAL_TYPE_OF_ARGUMENT",
	44:  "ILLEGAL_COLUMN",
	46:  "UNKNOWN_FUNCTION",
	48:  "NOT_IMPLEMENTED",
	50:  "UNKNOWN_TYPE",
	53:  "TYPE_MISMATCH",
	62:  "SYNTAX_ERROR",
	69:  "ARGUMENT_OUT_OF_BOUND",
	70:  "CANNOT_CONVERT_TYPE",
	72:  "CANNOT_PARSE_NUMBER",
	73:  "UNKNOWN_FORMAT",
	80:  "INCORRECT_QUERY",
	115: "UNKNOWN_SETTING",
	117: "INCORRECT_DATA",
	131: "TOO_LARGE_STRING_SIZE",
	321: "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE",
	386: "NO_COMMON_TYPE",
}

// fixes are the transient error codes that wait for the operator rather
// than for the server: with the name ClickHouse gives them and what to fix.
var fixes = map[int]struct{ name, fix string }{
	codeUnknownDatabase: {"UNKNOWN_DATABASE", "the database is created again on the next attempt; if this persists, let the user create it or create it by hand"},
	164:                 {"READONLY", "the user may not write: give it a profile with readonly = 0 in the server's users.xml (or GRANT INSERT, CREATE on the database)"},
	192:                 {"UNKNOWN_USER", "the server has no such user: fix the user of the --export URL, or add the user to the server's users.xml"},
	193:                 {"WRONG_PASSWORD", fixPassword},
	194:                 {"REQUIRED_PASSWORD", fixPassword},
	195:                 {"IP_ADDRESS_NOT_ALLOWED", "the server does not let this user log in from this host: add its address to the user's <networks> in the server's users.xml"},
	291:                 {"DATABASE_ACCESS_DENIED", "the user may not use this database: add it to the user's <allow_databases> in the server's users.xml"},
	497:                 {"ACCESS_DENIED", "the user may not write here: GRANT INSERT, CREATE on the database to it"},
	516:                 {"AUTHENTICATION_FAILED", fixPassword},
}

const fixPassword = "fix the user or password of the --export URL (password_file=FILE, or FLOWDEDUP_CLICKHOUSE_PASSWORD)"

// schemaCodes are the error codes that say the database, a table or a
// column is not what the Destination found when it last looked: someone
// dropped or altered it meanwhile. They are transient, and the next call
// looks again: it creates what is missing, or returns a *SchemaError that
// names the column.
func schemaCode(code int) bool {
	switch code {
	case codeNotFoundColumnInBlock, codeNoSuchColumnInTable, codeUnknownIdentifier, codeUnknownTable, codeUnknownDatabase:
		return true
	}
	return false
}

// maxErrorText bounds the server's text kept in a ServerError.
const maxErrorText = 512

// ServerError is an answer of the server that is not a success: an
// exception of ClickHouse, or an HTTP error of something else at the
// address. Permanent errors (see Permanent) wrap record.ErrRejected.
type ServerError struct {
	// Status is the HTTP status code.
	Status int
	// Code is ClickHouse's error code, from the X-ClickHouse-Exception-Code
	// header (current releases) or the "Code: N" that begins the text
	// (18.16 and current releases); 0 when the answer had none.
	Code int
	// Message is the server's text, without the code and 18.16's
	// decorations, at most 512 bytes of printable UTF-8.
	Message string
}

func (e *ServerError) Error() string {
	kind := "transient"
	if e.Permanent() {
		kind = "permanent"
	}
	var msg string
	switch name := e.codeName(); {
	case e.Code == 0:
		msg = fmt.Sprintf("HTTP %d (%s): %s", e.Status, kind, e.Message)
	case name != "":
		msg = fmt.Sprintf("server error %d %s (HTTP %d, %s): %s", e.Code, name, e.Status, kind, e.Message)
	default:
		msg = fmt.Sprintf("server error %d (HTTP %d, %s): %s", e.Code, e.Status, kind, e.Message)
	}
	if fix := e.Fix(); fix != "" {
		msg += "; " + fix
	}
	return msg
}

func (e *ServerError) codeName() string {
	if name := permanentCodes[e.Code]; name != "" {
		return name
	}
	return fixes[e.Code].name
}

// Fix says what the operator has to change for requests to succeed, when
// the error is one that waits for the operator (a refused login, a user
// without the right to write, an address that is not ClickHouse's HTTP
// interface), and "" otherwise.
func (e *ServerError) Fix() string {
	if e.Code != 0 {
		return fixes[e.Code].fix
	}
	switch {
	case e.Status == http.StatusUnauthorized, e.Status == http.StatusProxyAuthRequired:
		return fixPassword
	case e.Status == http.StatusForbidden:
		return "the server, or something in front of it, refuses this user: check the user of the --export URL and its rights"
	case 300 <= e.Status && e.Status < 500 && !e.Permanent() && e.Status != http.StatusRequestTimeout && e.Status != http.StatusTooManyRequests:
		return "the address does not answer as a ClickHouse HTTP interface: check the host and port of the --export URL (8123 by default)"
	}
	return ""
}

// Permanent reports whether sending the same rows again would fail the
// same way: a ClickHouse error code of bad data or a bad statement (see
// permanentCodes), or, without a code, an HTTP status that refuses the
// request's content (400, 413, 415, 422). A refused login, a user without
// the right to write, an unknown database, timeouts, limits, a server
// shutting down, an address that is not ClickHouse (3xx, 404), any 5xx and
// codes not listed are transient: they pass when the operator or the
// server fixes them, and the batches wait until then.
func (e *ServerError) Permanent() bool {
	if e.Code != 0 {
		_, ok := permanentCodes[e.Code]
		return ok
	}
	switch e.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// Unwrap returns record.ErrRejected for a permanent error.
func (e *ServerError) Unwrap() error {
	if e.Permanent() {
		return record.ErrRejected
	}
	return nil
}

// parseServerError makes the ServerError of an answer with HTTP status
// status, headers h and body text body (the first bytes of it). It accepts
// any input.
func parseServerError(status int, h http.Header, body []byte) *ServerError {
	e := &ServerError{Status: status}
	text := bytes.TrimSpace(body)
	if c, ok := parseCode(h.Get("X-ClickHouse-Exception-Code")); ok {
		e.Code = c
	}
	// 18.16: "Code: 60, e.displayText() = DB::Exception: Table x doesn't exist., e.what() = DB::Exception"
	// current: "Code: 60. DB::Exception: Table x does not exist. (UNKNOWN_TABLE) (version 24.3.1.1)"
	if rest, ok := bytes.CutPrefix(text, []byte("Code: ")); ok {
		end := 0
		for end < len(rest) && '0' <= rest[end] && rest[end] <= '9' {
			end++
		}
		if c, ok := parseCode(string(rest[:end])); ok && end <= 9 {
			if e.Code == 0 {
				e.Code = c
			}
			text = bytes.TrimLeft(rest[end:], ",. ")
			text = bytes.TrimPrefix(text, []byte("e.displayText() = "))
			if i := bytes.LastIndex(text, []byte(", e.what() = ")); i >= 0 {
				text = bytes.TrimSpace(text[:i])
			}
		}
	}
	if len(text) == 0 {
		text = []byte(http.StatusText(status))
	}
	e.Message = printable(text, maxErrorText)
	return e
}

func parseCode(s string) (int, bool) {
	c, err := strconv.Atoi(s)
	return c, err == nil && c > 0 && c < 1e9
}

// printable returns b as valid UTF-8 with control characters made spaces,
// at most limit bytes, cut at a rune boundary with "..." when shortened.
func printable(b []byte, limit int) string {
	s := strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, string(b))
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// shorten returns the first n bytes of b for a message.
func shorten(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

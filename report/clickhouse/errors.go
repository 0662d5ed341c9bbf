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

	"github.com/flowdedup/flowdedup/report"
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
	// ErrClosed: the Exporter was used after Close.
	ErrClosed = errors.New("clickhouse: exporter closed")
	// ErrSchema is wrapped by a *SchemaError: a table exists with columns
	// this package cannot write.
	ErrSchema = errors.New("clickhouse: table schema mismatch")
	// ErrBadRecord: a record or summary that no table row can hold (a key
	// of another kind than Config.Kind, a time outside 1970 to 2106). It
	// comes with report.ErrRejected.
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
	codeUnknownIdentifier     = 47
	codeUnknownTable          = 60
	codeUnknownDatabase       = 81
	codeSessionIsLocked       = 373
)

// permanentCodes are the error codes of requests that fail the same way
// however often they are sent: the data or the statement is wrong, or the
// server does not let this user write. Everything else (timeouts, memory
// or part limits, too many queries, a locked session, a server shutting
// down, codes this list does not know) is taken as transient.
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
	164: "READONLY",
	192: "UNKNOWN_USER",
	193: "WRONG_PASSWORD",
	194: "REQUIRED_PASSWORD",
	195: "IP_ADDRESS_NOT_ALLOWED",
	291: "DATABASE_ACCESS_DENIED",
	321: "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE",
	386: "NO_COMMON_TYPE",
	497: "ACCESS_DENIED",
	516: "AUTHENTICATION_FAILED",
}

// schemaCodes are the error codes that say the database, a table or a
// column is not what the Exporter found when it last looked: someone
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
// address. Permanent errors (see Permanent) wrap report.ErrRejected.
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
	if e.Code == 0 {
		return fmt.Sprintf("HTTP %d (%s): %s", e.Status, kind, e.Message)
	}
	if name := permanentCodes[e.Code]; name != "" {
		return fmt.Sprintf("server error %d %s (HTTP %d, %s): %s", e.Code, name, e.Status, kind, e.Message)
	}
	return fmt.Sprintf("server error %d (HTTP %d, %s): %s", e.Code, e.Status, kind, e.Message)
}

// Permanent reports whether sending the same request again would fail the
// same way: a ClickHouse error code of bad data, a bad statement or a
// refused login (see permanentCodes), or, without a code, an HTTP status
// of 3xx or 4xx other than 408 and 429 (the address is not a ClickHouse
// HTTP interface). Timeouts, limits, a server shutting down, a 5xx without
// a code, and codes not listed are transient.
func (e *ServerError) Permanent() bool {
	if e.Code != 0 {
		_, ok := permanentCodes[e.Code]
		return ok
	}
	switch {
	case e.Status == http.StatusRequestTimeout, e.Status == http.StatusTooManyRequests:
		return false
	case 300 <= e.Status && e.Status < 500:
		return true
	}
	return false
}

// Unwrap returns report.ErrRejected for a permanent error.
func (e *ServerError) Unwrap() error {
	if e.Permanent() {
		return report.ErrRejected
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

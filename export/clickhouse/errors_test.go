package clickhouse

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/record"
)

// Answers of ClickHouse 18.16 (taken from the server the tests run) and of
// current releases (their documented form), and of other HTTP servers.
var serverAnswers = []struct {
	name      string
	status    int
	header    string // X-ClickHouse-Exception-Code
	body      string
	code      int
	permanent bool
	message   string
}{
	{"18.16 unknown table", 404, "", "Code: 60, e.displayText() = DB::Exception: Table t1.nosuch doesn't exist., e.what() = DB::Exception\n",
		60, false, "DB::Exception: Table t1.nosuch doesn't exist."},
	{"18.16 truncated RowBinary", 500, "", "Code: 33, e.displayText() = DB::Exception: Cannot read all data. Bytes read: 2. Bytes expected: 4.: (at row 3)\n, e.what() = DB::Exception\n",
		33, true, "DB::Exception: Cannot read all data. Bytes read: 2. Bytes expected: 4.: (at row 3)"},
	{"18.16 wrong password", 401, "", "Code: 193, e.displayText() = DB::Exception: Wrong password for user flow, e.what() = DB::Exception\n",
		193, false, "DB::Exception: Wrong password for user flow"},
	{"18.16 session locked", 500, "", "Code: 373, e.displayText() = DB::Exception: Session is locked by a concurrent client., e.what() = DB::Exception\n",
		373, false, "DB::Exception: Session is locked by a concurrent client."},
	{"current no such column", 400, "16", "Code: 16. DB::Exception: No such column sport in table db.flows. (NO_SUCH_COLUMN_IN_TABLE) (version 24.3.1.1)\n",
		16, false, "DB::Exception: No such column sport in table db.flows. (NO_SUCH_COLUMN_IN_TABLE) (version 24.3.1.1)"},
	{"current too many parts", 500, "252", "Code: 252. DB::Exception: Too many parts (300). (TOO_MANY_PARTS) (version 24.3.1.1)",
		252, false, "DB::Exception: Too many parts (300). (TOO_MANY_PARTS) (version 24.3.1.1)"},
	{"current auth", 403, "516", "Code: 516. DB::Exception: default: Authentication failed. (AUTHENTICATION_FAILED) (version 24.3.1.1)",
		516, false, "DB::Exception: default: Authentication failed. (AUTHENTICATION_FAILED) (version 24.3.1.1)"},
	{"header only", 500, "241", "", 241, false, "Internal Server Error"},
	{"header and other text", 500, "62", "Syntax error", 62, true, "Syntax error"},
	{"proxy 502", 502, "", "<html>Bad Gateway</html>", 0, false, "<html>Bad Gateway</html>"},
	{"proxy 503 empty", 503, "", "", 0, false, "Service Unavailable"},
	{"not clickhouse 404", 404, "", "404 page not found\n", 0, false, "404 page not found"},
	{"proxy 401", 401, "", "Unauthorized", 0, false, "Unauthorized"},
	{"proxy 413", 413, "", "", 0, true, "Request Entity Too Large"},
	{"18.16 readonly", 500, "", "Code: 164, e.displayText() = DB::Exception: Cannot execute query in readonly mode, e.what() = DB::Exception\n",
		164, false, "DB::Exception: Cannot execute query in readonly mode"},
	{"18.16 unknown database", 404, "", "Code: 81, e.displayText() = DB::Exception: Database nosuch doesn't exist, e.what() = DB::Exception\n",
		81, false, "DB::Exception: Database nosuch doesn't exist"},
	{"408", 408, "", "", 0, false, "Request Timeout"},
	{"429", 429, "", "slow down", 0, false, "slow down"},
	{"redirect", 301, "", "", 0, false, "Moved Permanently"},
	{"code too long", 500, "", "Code: 12345678901234567890, x", 0, false, "Code: 12345678901234567890, x"},
	{"code alone", 500, "", "Code: ", 0, false, "Code:"},
	{"code without text", 500, "", "Code: 62", 62, true, "Internal Server Error"},
	{"binary", 500, "", "\xff\xfe\x00Code", 0, false, "   Code"},
}

func TestParseServerError(t *testing.T) {
	for _, tc := range serverAnswers {
		h := http.Header{}
		if tc.header != "" {
			h.Set("X-ClickHouse-Exception-Code", tc.header)
		}
		e := parseServerError(tc.status, h, []byte(tc.body))
		if e.Code != tc.code || e.Permanent() != tc.permanent || e.Message != tc.message || e.Status != tc.status {
			t.Errorf("%s: %+v permanent %v; want code %d, permanent %v, message %q", tc.name, e, e.Permanent(), tc.code, tc.permanent, tc.message)
		}
		if errors.Is(e, record.ErrRejected) != tc.permanent {
			t.Errorf("%s: errors.Is(ErrRejected) = %v", tc.name, !tc.permanent)
		}
	}
}

// The server's text is kept short and printable.
func TestServerErrorMessageBounded(t *testing.T) {
	e := parseServerError(500, http.Header{}, []byte("Code: 1, "+strings.Repeat("é", 1000)))
	if len(e.Message) > maxErrorText+3 || !utf8.ValidString(e.Message) || !strings.HasSuffix(e.Message, "...") {
		t.Errorf("message of %d bytes, valid UTF-8 %v: %q", len(e.Message), utf8.ValidString(e.Message), e.Message)
	}
}

// FuzzParseServerError: any answer gives an error with a printable,
// bounded message, classified consistently, without a panic.
func FuzzParseServerError(f *testing.F) {
	for _, tc := range serverAnswers {
		f.Add(tc.status, tc.header, []byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, status int, header string, body []byte) {
		h := http.Header{}
		h.Set("X-ClickHouse-Exception-Code", header)
		e := parseServerError(status, h, body)
		if e.Code < 0 || len(e.Message) > maxErrorText+3 || !utf8.ValidString(e.Message) {
			t.Fatalf("%+v", e)
		}
		for _, r := range e.Message {
			if r < ' ' || r == 0x7f {
				t.Fatalf("control character in %q", e.Message)
			}
		}
		if errors.Is(e, record.ErrRejected) != e.Permanent() {
			t.Fatalf("%+v: Unwrap disagrees with Permanent", e)
		}
		_ = e.Error()
	})
}

// The server itself rejects a malformed insert for good: the
// classification above holds for what 18.16 answers.
func TestServerRejectsMalformedRows(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	e, err := New(Config{Address: ch.Addr, Database: "malformed", Kind: flow.KeySrc})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.ensure(); err != nil {
		t.Fatal(err)
	}
	// A row cut short in its ts column.
	row := appendString(nil, "observer")
	row = appendU32(row, 0)
	row = append(row, 1, 2)
	_, err = e.c.insert(e.insertFlows, row)
	var se *ServerError
	if !errors.As(err, &se) || !se.Permanent() || !errors.Is(err, record.ErrRejected) {
		t.Fatalf("truncated row: %v, want a permanent ServerError", err)
	}
	t.Logf("18.16 answers: %v", err)
	if n := ch.Query(t, "SELECT count() FROM malformed.flows"); n != "0\n" {
		t.Errorf("flows holds %s rows", n)
	}
}

// An error that waits for the operator says what to change; one that
// waits for the server, or rejects the rows, says nothing of the kind.
func TestServerErrorSaysWhatToFix(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string // in Error(), "" for no fix
	}{
		{"wrong password", 401, "Code: 193, e.displayText() = DB::Exception: Wrong password for user flow, e.what() = DB::Exception", "password_file"},
		{"no password", 401, "Code: 194, e.displayText() = DB::Exception: Password required for user flow, e.what() = DB::Exception", "FLOWDEDUP_CLICKHOUSE_PASSWORD"},
		{"unknown user", 401, "Code: 192, e.displayText() = DB::Exception: Unknown user x, e.what() = DB::Exception", "users.xml"},
		{"readonly", 500, "Code: 164, e.displayText() = DB::Exception: Cannot execute query in readonly mode, e.what() = DB::Exception", "readonly = 0"},
		{"host not allowed", 500, "Code: 195, e.displayText() = DB::Exception: User x is not allowed to connect from address 127.0.0.1, e.what() = DB::Exception", "<networks>"},
		{"database denied", 500, "Code: 291, e.displayText() = DB::Exception: Access denied to database x, e.what() = DB::Exception", "<allow_databases>"},
		{"proxy 401", 401, "", "password"},
		{"not clickhouse", 404, "404 page not found", "host and port"},
		{"too many parts", 500, "Code: 252, e.displayText() = DB::Exception: Too many parts (300), e.what() = DB::Exception", ""},
		{"bad rows", 500, "Code: 33, e.displayText() = DB::Exception: Cannot read all data, e.what() = DB::Exception", ""},
		{"proxy 503", 503, "", ""},
	} {
		e := parseServerError(tc.status, http.Header{}, []byte(tc.body))
		msg := e.Error()
		if tc.want == "" {
			if e.Fix() != "" {
				t.Errorf("%s: %q says a fix", tc.name, msg)
			}
			continue
		}
		if e.Permanent() || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "transient") {
			t.Errorf("%s: %q (permanent %v), want a transient error that says %q", tc.name, msg, e.Permanent(), tc.want)
		}
	}
}

package clickhouse

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/flowdedup/flowdedup/record"
)

// Scheme is the URL scheme of the --export destinations this package
// serves: clickhouse://HOST:PORT/DB.
const Scheme = "clickhouse"

// Query parameters of an --export URL: PasswordFileParam is the path of a
// file holding the password of the URL's user, CompressionParam the
// Content-Encoding of inserts (Config.Compression: none or gzip).
const (
	PasswordFileParam = "password_file"
	CompressionParam  = "compression"
)

// PasswordEnv is the environment variable holding the password of a URL's
// user when the URL names no password file (clickhouse-client reads
// CLICKHOUSE_PASSWORD the same way).
const PasswordEnv = "FLOWDEDUP_CLICKHOUSE_PASSWORD"

// CredentialsDirVar is systemd's environment variable naming the directory
// of a unit's credentials (LoadCredential=). A password file path that
// begins with ${CREDENTIALS_DIRECTORY} has it replaced by the variable's
// value: systemd expands variables in ExecStart= but not within the values
// of an EnvironmentFile=, where a unit's flags usually are.
const CredentialsDirVar = "CREDENTIALS_DIRECTORY"

// maxPasswordFile bounds a password file: a password is short, and a path
// mistaken for one (a log, /dev/zero) must not be read whole.
const maxPasswordFile = 4096

// maxDatabaseLen bounds a database name. ClickHouse makes a directory of
// it (escaped), and file names stop at 255 bytes; 128 leaves room.
const maxDatabaseLen = 128

// URL is a clickhouse:// --export URL, parsed by ParseURL; Config turns it
// into the Config of a Destination, looking the password up where the URL
// says it is.
type URL struct {
	// Address is the server's HOST:PORT, Database the database.
	Address  string
	Database string
	// User logs in with HTTP basic authentication; "" is the server's
	// default user, without a password.
	User string
	// Password is the password written in the URL: every user of the host
	// can read it in the process's command line (ps, /proc/PID/cmdline,
	// systemctl show). "" when the URL has none (an empty one, USER:@, is
	// none).
	Password string
	// PasswordFile is the password_file=PATH query parameter, as written
	// (before ${CREDENTIALS_DIRECTORY} is replaced).
	PasswordFile string
	// Compression is the compression=NAME query parameter: "" (none) or
	// "gzip" (see Config.Compression).
	Compression string
}

// Env is where Config looks for a password the URL does not hold: the
// process's environment and files (OSEnv), or a test's. A nil LookupEnv
// is os.LookupEnv; a nil ReadFile reads the file with os.Open, at most
// 4096 bytes of it.
type Env struct {
	LookupEnv func(key string) (string, bool)
	ReadFile  func(path string) ([]byte, error)
}

// OSEnv returns the process's environment and files.
func OSEnv() Env { return Env{LookupEnv: os.LookupEnv, ReadFile: readPasswordFile} }

// ParseURL parses an --export URL:
//
//	clickhouse://[USER[:PASSWORD]@]HOST:PORT/DB[?password_file=PATH][&compression=gzip]
//
// HOST:PORT is the server's HTTP interface (8123 by default on the server,
// but the port is required: nothing is guessed). HOST is a name, an IPv4
// address or a bracketed IPv6 address. DB is the database, created if
// missing; its name is a plain identifier (a letter or underscore, then
// letters, digits and underscores, at most 128 of them), so that it never
// needs quoting in the SQL users write. USER logs in with HTTP basic
// authentication; without it the server's default user is used.
// Percent-escapes in USER, PASSWORD and PATH are decoded. See URL.Config
// for where the password comes from.
//
// ParseURL reads nothing. Another scheme, a missing or invalid host or
// port, a missing or invalid database name, a query parameter other than
// one password_file and one compression (none or gzip), a fragment, a password or password_file without a
// user, and both a password and a password_file are errors wrapping
// ErrURL. No error holds the password: the URL is shown without it and
// without its query. The name is not resolved here.
func ParseURL(s string) (URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		if strings.Contains(s, "@") {
			// url.Parse's errors quote what they trip on, which may be a
			// piece of a password with an unescaped / ? # % or [.
			return URL{}, fmt.Errorf("%w %q: not a URL: percent-encode the characters / ? # %% [ ] @ : in USER and PASSWORD (or give the password in a file, ?%s=PATH)",
				ErrURL, shownUnparsed(s), PasswordFileParam)
		}
		return URL{}, fmt.Errorf("%w: %v", ErrURL, redactURLError(err))
	}
	shown := shownURL(u)
	if u.Scheme != Scheme {
		return URL{}, fmt.Errorf("%w %q: scheme %q is not %s://", ErrURL, shown, u.Scheme, Scheme)
	}
	if u.User == nil && strings.Contains(u.Path+u.RawQuery+u.Fragment, "@") {
		// clickhouse://u:1234/x@h:1/db (or ?x@, #x@) parses as host u,
		// port 1234 and path /x@h:1/db: the password would be shown as the
		// port and the path.
		return URL{}, fmt.Errorf("%w %s://...: an @ after the host: percent-encode / ? # in USER and PASSWORD (or give the password in a file, ?%s=PATH)", ErrURL, Scheme, PasswordFileParam)
	}
	if u.Opaque != "" || u.Fragment != "" || u.ForceQuery {
		return URL{}, fmt.Errorf("%w %q: want %s://HOST:PORT/DB[?%s=PATH], with no fragment", ErrURL, shown, Scheme, PasswordFileParam)
	}
	if err := record.CheckAddress(u.Host); err != nil {
		return URL{}, fmt.Errorf("%w %q: %v", ErrURL, shown, err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		return URL{}, fmt.Errorf("%w %q: no database: want %s://HOST:PORT/DB", ErrURL, shown, Scheme)
	}
	if err := checkDatabase(db); err != nil {
		return URL{}, fmt.Errorf("%w %q: %v", ErrURL, shown, err)
	}
	p := URL{Address: u.Host, Database: db}
	if p.PasswordFile, p.Compression, err = parseQuery(u.RawQuery); err != nil {
		return URL{}, fmt.Errorf("%w %q: %v", ErrURL, shown, err)
	}
	if u.User != nil {
		p.User = u.User.Username()
		p.Password, _ = u.User.Password()
	}
	switch {
	case p.User == "" && u.User != nil:
		return URL{}, fmt.Errorf("%w %q: a password without a user name", ErrURL, shown)
	case p.User == "" && p.PasswordFile != "":
		return URL{}, fmt.Errorf("%w %q: %s without a user name", ErrURL, shown, PasswordFileParam)
	case p.Password != "" && p.PasswordFile != "":
		return URL{}, fmt.Errorf("%w %q: both a password and %s: give one", ErrURL, shown, PasswordFileParam)
	}
	return p, nil
}

// parseQuery returns the password_file and compression parameters of the
// raw query q, "" when absent. Other parameters, one given twice or empty,
// or a compression other than none and gzip, are errors that name the
// parameters but not the password file's path.
func parseQuery(q string) (passwordFile, compression string, err error) {
	if q == "" {
		return "", "", nil
	}
	v, err := url.ParseQuery(q)
	if err != nil {
		return "", "", fmt.Errorf("query: %v", err)
	}
	for k, vs := range v {
		if k != PasswordFileParam && k != CompressionParam {
			return "", "", fmt.Errorf("query parameter %q: the only ones are %s=PATH and %s=gzip", k, PasswordFileParam, CompressionParam)
		}
		switch {
		case len(vs) != 1:
			return "", "", fmt.Errorf("%s given %d times", k, len(vs))
		case vs[0] == "":
			return "", "", fmt.Errorf("%s is empty", k)
		}
	}
	if f := v[PasswordFileParam]; len(f) == 1 {
		passwordFile = f[0]
	}
	if c := v[CompressionParam]; len(c) == 1 {
		switch c[0] {
		case "none":
		case CompressionGzip:
			compression = c[0]
		default:
			return "", "", fmt.Errorf("%s=%q: want none or gzip", CompressionParam, c[0])
		}
	}
	return passwordFile, compression, nil
}

// Config returns the Config that writes to u's destination, with Address,
// Database, User and Password set: the caller fills in the rest. When u
// has a user and no password, the password is, in this order: the
// content of u.PasswordFile, without one trailing newline (\n or \r\n),
// when u names one; else the environment variable
// FLOWDEDUP_CLICKHOUSE_PASSWORD when it is set; else empty. A
// PasswordFile beginning with ${CREDENTIALS_DIRECTORY} has it replaced by
// that variable (see CredentialsDirVar).
//
// A password file that cannot be read (missing, not readable by this
// user, larger than 4096 bytes, ${CREDENTIALS_DIRECTORY} unset) is an
// error wrapping ErrPasswordFile, which names the file and never holds its
// content.
func (u URL) Config(env Env) (Config, error) {
	cfg := Config{Address: u.Address, Database: u.Database, User: u.User, Password: u.Password, Compression: u.Compression}
	if u.User == "" || u.Password != "" {
		return cfg, nil
	}
	lookup, read := env.LookupEnv, env.ReadFile
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if read == nil {
		read = readPasswordFile
	}
	if u.PasswordFile == "" {
		cfg.Password, _ = lookup(PasswordEnv)
		return cfg, nil
	}
	path := u.PasswordFile
	if rest, ok := strings.CutPrefix(path, "${"+CredentialsDirVar+"}"); ok {
		dir, ok := lookup(CredentialsDirVar)
		if !ok || dir == "" {
			return Config{}, fmt.Errorf("%w %q: $%s is not set (systemd sets it for a unit with LoadCredential=)", ErrPasswordFile, path, CredentialsDirVar)
		}
		path = dir + rest
	}
	b, err := read(path)
	if err != nil {
		// A *fs.PathError repeats the path; keep its cause alone.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return Config{}, fmt.Errorf("%w %q: %w", ErrPasswordFile, path, err)
	}
	s := string(b)
	if t, ok := strings.CutSuffix(s, "\n"); ok {
		s = strings.TrimSuffix(t, "\r")
	}
	cfg.Password = s
	return cfg, nil
}

// errTooLarge: a password file larger than maxPasswordFile.
var errTooLarge = fmt.Errorf("larger than %d bytes: not a password", maxPasswordFile)

// readPasswordFile reads the file at path, refusing one larger than
// maxPasswordFile.
func readPasswordFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPasswordFile {
		return nil, errTooLarge
	}
	return b, nil
}

// shownURL is u as errors show it: scheme://[USER@]HOST/PATH, without the
// password, query or fragment.
func shownURL(u *url.URL) string {
	v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	if u.User != nil && u.User.Username() != "" {
		v.User = url.User(u.User.Username())
	}
	return v.String()
}

// shownUnparsed is a URL that does not parse as errors show it: without
// what precedes the last @ after the scheme, and without a query or
// fragment.
func shownUnparsed(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return "..."
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	return scheme + "://..." + "@" + rest
}

// redactURLError drops the URL from a url.Parse error, which may hold a
// password.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// checkDatabase checks that db is a plain identifier.
func checkDatabase(db string) error {
	if len(db) > maxDatabaseLen {
		return fmt.Errorf("database name of %d bytes: at most %d", len(db), maxDatabaseLen)
	}
	for i := 0; i < len(db); i++ {
		c := db[i]
		letter := c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return fmt.Errorf("database name %q: want a letter or _ first, then letters, digits and _", db)
		}
	}
	return nil
}

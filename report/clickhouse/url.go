package clickhouse

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Scheme is the URL scheme of the --export destinations this package
// serves: clickhouse://HOST:PORT/DB.
const Scheme = "clickhouse"

// maxDatabaseLen bounds a database name. ClickHouse makes a directory of
// it (escaped), and file names stop at 255 bytes; 128 leaves room.
const maxDatabaseLen = 128

// ParseURL returns the Config that writes to the destination of an
// --export URL:
//
//	clickhouse://[USER[:PASSWORD]@]HOST:PORT/DB
//
// HOST:PORT is the server's HTTP interface (8123 by default on the server,
// but the port is required: nothing is guessed). HOST is a name, an IPv4
// address or a bracketed IPv6 address. DB is the database, created if
// missing; its name is a plain identifier (a letter or underscore, then
// letters, digits and underscores, at most 128 of them), so that it never
// needs quoting in the SQL users write. USER and PASSWORD, when given, log
// in with HTTP basic authentication; without them the server's default
// user is used. Percent-escapes in USER and PASSWORD are decoded.
//
// Only Address, Database, User and Password are set: the caller fills in
// the rest. Another scheme, a missing or invalid host or port, a missing or
// invalid database name, a query or a fragment are errors wrapping ErrURL.
// The name is not resolved here.
func ParseURL(s string) (Config, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrURL, redactURLError(err))
	}
	shown := u.Redacted()
	if u.Scheme != Scheme {
		return Config{}, fmt.Errorf("%w %q: scheme %q is not %s://", ErrURL, shown, u.Scheme, Scheme)
	}
	if u.Opaque != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return Config{}, fmt.Errorf("%w %q: want %s://HOST:PORT/DB, with no query or fragment", ErrURL, shown, Scheme)
	}
	if err := checkAddress(u.Host); err != nil {
		return Config{}, fmt.Errorf("%w %q: %v", ErrURL, shown, err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		return Config{}, fmt.Errorf("%w %q: no database: want %s://HOST:PORT/DB", ErrURL, shown, Scheme)
	}
	if err := checkDatabase(db); err != nil {
		return Config{}, fmt.Errorf("%w %q: %v", ErrURL, shown, err)
	}
	cfg := Config{Address: u.Host, Database: db}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Password, _ = u.User.Password()
		if cfg.User == "" {
			return Config{}, fmt.Errorf("%w %q: a password without a user name", ErrURL, shown)
		}
	}
	return cfg, nil
}

// redactURLError drops the URL from a url.Parse error, which may hold a
// password.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// checkAddress checks that addr is HOST:PORT with a non-empty host and a
// port from 1 to 65535.
func checkAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: want HOST:PORT (%v)", addr, err)
	}
	if host == "" {
		return fmt.Errorf("address %q has no host", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("address %q: port %q is not a number from 1 to 65535", addr, port)
	}
	return nil
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

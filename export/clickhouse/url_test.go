package clickhouse_test

import (
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/export/clickhouse"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want clickhouse.URL
		err  string // in the error; "" for success
	}{
		{url: "clickhouse://127.0.0.1:8123/flows", want: clickhouse.URL{Address: "127.0.0.1:8123", Database: "flows"}},
		{url: "clickhouse://[::1]:8123/flows/", err: "database name \"flows/\""},
		{url: "clickhouse://[2001:db8::7]:9123/_net_2", want: clickhouse.URL{Address: "[2001:db8::7]:9123", Database: "_net_2"}},
		{url: "clickhouse://ch.example:8123/Flows", want: clickhouse.URL{Address: "ch.example:8123", Database: "Flows"}},
		{url: "clickhouse://writer:s%40cret@ch:8123/flows", want: clickhouse.URL{Address: "ch:8123", Database: "flows", User: "writer", Password: "s@cret"}},
		{url: "clickhouse://writer@ch:8123/flows", want: clickhouse.URL{Address: "ch:8123", Database: "flows", User: "writer"}},
		// An empty password is none: it comes from the file or environment.
		{url: "clickhouse://writer:@ch:8123/flows", want: clickhouse.URL{Address: "ch:8123", Database: "flows", User: "writer"}},
		{url: "clickhouse://writer@ch:8123/flows?password_file=/etc/flowdedup/clickhouse-password",
			want: clickhouse.URL{Address: "ch:8123", Database: "flows", User: "writer", PasswordFile: "/etc/flowdedup/clickhouse-password"}},
		// As the unit's settings write it: kept, and replaced by Config.
		{url: "clickhouse://writer@ch:8123/flows?password_file=${CREDENTIALS_DIRECTORY}/clickhouse-password",
			want: clickhouse.URL{Address: "ch:8123", Database: "flows", User: "writer", PasswordFile: "${CREDENTIALS_DIRECTORY}/clickhouse-password"}},
		// A templated unit's credentials directory holds an @.
		{url: "clickhouse://writer@ch:8123/flows?password_file=%2Frun%2Fcredentials%2Fflowdedup%40eth0.service%2Fpw",
			want: clickhouse.URL{Address: "ch:8123", Database: "flows", User: "writer", PasswordFile: "/run/credentials/flowdedup@eth0.service/pw"}},
		{url: "clickhouse://writer@ch:8123/flows?password_file=/run/credentials/flowdedup@eth0.service/pw",
			want: clickhouse.URL{Address: "ch:8123", Database: "flows", User: "writer", PasswordFile: "/run/credentials/flowdedup@eth0.service/pw"}},
		{url: "clickhouse://:pw@ch:8123/flows", err: "a password without a user name"},
		{url: "clickhouse://ch:8123/flows?password_file=/etc/pw", err: "password_file without a user name"},
		{url: "clickhouse://u:pw@ch:8123/flows?password_file=/etc/pw", err: "both a password and password_file"},
		{url: "clickhouse://u@ch:8123/flows?password_file=", err: "password_file is empty"},
		{url: "clickhouse://u@ch:8123/flows?password_file=/a&password_file=/b", err: "password_file given 2 times"},
		{url: "clickhouse://u@ch:8123/flows?password_file=/a;b", err: "query"},
		{url: "http://127.0.0.1:8123/flows", err: `scheme "http" is not clickhouse://`},
		{url: "ipfix://127.0.0.1:4739", err: `scheme "ipfix"`},
		{url: "127.0.0.1:8123/flows", err: "invalid export URL"},
		{url: "clickhouse://127.0.0.1/flows", err: "missing port"},
		{url: "clickhouse://127.0.0.1:/flows", err: `port "" is not a number`},
		{url: "clickhouse://127.0.0.1:0/flows", err: `port "0"`},
		{url: "clickhouse://127.0.0.1:65536/flows", err: `port "65536"`},
		{url: "clickhouse://:8123/flows", err: "has no host"},
		{url: "clickhouse://127.0.0.1:8123", err: "no database"},
		{url: "clickhouse://127.0.0.1:8123/", err: "no database"},
		{url: "clickhouse://127.0.0.1:8123/my-db", err: `database name "my-db"`},
		{url: "clickhouse://127.0.0.1:8123/1db", err: `database name "1db"`},
		{url: "clickhouse://127.0.0.1:8123/a%60b", err: "database name"},
		{url: "clickhouse://127.0.0.1:8123/" + strings.Repeat("d", 129), err: "at most 128"},
		{url: "clickhouse://127.0.0.1:8123/flows?timeout=1s", err: `query parameter "timeout": the only ones are password_file=PATH and compression=gzip`},
		{url: "clickhouse://127.0.0.1:8123/flows?", err: "no fragment"},
		{url: "clickhouse://127.0.0.1:8123/flows#x", err: "no fragment"},
	} {
		u, err := clickhouse.ParseURL(tc.url)
		if tc.err == "" {
			if err != nil || u != tc.want {
				t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.url, u, err, tc.want)
			}
			continue
		}
		if !errors.Is(err, clickhouse.ErrURL) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseURL(%q): error %v, want ErrURL with %q", tc.url, err, tc.err)
		}
	}
}

// fakeEnv is an environment of the test's own: the process's is left
// alone, so tests may run in parallel.
func fakeEnv(vars map[string]string) clickhouse.Env {
	return clickhouse.Env{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Where the password comes from: the URL, else password_file (one
// trailing newline dropped), else FLOWDEDUP_CLICKHOUSE_PASSWORD, else
// nothing; never for the default user.
func TestURLConfigPassword(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "pw", "from-file\n")
	creds := t.TempDir()
	writeFile(t, creds, "clickhouse-password", "from-credential\n")
	const envPW = "from-env"
	for _, tc := range []struct {
		name string
		url  string
		env  map[string]string
		want string // the password; the user is "writer" unless noUser
		user string
	}{
		{"nothing", "clickhouse://writer@ch:8123/db", nil, "", "writer"},
		{"environment", "clickhouse://writer@ch:8123/db", map[string]string{clickhouse.PasswordEnv: envPW}, envPW, "writer"},
		{"environment, empty", "clickhouse://writer@ch:8123/db", map[string]string{clickhouse.PasswordEnv: ""}, "", "writer"},
		{"file", "clickhouse://writer@ch:8123/db?password_file=" + url.QueryEscape(file), nil, "from-file", "writer"},
		{"file wins over environment", "clickhouse://writer@ch:8123/db?password_file=" + url.QueryEscape(file),
			map[string]string{clickhouse.PasswordEnv: envPW}, "from-file", "writer"},
		{"URL wins over environment", "clickhouse://writer:in%2Furl@ch:8123/db", map[string]string{clickhouse.PasswordEnv: envPW}, "in/url", "writer"},
		{"empty URL password is none", "clickhouse://writer:@ch:8123/db", map[string]string{clickhouse.PasswordEnv: envPW}, envPW, "writer"},
		{"default user takes no password", "clickhouse://ch:8123/db", map[string]string{clickhouse.PasswordEnv: envPW}, "", ""},
		{"systemd credential", "clickhouse://writer@ch:8123/db?password_file=${CREDENTIALS_DIRECTORY}/clickhouse-password",
			map[string]string{clickhouse.CredentialsDirVar: creds, clickhouse.PasswordEnv: envPW}, "from-credential", "writer"},
	} {
		u, err := clickhouse.ParseURL(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		cfg, err := u.Config(fakeEnv(tc.env))
		want := clickhouse.Config{Address: "ch:8123", Database: "db", User: tc.user, Password: tc.want}
		if err != nil || cfg != want {
			t.Errorf("%s: Config = %+v, %v; want %+v", tc.name, cfg, err, want)
		}
	}
}

// Only the file's last newline goes: a password may end in white space,
// and a file written by an editor (\n) or on Windows (\r\n) loses its line
// end alone.
func TestURLConfigTrimsOneNewline(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]string{
		"pw":        "pw",
		"pw\n":      "pw",
		"pw\r\n":    "pw",
		"pw\n\n":    "pw\n",
		"pw \t\n":   "pw \t",
		"pw\r":      "pw\r",
		"":          "",
		"\n":        "",
		"p w\nx\n":  "p w\nx",
		"\x00pw\n":  "\x00pw",
		" pw\r\n\n": " pw\r\n",
	} {
		u := clickhouse.URL{Address: "ch:1", Database: "d", User: "u", PasswordFile: writeFile(t, dir, "pw", content)}
		cfg, err := u.Config(fakeEnv(nil))
		if err != nil || cfg.Password != want {
			t.Errorf("file %q: password %q, %v; want %q", content, cfg.Password, err, want)
		}
	}
}

// A file that cannot be read is an ErrPasswordFile naming the path, with
// the cause (errors.Is works), and never the password.
func TestURLConfigUnreadableFile(t *testing.T) {
	const secret = "Tq8-unreadable-secret"
	dir := t.TempDir()
	big := writeFile(t, dir, "big", strings.Repeat(secret, 4096/len(secret)+1))
	for _, tc := range []struct {
		name  string
		path  string
		env   map[string]string
		cause error
		says  []string
	}{
		{"missing", filepath.Join(dir, "none"), nil, fs.ErrNotExist, []string{filepath.Join(dir, "none"), "no such file"}},
		{"a directory", dir, nil, nil, []string{dir, "is a directory"}},
		{"too large", big, nil, nil, []string{big, "larger than 4096 bytes"}},
		{"no credentials directory", "${CREDENTIALS_DIRECTORY}/clickhouse-password", map[string]string{clickhouse.PasswordEnv: secret}, nil,
			[]string{"${CREDENTIALS_DIRECTORY}/clickhouse-password", "$CREDENTIALS_DIRECTORY is not set", "LoadCredential="}},
		{"credentials directory without the file", "${CREDENTIALS_DIRECTORY}/clickhouse-password", map[string]string{clickhouse.CredentialsDirVar: dir},
			fs.ErrNotExist, []string{filepath.Join(dir, "clickhouse-password")}},
	} {
		u := clickhouse.URL{Address: "ch:1", Database: "d", User: "u", PasswordFile: tc.path}
		cfg, err := u.Config(fakeEnv(tc.env))
		if !errors.Is(err, clickhouse.ErrPasswordFile) || (tc.cause != nil && !errors.Is(err, tc.cause)) {
			t.Errorf("%s: Config = %+v, %v; want ErrPasswordFile (and %v)", tc.name, cfg, err, tc.cause)
			continue
		}
		for _, w := range tc.says {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.name, err, w)
			}
		}
		if strings.Contains(err.Error(), secret[:8]) {
			t.Errorf("%s: error %q shows the password", tc.name, err)
		}
	}
}

// Env's zero value is the process's environment and files.
func TestURLConfigProcessEnv(t *testing.T) {
	t.Setenv(clickhouse.PasswordEnv, "from-process")
	u := clickhouse.URL{Address: "ch:1", Database: "d", User: "u"}
	if cfg, err := u.Config(clickhouse.Env{}); err != nil || cfg.Password != "from-process" {
		t.Errorf("zero Env: %+v, %v; want the process's %s", cfg, err, clickhouse.PasswordEnv)
	}
	if cfg, err := u.Config(clickhouse.OSEnv()); err != nil || cfg.Password != "from-process" {
		t.Errorf("OSEnv: %+v, %v; want the process's %s", cfg, err, clickhouse.PasswordEnv)
	}
	u.PasswordFile = writeFile(t, t.TempDir(), "pw", "from-file\n")
	if cfg, err := u.Config(clickhouse.OSEnv()); err != nil || cfg.Password != "from-file" {
		t.Errorf("OSEnv with a file: %+v, %v; want the file's", cfg, err)
	}
}

// A password never shows in an error, whatever characters it holds: an
// unescaped / ? # % [ makes url.Parse fail (or read the host wrong), and
// its errors quote what they trip on.
func TestParseURLHidesPassword(t *testing.T) {
	urls := []string{
		"clickhouse://u:Qz7Wk2Lx@127.0.0.1/flows",
		"clickhouse://u:Qz7Wk2Lx@127.0.0.1:8123/bad-db",
		"clickhouse://u:Qz7Wk2Lx@127.0.0.1:8123/%zz",
		"clickhouse://u:Qz7Wk2Lx@127.0.0.1:8123/flows?timeout=1",
		"clickhouse://u:Qz7Wk2Lx@127.0.0.1:8123/flows?password_file=/x",
		"clickhouse://u:Qz7Wk2Lx@127.0.0.1:8123/flows#frag",
		"clickhouse://127.0.0.1:8123/flows?password=Qz7Wk2Lx",
		"http://u:Qz7Wk2Lx@127.0.0.1:8123/flows",
	}
	// Passwords a generator makes, written into the URL unescaped.
	for _, pw := range []string{"Qz7/Wk2Lx", "Qz7?Wk2Lx", "Qz7#Wk2Lx", "Qz7%zzWk2Lx", "Qz7[Wk2Lx", "Qz7 Wk2Lx", "Qz7]Wk2Lx", "9876?Wk2Lx", "9876#Wk2Lx", "9876/Wk2Lx", "Qz7\x7fWk2Lx"} {
		urls = append(urls, "clickhouse://u:"+pw+"@127.0.0.1:8123/flows")
	}
	for _, u := range urls {
		_, err := clickhouse.ParseURL(u)
		if err == nil {
			t.Errorf("ParseURL(%q): no error", u)
			continue
		}
		if !errors.Is(err, clickhouse.ErrURL) {
			t.Errorf("ParseURL(%q): %v, want ErrURL", u, err)
		}
		for _, piece := range []string{"Qz7", "Wk2", "Lx", "9876"} {
			if strings.Contains(err.Error(), piece) {
				t.Errorf("ParseURL(%q): error %q shows %q of the password", u, err, piece)
			}
		}
	}
}

// FuzzParseURL: any string is a URL whose Config New accepts, or an
// ErrURL that does not show the password url.Parse finds in it.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"clickhouse://127.0.0.1:8123/flows", "clickhouse://u:p@[::1]:1/d", "clickhouse://h:1/", "clickhouse://%", "",
		"clickhouse://u@h:1/d?password_file=pw", "clickhouse://u@h:1/d?password_file=${CREDENTIALS_DIRECTORY}/pw",
		"clickhouse://u:secret@h:1/d?password_file=pw", "clickhouse://u:1234?x@h:1/d",
	} {
		f.Add(s)
	}
	env := clickhouse.Env{
		LookupEnv: func(k string) (string, bool) { return "/creds", k == clickhouse.CredentialsDirVar },
		ReadFile:  func(string) ([]byte, error) { return []byte("from-file\n"), nil },
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := clickhouse.ParseURL(s)
		if err != nil {
			if !errors.Is(err, clickhouse.ErrURL) {
				t.Fatalf("ParseURL(%q): %v does not wrap ErrURL", s, err)
			}
			if pu, perr := url.Parse(s); perr == nil && pu.User != nil {
				if pw, _ := pu.User.Password(); len(pw) >= 4 && strings.Contains(err.Error(), pw) {
					t.Fatalf("ParseURL(%q): error %q shows the password %q", s, err, pw)
				}
			}
			return
		}
		cfg, err := u.Config(env)
		if err != nil {
			t.Fatalf("ParseURL(%q) = %+v, whose Config fails: %v", s, u, err)
		}
		if u.PasswordFile != "" && cfg.Password != "from-file" {
			t.Fatalf("ParseURL(%q) = %+v: password %q, want the file's", s, u, cfg.Password)
		}
		cfg.Kind = 1
		if _, err := clickhouse.New(cfg); err != nil {
			t.Fatalf("ParseURL(%q) = %+v, which New rejects: %v", s, cfg, err)
		}
	})
}

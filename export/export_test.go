package export_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/export"
	"github.com/flowdedup/flowdedup/export/clickhouse"
	"github.com/flowdedup/flowdedup/export/ipfix"
	"github.com/flowdedup/flowdedup/flow"
)

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	o := export.Options{Kind: flow.Key5Tuple, Env: clickhouse.Env{LookupEnv: func(k string) (string, bool) {
		return map[string]string{clickhouse.PasswordEnv: "secret"}[k], k == clickhouse.PasswordEnv
	}}}
	for _, tc := range []struct {
		url    string
		target error
		says   []string
	}{
		{"kafka://broker:9092/flows", export.ErrScheme, []string{`"kafka"`, "known: clickhouse, ipfix, ipfix+tcp"}},
		{"127.0.0.1:4739", export.ErrScheme, []string{"want SCHEME://HOST:PORT", "clickhouse, ipfix, ipfix+tcp"}},
		{"mailto://u:secret@host", export.ErrScheme, []string{"mailto://host"}}, // no credentials in the message
		{"ipfix://127.0.0.1", ipfix.ErrURL, []string{"want HOST:PORT"}},
		{"ipfix+tcp://collector:0", ipfix.ErrURL, []string{"port"}},
		{"ipfix://u:p@127.0.0.1:4739", ipfix.ErrURL, []string{"credentials"}},
		{"clickhouse://127.0.0.1:8123", clickhouse.ErrURL, []string{"no database"}},
		{"clickhouse://u:secret@127.0.0.1:8123/a-b", clickhouse.ErrURL, []string{"a-b"}},
		{"clickhouse://u:sec/ret@127.0.0.1:8123/flows", clickhouse.ErrURL, []string{"percent-encode"}},
		{"clickhouse://127.0.0.1:8123/flows?password=secret", clickhouse.ErrURL, []string{`query parameter "password"`, "password_file=PATH"}},
		// A password file that cannot be read, though the environment
		// holds a password: the file was asked for.
		{"clickhouse://u@127.0.0.1:8123/flows?password_file=" + dir + "/none", clickhouse.ErrPasswordFile,
			[]string{"export clickhouse://127.0.0.1:8123/flows", `password file "` + dir + `/none"`, "no such file"}},
		{"clickhouse://u@127.0.0.1:8123/flows?password_file=" + dir, clickhouse.ErrPasswordFile, []string{`"` + dir + `"`, "is a directory"}},
	} {
		q, err := export.Open(tc.url, o)
		if err == nil {
			q.Close()
			t.Errorf("%s: opened", tc.url)
			continue
		}
		if !errors.Is(err, tc.target) {
			t.Errorf("%s: %v, want %v", tc.url, err, tc.target)
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not say %q", tc.url, err, s)
			}
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error %q shows the password", tc.url, err)
		}
		// Check refuses what Open refuses, with Open's error.
		if cerr := export.Check(tc.url, o.Env); cerr == nil || cerr.Error() != err.Error() {
			t.Errorf("Check(%s) = %v, want Open's %v", tc.url, cerr, err)
		}
	}
	if _, err := export.Open("ipfix://127.0.0.1:4739", export.Options{}); !errors.Is(err, ipfix.ErrConfig) {
		t.Errorf("no key kind: %v, want ipfix.ErrConfig", err)
	}
}

func TestDest(t *testing.T) {
	for in, want := range map[string]string{
		"ipfix://127.0.0.1:4739":                               "ipfix://127.0.0.1:4739",
		"IPFIX+TCP://[::1]:4739":                               "ipfix+tcp://[::1]:4739",
		"clickhouse://user:secret@ch.example:8123/flows?x=1#f": "clickhouse://ch.example:8123/flows",
		"clickhouse://ch:8123/db?password=secret":              "clickhouse://ch:8123/db",
		"bad://u:secret@host:%zz/x?password=secret":            "bad://host:%zz/x",
		"clickhouse://u:se#cret@ch:8123/flows":                 "clickhouse://ch:8123/flows",
		"clickhouse://u:se?cret@ch:8123/flows":                 "clickhouse://ch:8123/flows",
		"clickhouse://u:se/cret@ch:8123/flows?password_file=x": "clickhouse://ch:8123/flows",
		"clickhouse://u@ch:8123/flows?password_file=/run/pw":   "clickhouse://ch:8123/flows",
	} {
		if got := export.Dest(in); got != want {
			t.Errorf("Dest(%q) = %q, want %q", in, got, want)
		}
	}
}

// Check takes every URL Open takes, without opening anything: a
// destination nobody listens at is not its business.
func TestCheckAccepts(t *testing.T) {
	for _, u := range []string{
		"ipfix://127.0.0.1:4739", "IPFIX://[::1]:2055", "ipfix+tcp://collector.invalid:4739",
		"clickhouse://127.0.0.1:8123/flows", "clickhouse://u:p@ch.invalid:8123/_db1",
	} {
		if err := export.Check(u, clickhouse.Env{}); err != nil {
			t.Errorf("Check(%s): %v", u, err)
		}
	}
}

func TestOpenAll(t *testing.T) {
	o := export.Options{Kind: flow.KeySrc}
	qs, err := export.OpenAll([]string{"ipfix://127.0.0.1:4739", "ipfix+tcp://127.0.0.1:4739", "clickhouse://u:secret@127.0.0.1:8123/flows"}, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 3 || qs[0].Dest() != "ipfix://127.0.0.1:4739" || qs[1].Dest() != "ipfix+tcp://127.0.0.1:4739" || qs[2].Dest() != "clickhouse://127.0.0.1:8123/flows" {
		t.Errorf("queues %v", qs)
	}
	for _, q := range qs {
		q.Close()
	}
	if _, err := export.OpenAll([]string{"ipfix://127.0.0.1:4739", "ipfix://127.0.0.1:4739"}, o); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("the same destination twice: %v", err)
	}
}

// A password written in the URL works, with one warning on Notices that
// says where it shows and what to do instead, without the password; a
// password from a file or the environment makes no warning.
func TestOpenWarnsOfPasswordInURL(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("Fz4-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := clickhouse.Env{LookupEnv: func(k string) (string, bool) { return "Fz4-from-env", k == clickhouse.PasswordEnv }}
	for _, tc := range []struct {
		url  string
		warn bool
	}{
		{"clickhouse://u:Fz4-in-url@127.0.0.1:8123/flows", true},
		{"clickhouse://u@127.0.0.1:8123/flows?password_file=" + pwFile, false},
		{"clickhouse://u@127.0.0.1:8123/flows", false},
		{"clickhouse://127.0.0.1:8123/flows", false},
	} {
		var says notices
		q, err := export.Open(tc.url, export.Options{Kind: flow.KeySrc, Notices: &says, Env: env})
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		q.Close()
		n := says.String()
		want := "flowdedup: export clickhouse://127.0.0.1:8123/flows: warning: " + export.ExposedPassword + "\n"
		if got := strings.Count(n, want); got != map[bool]int{true: 1}[tc.warn] {
			t.Errorf("%s: the warning %d times, want %v:\n%s", tc.url, got, tc.warn, n)
		}
		if strings.Contains(n, "Fz4") {
			t.Errorf("%s: notices show a password:\n%s", tc.url, n)
		}
	}
	for _, w := range []string{"ps", "/proc/PID/cmdline", "systemctl show", "password_file=PATH", "LoadCredential=", clickhouse.PasswordEnv} {
		if !strings.Contains(export.ExposedPassword, w) {
			t.Errorf("the warning does not say %q: %s", w, export.ExposedPassword)
		}
	}
}

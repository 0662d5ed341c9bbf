package clickhouse_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/report/clickhouse"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want clickhouse.Config
		err  string // in the error; "" for success
	}{
		{url: "clickhouse://127.0.0.1:8123/flows", want: clickhouse.Config{Address: "127.0.0.1:8123", Database: "flows"}},
		{url: "clickhouse://[::1]:8123/flows/", err: "database name \"flows/\""},
		{url: "clickhouse://[2001:db8::7]:9123/_net_2", want: clickhouse.Config{Address: "[2001:db8::7]:9123", Database: "_net_2"}},
		{url: "clickhouse://ch.example:8123/Flows", want: clickhouse.Config{Address: "ch.example:8123", Database: "Flows"}},
		{url: "clickhouse://writer:s%40cret@ch:8123/flows", want: clickhouse.Config{Address: "ch:8123", Database: "flows", User: "writer", Password: "s@cret"}},
		{url: "clickhouse://writer@ch:8123/flows", want: clickhouse.Config{Address: "ch:8123", Database: "flows", User: "writer"}},
		{url: "clickhouse://:pw@ch:8123/flows", err: "a password without a user name"},
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
		{url: "clickhouse://127.0.0.1:8123/flows?timeout=1s", err: "no query or fragment"},
		{url: "clickhouse://127.0.0.1:8123/flows#x", err: "no query or fragment"},
	} {
		cfg, err := clickhouse.ParseURL(tc.url)
		if tc.err == "" {
			if err != nil || cfg != tc.want {
				t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.url, cfg, err, tc.want)
			}
			continue
		}
		if !errors.Is(err, clickhouse.ErrURL) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseURL(%q): error %v, want ErrURL with %q", tc.url, err, tc.err)
		}
	}
}

// A password never shows in an error.
func TestParseURLHidesPassword(t *testing.T) {
	for _, u := range []string{
		"clickhouse://u:topsecret@127.0.0.1/flows",
		"clickhouse://u:topsecret@127.0.0.1:8123/bad-db",
		"clickhouse://u:topsecret@127.0.0.1:8123/%zz",
		"http://u:topsecret@127.0.0.1:8123/flows",
	} {
		_, err := clickhouse.ParseURL(u)
		if err == nil || strings.Contains(err.Error(), "topsecret") {
			t.Errorf("ParseURL(%q): %v", u, err)
		}
	}
}

// FuzzParseURL: any string is a Config New accepts, or an ErrURL.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"clickhouse://127.0.0.1:8123/flows", "clickhouse://u:p@[::1]:1/d", "clickhouse://h:1/", "clickhouse://%", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := clickhouse.ParseURL(s)
		if err != nil {
			if !errors.Is(err, clickhouse.ErrURL) {
				t.Fatalf("ParseURL(%q): %v does not wrap ErrURL", s, err)
			}
			return
		}
		cfg.Kind = 1
		if _, err := clickhouse.New(cfg); err != nil {
			t.Fatalf("ParseURL(%q) = %+v, which New rejects: %v", s, cfg, err)
		}
	})
}

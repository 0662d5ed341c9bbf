package export_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/report/clickhouse"
	"github.com/flowdedup/flowdedup/report/export"
	"github.com/flowdedup/flowdedup/report/ipfix"
)

func TestOpenErrors(t *testing.T) {
	o := export.Options{Kind: flow.Key5Tuple}
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
		if cerr := export.Check(tc.url); cerr == nil || cerr.Error() != err.Error() {
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
		if err := export.Check(u); err != nil {
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

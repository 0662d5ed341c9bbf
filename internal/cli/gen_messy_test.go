package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/gen"
)

// The messy-capture flags set the library's options: the file is the one
// gen.Write makes with them, and the summary line says what was messed up.
func TestGenMessyFlags(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		args []string
		cfg  gen.Config
		say  string
	}{
		{"jitter.pcap", []string{"--jitter", "3s"},
			gen.Config{Jitter: 3 * time.Second, Format: gen.FormatPcap}, "timestamps go back"},
		{"ifaces.pcapng", []string{"--interfaces", "3", "--interface-skew", "2s"},
			gen.Config{Interfaces: 3, InterfaceSkew: 2 * time.Second, Format: gen.FormatPcapNG}, "timestamps go back"},
		{"cut.pcapng.gz", []string{"--cut-short"},
			gen.Config{CutShort: true, Format: gen.FormatPcapNG, Gzip: true}, "then a record cut short"},
	} {
		path := filepath.Join(dir, c.name)
		args := append([]string{"--packets", "3000", "--flows", "300", "--duration", "5m", "--seed", "4", "-o", path}, c.args...)
		code, _, errs := genRun(context.Background(), args...)
		if code != ExitOK {
			t.Fatalf("%s: exit %d: %s", c.name, code, errs)
		}
		want := c.cfg
		want.Packets, want.Flows, want.Duration, want.Seed, want.Start = 3000, 300, 5*time.Minute, 4, start
		var buf bytes.Buffer
		if _, err := gen.Write(&buf, want); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, buf.Bytes()) {
			t.Errorf("%s: the CLI's file differs from gen.Write's with the same settings", c.name)
		}
		if !strings.Contains(errs, c.say) {
			t.Errorf("%s: summary %q lacks %q", c.name, errs, c.say)
		}
	}
}

func TestGenMessyUsageErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.pcap")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--jitter", "-1s"}, "jitter -1s: want at least 0"},
		{[]string{"--jitter", "soon"}, "want a duration"},
		{[]string{"--interfaces", "2"}, "a pcap file has one interface; write pcapng"},
		{[]string{"--interfaces", "2", "--format", "pcapng", "--interface-skew", "-1s"}, "interface skew -1s: want at least 0"},
		{[]string{"--interface-skew", "1s"}, "interface skew 1s needs at least 2 interfaces"},
		{[]string{"--interfaces", "1000", "--format", "pcapng"}, "interfaces 1000: want 1 to 256"},
		{[]string{"--start", "1970-01-01T00:00:01Z", "--jitter", "2s"}, "cannot hold times before 1970"},
	} {
		args := append([]string{"--packets", "100", "--flows", "10", "-o", out}, c.args...)
		code, _, errs := genRun(context.Background(), args...)
		if code != ExitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, errs, ExitUsage, c.want)
		}
	}
}

func TestGenHelpMessy(t *testing.T) {
	code, out, _ := genRun(context.Background(), "--help")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{"--jitter D", "--interfaces int", "--interface-skew D", "--cut-short", "files out of order"} {
		if !strings.Contains(out, w) {
			t.Errorf("gen --help lacks %q", w)
		}
	}
}

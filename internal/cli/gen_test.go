package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/flowdedup/flowdedup/gen"
)

func genRun(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(ctx, append([]string{"gen"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestGenWritesWhatTheLibraryWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mix.pcap")
	code, _, errs := genRun(context.Background(), "--packets", "3000", "--flows", "400", "--zipf", "1.1",
		"--ipv6", "0.25", "--vlan", "--duration", "150s", "--seed", "5", "--malformed", "0.02",
		"--fragments", "0.1", "--snaplen", "96", "--start", "2027-03-04T05:06:07Z", "-o", path)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	st, err := gen.Write(&want, gen.Config{Packets: 3000, Flows: 400, Zipf: 1.1, IPv6: 0.25, VLAN: true,
		Duration: 150 * time.Second, Seed: 5, Malformed: 0.02, Fragments: 0.1, SnapLen: 96,
		Start: time.Date(2027, 3, 4, 5, 6, 7, 0, time.UTC), Format: gen.FormatPcap})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Error("the CLI's file differs from gen.Write's with the same settings")
	}
	if strings.Count(errs, "\n") != 1 {
		t.Errorf("want a one-line summary, got %q", errs)
	}
	for _, w := range []string{"3000 packets", "400 flows", path, "60 malformed"} {
		if !strings.Contains(errs, w) {
			t.Errorf("summary %q lacks %q", errs, w)
		}
	}
	if st.Malformed != 60 {
		t.Errorf("library wrote %d malformed frames, want 60", st.Malformed)
	}
}

func TestGenFormatFromFileName(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		args   []string
		ng, gz bool
	}{
		{"a.pcap", nil, false, false},
		{"b.pcapng", nil, true, false},
		{"c.pcap.gz", nil, false, true},
		{"d.pcapng.gz", nil, true, true},
		{"e.cap", []string{"--format", "pcapng", "--gzip"}, true, true},
		{"f.pcapng", []string{"--format", "pcap"}, false, false},
	} {
		path := filepath.Join(dir, c.name)
		args := append([]string{"--packets", "50", "--flows", "5", "-o", path}, c.args...)
		if code, _, errs := genRun(context.Background(), args...); code != ExitOK {
			t.Fatalf("%s: exit %d: %s", c.name, code, errs)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var r io.Reader = f
		if c.gz {
			if r, err = gzip.NewReader(f); err != nil {
				t.Fatalf("%s: not gzip: %v", c.name, err)
			}
		}
		n := 0
		if c.ng {
			ng, err := pcapgo.NewNgReader(r, pcapgo.DefaultNgReaderOptions)
			if err != nil {
				t.Fatalf("%s: not pcapng: %v", c.name, err)
			}
			for _, _, err := ng.ReadPacketData(); err == nil; _, _, err = ng.ReadPacketData() {
				n++
			}
		} else {
			pr, err := pcapgo.NewReader(r)
			if err != nil {
				t.Fatalf("%s: not pcap: %v", c.name, err)
			}
			for _, _, err := pr.ReadPacketData(); err == nil; _, _, err = pr.ReadPacketData() {
				n++
			}
		}
		if n != 50 {
			t.Errorf("%s: read %d packets, want 50", c.name, n)
		}
	}
}

func TestGenStdout(t *testing.T) {
	code, out, errs := genRun(context.Background(), "--packets", "20", "--flows", "3", "-o", "-")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := pcapgo.NewReader(strings.NewReader(out)); err != nil {
		t.Errorf("stdout is not a pcap: %v", err)
	}
	if !strings.Contains(errs, "-> stdout") {
		t.Errorf("summary %q does not name stdout", errs)
	}
}

func TestGenHelp(t *testing.T) {
	code, out, errs := genRun(context.Background(), "--help")
	if code != ExitOK || errs != "" {
		t.Fatalf("--help: exit %d, stderr %q", code, errs)
	}
	for _, w := range []string{"--packets N --flows F", "-zipf", "-ipv6", "-vlan", "-duration", "-seed",
		"-format", "-malformed", "-o FILE", "Examples:", "flowdedup gen --packets 2000"} {
		if !strings.Contains(out, w) {
			t.Errorf("help lacks %q", w)
		}
	}
}

func TestGenUsageErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.pcap")
	ok := func(extra ...string) []string {
		return append([]string{"--packets", "100", "--flows", "10", "-o", out}, extra...)
	}
	cases := [][]string{
		{},
		{"--packets", "100", "-o", out},
		{"--flows", "10", "-o", out},
		{"--packets", "100", "--flows", "10"},
		ok("stray"),
		ok("--bogus"),
		{"--packets", "100", "--flows", "101", "-o", out},
		{"--packets", "100", "--flows", "100", "--malformed", "0.05", "-o", out},
		{"--packets", "-5", "--flows", "10", "-o", out},
		{"--packets", "ten", "--flows", "10", "-o", out},
		ok("--zipf", "-1"),
		ok("--ipv6", "1.5"),
		ok("--malformed", "2"),
		ok("--fragments", "-0.1"),
		ok("--format", "xml"),
		ok("--snaplen", "10"),
		ok("--duration", "-1s"),
		ok("--duration", "soon"),
		ok("--start", "yesterday"),
		ok("--seed", "-1"),
	}
	for _, args := range cases {
		code, _, errs := genRun(context.Background(), args...)
		if code != ExitUsage {
			t.Errorf("%q: exit %d, want %d (usage)", args, code, ExitUsage)
		}
		if errs == "" {
			t.Errorf("%q: no message on stderr", args)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%q: a usage error left %s behind", args, out)
		}
	}
}

func TestGenFailureLeavesNoFile(t *testing.T) {
	code, _, errs := genRun(context.Background(), "--packets", "10", "--flows", "1", "-o", filepath.Join(t.TempDir(), "no", "such", "dir.pcap"))
	if code != ExitError {
		t.Errorf("unwritable path: exit %d, want %d: %s", code, ExitError, errs)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path := filepath.Join(t.TempDir(), "cancelled.pcap")
	code, _, errs = genRun(ctx, "--packets", "10", "--flows", "1", "-o", path)
	if code != ExitError || !strings.Contains(errs, "canceled") {
		t.Errorf("cancelled: exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("a cancelled run left its partial file")
	}
}

// TestGenTestdataReproducible reruns every command of
// testdata/pcaps/README.md and compares with the committed file, so that the
// README's commands, and the expected counts derived from the files, stay
// true.
func TestGenTestdataReproducible(t *testing.T) {
	const root = "../.."
	readme, err := os.ReadFile(filepath.Join(root, "testdata/pcaps/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "go run ./cmd/flowdedup gen "
	n := 0
	for line := range strings.Lines(string(readme)) {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		args := strings.Fields(strings.TrimPrefix(line, prefix))
		if len(args) < 2 || args[len(args)-2] != "-o" {
			t.Fatalf("README command %q does not end with -o FILE", line)
		}
		name := args[len(args)-1]
		want, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		args[len(args)-1] = filepath.Join(t.TempDir(), filepath.Base(name))
		if code, _, errs := genRun(context.Background(), args...); code != ExitOK {
			t.Fatalf("%s: exit %d: %s", name, code, errs)
		}
		got, err := os.ReadFile(args[len(args)-1])
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".gz") {
			// Compare the captures, not the compressor's output, which
			// may change with the Go release.
			got, want = gunzip(t, got), gunzip(t, want)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: its README command no longer makes it; regenerate the files and update the counts", name)
		}
		n++
	}
	if n < 8 {
		t.Errorf("found %d gen commands in the README, want at least 8", n)
	}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

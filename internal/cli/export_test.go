package cli

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/export"
	"github.com/flowdedup/flowdedup/record"

	"github.com/flowdedup/flowdedup/export/clickhouse"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/report"
	"github.com/flowdedup/flowdedup/sketch"
)

// Malformed export flags are usage errors (exit 2) that say what is wrong,
// on replay and run alike, before anything is opened.
func TestExportUsageErrors(t *testing.T) {
	file := pcapPath("small.pcap")
	for _, c := range []struct {
		args []string
		says []string
	}{
		{[]string{"--export", "kafka://broker:9092/flows"}, []string{`"kafka"`, "known: clickhouse, ipfix, ipfix+tcp"}},
		{[]string{"--export", "127.0.0.1:4739"}, []string{"want SCHEME://HOST:PORT", "clickhouse, ipfix, ipfix+tcp"}},
		{[]string{"--export", "ipfix://127.0.0.1"}, []string{"ipfix://127.0.0.1", "want HOST:PORT", "missing port"}},
		{[]string{"--export", "ipfix+tcp://collector:0"}, []string{"port \"0\""}},
		{[]string{"--export", "clickhouse://127.0.0.1:8123"}, []string{"no database"}},
		{[]string{"--export", "clickhouse://u:secret@127.0.0.1:8123/a-b"}, []string{`database name "a-b"`}},
		{[]string{"--export", "ipfix://127.0.0.1:4739", "--export", "IPFIX://127.0.0.1:4739"}, []string{"ipfix://127.0.0.1:4739 is given twice"}},
		{[]string{"--spool-max", "2GiB"}, []string{"--spool-max needs --spool"}},
		{[]string{"--spool", "x", "--spool-max", "1024"}, []string{"--spool-max", "no unit"}},
		{[]string{"--spool", "x", "--spool-max", "1kb"}, []string{"ambiguous", "B for bytes"}},
		{[]string{"--spool", "x", "--spool-max", "0B"}, []string{"positive"}},
		{[]string{"--spool", "x", "--spool-max", "-1GiB"}, []string{"positive"}},
		{[]string{"--spool", "x", "--spool-max", "0.5B"}, []string{"whole number of bytes"}},
		{[]string{"--spool", "x", "--spool-max", "1.5B"}, []string{"whole number of bytes"}},
		{[]string{"--export-drain", "0s"}, []string{"--export-drain must be positive"}},
		{[]string{"--export-drain", "soon"}, []string{"want a duration"}},
		{[]string{"--sketch-seed", "0"}, []string{"0 is not a seed"}},
		{[]string{"--sketch-seed", "0xg"}, []string{"unsigned 64-bit integer"}},
		{[]string{"--observation-domain", "4294967296"}, []string{"--observation-domain"}},
	} {
		for _, cmd := range [][]string{{"replay", file}, {"run", "--iface", "lo"}} {
			args := append(append([]string{}, cmd...), c.args...)
			code, _, errs := run(args...)
			if code != ExitUsage {
				t.Errorf("%q: exit %d, want %d: %s", args, code, ExitUsage, errs)
				continue
			}
			for _, w := range c.says {
				if !strings.Contains(errs, w) {
					t.Errorf("%q: stderr %q lacks %q", args, errs, w)
				}
			}
			if strings.Contains(errs, "secret") {
				t.Errorf("%q: stderr shows the password: %q", args, errs)
			}
		}
	}
}

// A destination that is down when the run starts does not stop the run:
// it goes on, says so once per destination on stderr, and counts what the
// destination did not get (shutdown, without a spool) in the totals on
// stderr and in the run totals, the last line of the summary output. As
// records were lost, replay exits 1 and says how many, and that --spool
// keeps them. Real dead ports: UDP (ICMP port unreachable), TCP and HTTP
// (connection refused). The default observer is the host name.
func TestExportUnreachableAtStart(t *testing.T) {
	ipfixURL := fmt.Sprintf("ipfix://127.0.0.1:%d", testutil.FreeUDPPort(t))
	tcpURL := fmt.Sprintf("ipfix+tcp://127.0.0.1:%d", freeTCPPort(t))
	chURL := fmt.Sprintf("clickhouse://127.0.0.1:%d/flows", freeTCPPort(t))
	dir := t.TempDir()
	summary := filepath.Join(dir, "summary.jsonl")
	code, _, errs := run("replay", "--key", "5tuple", "--filter", "exact", "--out", filepath.Join(dir, "out.jsonl"), "--summary", summary,
		"--export", ipfixURL, "--export", tcpURL, "--export", chURL, "--export-drain", "300ms", pcapPath("small.pcap"))
	if code != ExitError {
		t.Fatalf("exit %d, want %d: %s", code, ExitError, errs)
	}
	totals := readRunTotals(t, summary)
	for _, dest := range []string{ipfixURL, tcpURL, chURL} {
		if n := strings.Count(errs, "export "+dest+": unreachable"); n != 1 {
			t.Errorf("%s: said unreachable %d times, want once:\n%s", dest, n, errs)
		}
		// 300 distinct 5-tuples, and for ClickHouse the window's
		// summary (IPFIX carries none: the end of its window is only a
		// flush, not counted).
		sent, lost := "sent 0 records and 0 window summaries", 301
		if dest != chURL {
			sent, lost = "sent 0 records (IPFIX carries no window summaries)", 300
		}
		if !strings.Contains(errs, fmt.Sprintf("export %s: %s, dropped %d (shutdown %d)", dest, sent, lost, lost)) {
			t.Errorf("%s: totals do not count the %d lost:\n%s", dest, lost, errs)
		}
		if e := totals.Exports[dest]; e.Sent != 0 || e.Dropped != uint64(lost) || fmt.Sprint(e.DroppedBy) != fmt.Sprintf("map[shutdown:%d]", lost) {
			t.Errorf("%s: run totals %+v, want %d dropped (shutdown %d)", dest, e, lost, lost)
		}
		if !strings.Contains(errs, fmt.Sprintf("%s %d (shutdown %d)", dest, lost, lost)) {
			t.Errorf("%s: the exit message does not count the %d lost:\n%s", dest, lost, errs)
		}
	}
	if !strings.Contains(errs, "flowdedup replay: 901 records and window summaries were not delivered: ") ||
		!strings.Contains(errs, "; --spool DIR keeps what a destination cannot take") {
		t.Errorf("stderr does not end with what was lost and what keeps it:\n%s", errs)
	}
	host, _ := os.Hostname()
	s := readSummaries(t, summary)
	if len(s) != 1 || s[0].Observer != host || s[0].Distinct != 300 {
		t.Fatalf("summaries %+v: want one, of observer %q with 300 distinct", s, host)
	}
	if totals.Windows != 1 || totals.Distinct != 300 || totals.Observer != host {
		t.Errorf("run totals %+v: want 1 window, 300 distinct, observer %q", totals, host)
	}
}

// runTotals is the run totals line of a summary output, as a user's
// script reads it.
type runTotals struct {
	Windows  uint64 `json:"windows"`
	Packets  uint64 `json:"packets"`
	Distinct uint64 `json:"distinct"`
	Observer string `json:"observer"`
	Exports  map[string]struct {
		Sent           uint64            `json:"sent"`
		SentWindows    uint64            `json:"sent_windows"`
		Dropped        uint64            `json:"dropped"`
		DroppedBy      map[string]uint64 `json:"dropped_by"`
		Spooled        int               `json:"spooled"`
		SpooledWindows int               `json:"spooled_windows"`
	} `json:"exports"`
}

// readRunTotals returns the run totals of the summary output at path,
// which must be its last line, and the only one.
func readRunTotals(t *testing.T, path string) runTotals {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var line struct {
		RunTotals *runTotals `json:"run_totals"`
	}
	for i, l := range lines {
		if strings.HasPrefix(l, `{"run_totals":`) != (i == len(lines)-1) {
			t.Fatalf("%s: line %d of %d is %.60s..., want the run totals last and only there", path, i+1, len(lines), l)
		}
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &line); err != nil || line.RunTotals == nil {
		t.Fatalf("%s: the last line %q is not the run totals: %v", path, lines[len(lines)-1], err)
	}
	return *line.RunTotals
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// With --spool, what a destination down at the end could not take stays on
// disk for the next run, and says so in the totals; a later run that does
// not export there says, in one line, what the spool keeps for whom.
func TestExportSpoolLeftForNextRun(t *testing.T) {
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	ipfixURL := fmt.Sprintf("ipfix://127.0.0.1:%d", testutil.FreeUDPPort(t))
	code, _, errs := run("replay", "--key", "src", "--filter", "exact", "--out", os.DevNull, "--export", ipfixURL,
		"--spool", spool, "--spool-max", "64MiB", "--export-drain", "300ms", pcapPath("small.pcap"))
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "left in the spool for the next run") {
		t.Errorf("totals do not say what the spool keeps:\n%s", errs)
	}
	code, _, errs = run("replay", "--key", "src", "--out", os.DevNull, "--spool", spool, pcapPath("small.pcap"))
	if code != ExitOK {
		t.Fatalf("second run: exit %d: %s", code, errs)
	}
	want := regexp.MustCompile(`spool .* holds what earlier runs could not deliver .*: ` + regexp.QuoteMeta(ipfixURL) + ` \(\d+ files\)\n`)
	if n := len(want.FindAllString(errs, -1)); n != 1 {
		t.Errorf("second run said %d times what the spool keeps, want once:\n%s", n, errs)
	}
	// The spool is locked while a run uses it: two at once is an error
	// of the run (exit 1), not a usage error.
	sp, err := export.OpenSpool(spool, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if code, _, errs = run("replay", "--out", os.DevNull, "--spool", spool, pcapPath("small.pcap")); code != ExitError || !strings.Contains(errs, "in use") {
		t.Errorf("spool in use: exit %d, stderr %q", code, errs)
	}
}

// --summary-sketch puts each window's sketch in its summary, under the
// --sketch-seed: the default seed's fingerprint, or another's; without it
// summaries carry the estimate alone. --observer names the summaries.
func TestSummarySketchAndSeed(t *testing.T) {
	dir := t.TempDir()
	replaySummaries := func(name string, args ...string) []record.Summary {
		path := filepath.Join(dir, name)
		code, _, errs := run(append([]string{"replay", "--key", "src", "--window", "1m", "--out", os.DevNull, "--summary", path, pcapPath("windows.pcap")}, args...)...)
		if code != ExitOK {
			t.Fatalf("%s: exit %d: %s", name, code, errs)
		}
		return readSummaries(t, path)
	}
	plain := replaySummaries("plain.jsonl", "--observer", "edge-1")
	def := replaySummaries("default.jsonl", "--summary-sketch")
	other := replaySummaries("other.jsonl", "--summary-sketch", "--sketch-seed", "0x5eed")
	if len(plain) != 3 || len(def) != 3 || len(other) != 3 {
		t.Fatalf("windows: %d, %d, %d; want 3 each", len(plain), len(def), len(other))
	}
	for i := range plain {
		if plain[i].Observer != "edge-1" || plain[i].Sketch != nil || plain[i].DistinctEstimate == 0 {
			t.Errorf("window %d without --summary-sketch: observer %q, %d sketch bytes, estimate %d", i, plain[i].Observer, len(plain[i].Sketch), plain[i].DistinctEstimate)
		}
		for _, c := range []struct {
			s    record.Summary
			seed uint64
		}{{def[i], sketch.DefaultSeed}, {other[i], 0x5eed}} {
			var h sketch.HLL
			if err := h.UnmarshalBinary(c.s.Sketch); err != nil {
				t.Fatalf("window %d: sketch: %v", i, err)
			}
			if h.Fingerprint() != sketch.Fingerprint(c.seed) || h.Estimate() != c.s.DistinctEstimate {
				t.Errorf("window %d: sketch of seed fingerprint %x estimating %d; want seed %#x's %x and the summary's %d",
					i, h.Fingerprint(), h.Estimate(), c.seed, sketch.Fingerprint(c.seed), c.s.DistinctEstimate)
			}
		}
	}
}

func readSummaries(t *testing.T, path string) []record.Summary {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := report.ReadSummaries(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

// The export Queues' metrics are served beside the pipeline's, with the
// filter label.
func TestExportMetricsRegistered(t *testing.T) {
	const spec = "exact"
	qs, err := export.OpenAll([]string{"ipfix://127.0.0.1:4739"}, export.Options{Kind: flow.KeySrc})
	if err != nil {
		t.Fatal(err)
	}
	defer closeQueues(qs)
	reg := metricsRegistry(func() pipeline.Stats { return pipeline.Stats{} }, spec)
	registerExports(reg, spec, qs)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if strings.HasPrefix(f.GetName(), "flowdedup_export_") && labels["dest"] == "ipfix://127.0.0.1:4739" && labels["filter"] == spec {
				found[f.GetName()] = true
			}
		}
	}
	for _, name := range []string{"flowdedup_export_sent_total", "flowdedup_export_dropped_total", "flowdedup_export_up", "flowdedup_export_spooled"} {
		if !found[name] {
			t.Errorf("no %s{dest=ipfix://127.0.0.1:4739,filter=%s}", name, spec)
		}
	}
}

// The help of replay shows how to export to nfcapd and ClickHouse.
func TestExportHelp(t *testing.T) {
	for _, cmd := range []string{"replay", "run"} {
		_, out, _ := run(cmd, "--help")
		for _, w := range []string{"--export URL", "nfcapd -w", "--export ipfix://", "--export clickhouse://", "--spool DIR", "--spool-max SIZE",
			"--observer NAME", "--export-drain D", "--observation-domain N", "--sketch-seed N", "--summary-sketch"} {
			if !strings.Contains(out, w) {
				t.Errorf("%s --help lacks %q", cmd, w)
			}
		}
	}
	_, out, _ := run("help", "merge")
	if !strings.Contains(out, "--summary-sketch") || !strings.Contains(out, "flowdedup merge --by 1h") {
		t.Errorf("flowdedup help merge:\n%s", out)
	}
}

// The ClickHouse password from a file, from FLOWDEDUP_CLICKHOUSE_PASSWORD,
// or in the URL (which works, with one warning), against a real server;
// without it, or with a wrong one, the run goes on, says once what to fix,
// and leaves the records in the spool for a run with the right one; a password file that cannot be read refuses the command line
// (exit 2) naming the file. No password shows on stderr, in the summary
// (export_dropped's key) or in the spool's directory names.
func TestExportClickHousePassword(t *testing.T) {
	ch := servers.StartClickHouse(t)
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "clickhouse-password")
	if err := os.WriteFile(pwFile, []byte(servers.ClickHousePassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const wrongPW = "Wrong-Pw-cli"
	user := "clickhouse://" + servers.ClickHouseUser
	at := "@" + ch.Addr + "/cli"
	dest := "clickhouse://" + ch.Addr + "/cli"
	for i, tc := range []struct {
		name   string
		url    string
		env    string // FLOWDEDUP_CLICKHOUSE_PASSWORD; "" unset
		ok     bool
		warned bool
	}{
		{"password_file over a wrong environment", user + at + "?password_file=" + pwFile, wrongPW, true, false},
		{"environment", user + at, servers.ClickHousePassword, true, false},
		{"in the URL", user + ":" + servers.ClickHousePassword + at, "", true, true},
		{"none", user + at, "", false, false},
		{"wrong in the URL", user + ":" + wrongPW + at, servers.ClickHousePassword, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(clickhouse.PasswordEnv, tc.env)
			}
			observer := fmt.Sprintf("r%d", i)
			summary := filepath.Join(t.TempDir(), "summary.jsonl")
			spool := filepath.Join(t.TempDir(), "spool")
			code, _, errs := run("replay", "--key", "src", "--filter", "exact", "--out", os.DevNull, "--summary", summary,
				"--observer", observer, "--export", tc.url, "--spool", spool, "--export-drain", "2s", pcapPath("small.pcap"))
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errs)
			}
			s := readSummaries(t, summary)
			if len(s) != 1 {
				t.Fatalf("%d summaries, want 1", len(s))
			}
			rows := "0" // no database yet when nothing was written
			if tc.ok || strings.TrimSpace(ch.Query(t, "EXISTS TABLE cli.flows")) == "1" {
				rows = strings.TrimSpace(ch.Query(t, "SELECT count() FROM cli.flows WHERE observer = '"+observer+"'"))
			}
			if tc.ok {
				if rows != fmt.Sprint(s[0].Distinct) || s[0].ExportDropped[dest]["rejected"] != 0 {
					t.Errorf("%s rows in flows, want %d; export_dropped %v\n%s", rows, s[0].Distinct, s[0].ExportDropped, errs)
				}
			} else {
				// A refused login waits for the operator: nothing is
				// dropped, everything stays in the spool.
				kept := fmt.Sprintf("export %s: sent 0 records and 0 window summaries, dropped 0, %d records and 1 window summaries left in the spool", dest, s[0].Distinct)
				if rows != "0" || !strings.Contains(errs, kept) {
					t.Errorf("%s rows in flows, want 0; stderr lacks %q:\n%s", rows, kept, errs)
				}
				if !strings.Contains(errs, "assword") || !strings.Contains(errs, "for user "+servers.ClickHouseUser) || !strings.Contains(errs, "password_file") {
					t.Errorf("stderr does not give the server's reason:\n%s", errs)
				}
			}
			warning := "flowdedup: export " + dest + ": warning: " + export.ExposedPassword
			if n := strings.Count(errs, warning); n != map[bool]int{true: 1}[tc.warned] {
				t.Errorf("the warning %d times, want %v:\n%s", n, tc.warned, errs)
			}
			shown := errs + string(mustReadFile(t, summary))
			filepath.WalkDir(spool, func(p string, _ fs.DirEntry, err error) error {
				shown += p + "\n"
				return err
			})
			for _, pw := range []string{servers.ClickHousePassword, wrongPW} {
				if strings.Contains(shown, pw) {
					t.Errorf("a password shows on stderr, in the summary or in the spool:\n%s", shown)
				}
			}
		})
	}

	// An unreadable password file is a usage error naming it, before
	// anything runs.
	for _, bad := range []string{filepath.Join(dir, "none"), dir} {
		code, _, errs := run("replay", "--out", os.DevNull, "--export", user+at+"?password_file="+bad, pcapPath("small.pcap"))
		if code != ExitUsage || !strings.Contains(errs, `password file "`+bad+`"`) || !strings.Contains(errs, dest) {
			t.Errorf("password_file %s: exit %d, want %d naming the file and the destination: %s", bad, code, ExitUsage, errs)
		}
	}
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An --observer longer than a spool file holds is a usage error before
// anything starts.
func TestObserverTooLong(t *testing.T) {
	code, _, errs := run("replay", "--observer", strings.Repeat("r", 256), "--out", os.DevNull, pcapPath("small.pcap"))
	if code != ExitUsage || !strings.Contains(errs, "--observer is 256 bytes, at most 255") {
		t.Errorf("exit %d, stderr %q; want %d and the bound", code, errs, ExitUsage)
	}
	if code, _, errs := run("replay", "--observer", strings.Repeat("r", 255), "--out", os.DevNull, pcapPath("small.pcap")); code != ExitOK {
		t.Errorf("255 bytes: exit %d, stderr %q", code, errs)
	}
}

// What a real ClickHouse cannot store (records of 2107, past its DateTime)
// is rejected for good: with --spool the rejected batches are kept in the
// spool's rejected directory, as JSON lines a user reads, with errors.log
// saying why; the run says where, counts them as rejected, and exits 1.
func TestExportKeepsRejected(t *testing.T) {
	ch := servers.StartClickHouse(t)
	dir := t.TempDir()
	capture := filepath.Join(dir, "late.pcapng")
	if code, _, errs := run("gen", "--packets", "200", "--flows", "20", "--interfaces", "2", "--start", "2107-01-01T00:00:00Z", "-o", capture); code != ExitOK {
		t.Fatalf("gen: exit %d: %s", code, errs)
	}
	out := filepath.Join(dir, "out.jsonl")
	spool := filepath.Join(dir, "spool")
	t.Setenv(clickhouse.PasswordEnv, servers.ClickHousePassword)
	url := "clickhouse://" + servers.ClickHouseUser + "@" + ch.Addr + "/rejects"
	dest := "clickhouse://" + ch.Addr + "/rejects"
	code, _, errs := run("replay", "--key", "src", "--filter", "exact", "--out", out, "--export", url, "--spool", spool, "--export-drain", "5s", capture)
	if code != ExitError {
		t.Fatalf("exit %d, want %d: %s", code, ExitError, errs)
	}
	records := strings.Split(strings.TrimSpace(string(mustReadFile(t, out))), "\n")
	kept, err := filepath.Glob(filepath.Join(spool, "*", "rejected", "batch-*.jsonl"))
	if err != nil || len(kept) == 0 {
		t.Fatalf("no rejected batch kept in %s: %v\n%s", spool, err, errs)
	}
	var got []string
	for _, f := range kept {
		got = append(got, strings.Split(strings.TrimSpace(string(mustReadFile(t, f))), "\n")...)
	}
	slices.Sort(got)
	slices.Sort(records)
	if !slices.Equal(got, records) {
		t.Errorf("the rejected files hold %d records, want the run's %d, as --out wrote them", len(got), len(records))
	}
	log := string(mustReadFile(t, filepath.Join(filepath.Dir(kept[0]), "errors.log")))
	if strings.Count(log, "\n") < len(kept) || !strings.Contains(log, filepath.Base(kept[0])+": batch ") {
		t.Errorf("errors.log:\n%s", log)
	}
	if !strings.Contains(errs, "export "+dest+": rejected batch") || !strings.Contains(errs, "kept for inspection in "+filepath.Dir(kept[0])) ||
		!strings.Contains(errs, fmt.Sprintf("%d records and window summaries were not delivered: %s %d (rejected %d)", len(records)+1, dest, len(records)+1, len(records)+1)) {
		t.Errorf("stderr does not say what was rejected, where it is kept, and how many were lost:\n%s", errs)
	}
}

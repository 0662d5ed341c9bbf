package cli

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/report"
)

// tsharkSpread returns, from tshark's dissection of file, each source's
// count of distinct destinations and each destination's count of
// distinct sources: the distinct (source, destination) pairs of the
// file (sort -u), counted per side.
func tsharkSpread(t *testing.T, file string) (bySrc, byDst map[netip.Addr]uint64) {
	t.Helper()
	pairs := map[[2]netip.Addr]bool{}
	for _, p := range tsharkAddrs(t, file) {
		pairs[p] = true
	}
	bySrc, byDst = map[netip.Addr]uint64{}, map[netip.Addr]uint64{}
	for p := range pairs {
		bySrc[p[0]]++
		byDst[p[1]]++
	}
	return bySrc, byDst
}

// topOf is the n hosts of largest count, equal counts in address order,
// from counts computed apart from flowdedup.
func topOf(counts map[netip.Addr]uint64, n int) []record.SpreadEntry {
	hosts := make([]netip.Addr, 0, len(counts))
	for a := range counts {
		hosts = append(hosts, a)
	}
	slices.SortFunc(hosts, func(a, b netip.Addr) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), a.Compare(b))
	})
	var top []record.SpreadEntry
	for _, a := range hosts[:min(n, len(hosts))] {
		top = append(top, record.SpreadEntry{Addr: a.String(), Distinct: counts[a]})
	}
	return top
}

// replaySummaries runs replay with args, the summaries to a file, and
// returns them.
func replaySummaries(t *testing.T, args ...string) []record.Summary {
	t.Helper()
	sum := filepath.Join(t.TempDir(), "summary.jsonl")
	var stderr bytes.Buffer
	code := Main(context.Background(), append([]string{"replay", "--out", os.DevNull, "--summary", sum}, args...), new(bytes.Buffer), &stderr)
	if code != ExitOK {
		t.Fatalf("replay %q: exit %d: %s", args, code, stderr.String())
	}
	f, err := os.Open(sum)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := report.ReadSummaries(f)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// TestReplaySpreadMatchesTshark: a capture gen writes with a scanner (one
// source to 400 destinations) and a SYN flood's victim (one destination
// from 1500 sources) among 1500 flows, some IPv6; replay --key pair
// --spread dst:3 --spread src:3 --filter exact --window 1h names the
// victim with its count of distinct sources and the scanner with its
// count of distinct destinations, as tshark counts them. With the
// default 1000 counters, the destinations (fewer than 1000) are counted
// exactly, the whole top 3 as tshark's; the sources (more than 1500) may
// overcount, but never undercount, by at most their error, and the
// scanner, which took its counter while counters were free, is exact.
// With --spread-counters 4000, room for every source, both top 3 are
// tshark's exactly, errors 0.
func TestReplaySpreadMatchesTshark(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tshark"); err != nil {
		testutil.SkipOrFail(t, "tshark not installed (Debian package tshark; .ci/run installs it)")
	}
	file := filepath.Join(t.TempDir(), "attacks.pcap")
	if code, _, errs := run("gen", "--packets", "10000", "--flows", "1500", "--ipv6", "0.2", "--scanner", "400", "--victim", "1500", "--seed", "5", "-o", file); code != ExitOK {
		t.Fatalf("gen: %s", errs)
	}
	bySrc, byDst := tsharkSpread(t, file)
	scanner, victim := netip.MustParseAddr("203.0.113.66"), netip.MustParseAddr("203.0.113.80")
	if bySrc[scanner] != 400 || byDst[victim] != 1500 {
		t.Fatalf("tshark counts the scanner's destinations %d and the victim's sources %d, want gen's 400 and 1500", bySrc[scanner], byDst[victim])
	}
	if len(byDst) >= 1000 || len(bySrc) <= 1000 {
		t.Fatalf("%d destinations, %d sources: the test wants fewer than 1000 of one and more of the other", len(byDst), len(bySrc))
	}
	base := []string{"--key", "pair", "--spread", "dst:3", "--spread", "src:3", "--filter", "exact", "--window", "1h", "--workers", "2", file}

	sums := replaySummaries(t, base...)
	if len(sums) != 1 || sums[0].Spread == nil {
		t.Fatalf("summaries %+v", sums)
	}
	sp := sums[0].Spread
	if want := topOf(byDst, 3); !slices.Equal(sp.Dst, want) {
		t.Errorf("dst spread %+v, tshark's top 3 %+v", sp.Dst, want)
	}
	if len(sp.Src) != 3 || sp.Src[0] != (record.SpreadEntry{Addr: "203.0.113.66", Distinct: 400}) {
		t.Errorf("src spread %+v: want the scanner first, with 400 and error 0", sp.Src)
	}
	for _, e := range sp.Src {
		tr := bySrc[netip.MustParseAddr(e.Addr)]
		if e.Distinct < tr || e.Distinct-e.Error > tr {
			t.Errorf("source %+v: tshark's count %d is outside [distinct-error, distinct]", e, tr)
		}
	}

	sums = replaySummaries(t, append([]string{"--spread-counters", "4000"}, base...)...)
	sp = sums[0].Spread
	if want := topOf(byDst, 3); !slices.Equal(sp.Dst, want) {
		t.Errorf("--spread-counters 4000: dst spread %+v, tshark's top 3 %+v", sp.Dst, want)
	}
	if want := topOf(bySrc, 3); !slices.Equal(sp.Src, want) {
		t.Errorf("--spread-counters 4000: src spread %+v, tshark's top 3 %+v", sp.Src, want)
	}
}

// TestSpreadUsage: a side the key has no address for, and garbage, are
// usage errors that say what is wanted.
func TestSpreadUsage(t *testing.T) {
	pcap := pcapPath("small.pcap")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--key", "src", "--spread", "dst"}, "--key src keys have no destination"},
		{[]string{"--key", "dst", "--spread", "src:3"}, "--key dst keys have no source"},
		{[]string{"--key", "pair", "--spread", "both"}, "want src[:N] or dst[:N]"},
		{[]string{"--key", "pair", "--spread", "src:0"}, "N must be a number from 1 to"},
		{[]string{"--key", "pair", "--spread", "dst:x"}, "N must be a number from 1 to"},
		{[]string{"--key", "pair", "--spread", "dst:"}, "N must be a number from 1 to"},
		{[]string{"--key", "pair", "--spread", "dst:1001"}, "N must be a number from 1 to 1000"},
		{[]string{"--key", "pair", "--spread", "src", "--spread", "src:3"}, "given twice"},
		{[]string{"--key", "pair", "--spread", "src:20", "--spread-counters", "10"}, "fewer counters than the 20 hosts"},
		{[]string{"--key", "pair", "--spread-counters", "10"}, "--spread-counters needs --spread"},
		{[]string{"--key", "pair", "--spread", "src", "--spread-counters", "99999999"}, "--spread-counters 99999999: give 1 to"},
	} {
		for _, cmd := range []string{"replay", "collect"} {
			args := append([]string{cmd}, tc.args...)
			if cmd == "replay" {
				args = append(args, pcap)
			} else {
				args = append(args, "--listen", "netflow://127.0.0.1:0")
			}
			code, _, errs := run(args...)
			if code != ExitUsage || !strings.Contains(errs, tc.want) {
				t.Errorf("%q: exit %d, stderr %q; want usage error with %q", args, code, errs, tc.want)
			}
		}
	}
	// run takes the flag too (checked before any capture opens).
	code, _, errs := run("run", "--key", "src", "--spread", "dst", "-i", "lo")
	if code != ExitUsage || !strings.Contains(errs, "--key src keys have no destination") {
		t.Errorf("run: exit %d, %q", code, errs)
	}
}

// TestReplaySpreadOffUnchanged: without --spread the summaries carry no
// spread member.
func TestReplaySpreadOffUnchanged(t *testing.T) {
	for _, s := range replaySummaries(t, "--key", "pair", "--window", "1m", pcapPath("windows.pcap")) {
		if s.Spread != nil {
			t.Fatalf("spread %+v without --spread", s.Spread)
		}
	}
}

// TestMergeDropsSpread: merge takes summaries with spread lists, gives
// the same groups as without them, and says on stderr that it left the
// lists out and why.
func TestMergeDropsSpread(t *testing.T) {
	dir := t.TempDir()
	replay := func(name string, extra ...string) string {
		p := filepath.Join(dir, name+".jsonl")
		args := append([]string{"replay", "--key", "pair", "--window", "1m", "--summary-sketch", "--observer", "r1", "--seed", "1",
			"--out", os.DevNull, "--summary", p}, extra...)
		if code, _, errs := run(append(args, pcapPath("windows.pcap"))...); code != ExitOK {
			t.Fatalf("replay: exit %d: %s", code, errs)
		}
		return p
	}
	with, without := replay("with", "--spread", "src:3", "--spread", "dst"), replay("without")
	codeW, outW, errsW := run("merge", with)
	codeP, outP, errsP := run("merge", without)
	if codeW != ExitOK || codeP != ExitOK {
		t.Fatalf("merge: exit %d (%s), %d (%s)", codeW, errsW, codeP, errsP)
	}
	if outW != outP {
		t.Errorf("merge with spreads:\n%s\nwithout:\n%s", outW, outP)
	}
	n := strings.Count(string(mustRead(t, with)), `"spread":`)
	if n == 0 || !strings.Contains(errsW, fmt.Sprintf("the spread lists of %d summaries were left out", n)) || strings.Contains(errsP, "spread") {
		t.Errorf("stderr with spreads %q (want the note for %d summaries), without %q", errsW, n, errsP)
	}
}

// --spread completes to its sides, on replay and collect.
func TestSpreadCompletion(t *testing.T) {
	for _, cmd := range []string{"replay", "collect"} {
		got := completions(t, cmd, "--spread", "")
		for _, w := range []string{"src", "dst"} {
			if !slices.Contains(got, w) {
				t.Errorf("%s --spread completes to %q, lacks %q", cmd, got, w)
			}
		}
	}
}

// TestReplaySpreadClickHouse: replay --spread --export clickhouse:// (the
// export's queue, which copies summaries) writes the spread table's rows
// equal to the summary file's lists, entry for entry.
func TestReplaySpreadClickHouse(t *testing.T) {
	t.Parallel()
	ch := servers.StartClickHouse(t)
	file := filepath.Join(t.TempDir(), "attacks.pcap")
	if code, _, errs := run("gen", "--packets", "5000", "--flows", "500", "--scanner", "300", "--victim", "500", "--duration", "2h", "--seed", "9", "-o", file); code != ExitOK {
		t.Fatalf("gen: %s", errs)
	}
	sums := replaySummaries(t, "--key", "pair", "--spread", "src:3", "--spread", "dst:4", "--filter", "exact", "--window", "1h",
		"--observer", "r1", "--export", "clickhouse://"+ch.Addr+"/sp", file)
	var want []string
	for _, s := range sums {
		for _, side := range []struct {
			name string
			list []record.SpreadEntry
		}{{"src", s.Spread.Src}, {"dst", s.Spread.Dst}} {
			for _, e := range side.list {
				want = append(want, fmt.Sprintf("r1\t%d\t%s\t%s\t%d\t%d\tpair", s.StartNs/1e9, side.name, e.Addr, e.Distinct, e.Error))
			}
		}
	}
	if len(sums) < 2 || len(want) != 7*len(sums) {
		t.Fatalf("%d summaries, %d spread entries: want 3 + 4 in each of 2 or more windows", len(sums), len(want))
	}
	if !slices.Contains(want, fmt.Sprintf("r1\t%d\tsrc\t203.0.113.66\t300\t0\tpair", sums[len(sums)-1].StartNs/1e9)) {
		t.Errorf("the scanner is not in the last window's list: %q", want)
	}
	got := strings.Split(strings.TrimSuffix(ch.Query(t, "SELECT observer, toUnixTimestamp(window), side, addr, distinct, error, kind FROM sp.spread FINAL FORMAT TabSeparated"), "\n"), "\n")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("spread rows:\n%s\nwant the summaries':\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestReplaySpreadShippedCaptures: on every shipped capture, as one
// window, with counters for every host, the top 5 of each side are those
// of tshark's distinct pairs, errors 0.
func TestReplaySpreadShippedCaptures(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tshark"); err != nil {
		testutil.SkipOrFail(t, "tshark not installed (Debian package tshark; .ci/run installs it)")
	}
	for _, name := range testPcaps {
		t.Run(name, func(t *testing.T) {
			file := pcapPath(name)
			bySrc, byDst := tsharkSpread(t, file)
			sums := replaySummaries(t, "--key", "pair", "--spread", "src:5", "--spread", "dst:5", "--spread-counters", "100000",
				"--filter", "exact", "--workers", "2", file)
			if len(sums) != 1 || sums[0].Spread == nil {
				t.Fatalf("summaries %+v", sums)
			}
			if want := topOf(bySrc, 5); !slices.Equal(sums[0].Spread.Src, want) {
				t.Errorf("src %+v, tshark's %+v", sums[0].Spread.Src, want)
			}
			if want := topOf(byDst, 5); !slices.Equal(sums[0].Spread.Dst, want) {
				t.Errorf("dst %+v, tshark's %+v", sums[0].Spread.Dst, want)
			}
		})
	}
}

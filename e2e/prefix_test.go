package e2e

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/internal/testutil/servers"
)

// Distinct /24s (and /64s) per hour, as docs/keys.md shows it:
//
//	flowdedup replay --key src --prefix 24,64 --window 1h --export clickhouse://127.0.0.1:PORT/nets --export ipfix://127.0.0.1:PORT testdata/pcaps/*.pcap
//
// ClickHouse's src column holds the records' networks, in CIDR text, once
// per network and hour, its kind column says src/24,64, and the per-hour
// uniqExact(src) of docs/keys.md is the exact count of networks of an
// exact replay; nfdump reads each network back with its prefix length.
func testPrefix(t *testing.T, ch *servers.ClickHouse) {
	col := servers.StartNfcapd(t)
	files, err := filepath.Glob(pcap("*.pcap"))
	if err != nil || len(files) < 5 {
		t.Fatalf("testdata captures: %v %v", files, err)
	}
	out := filepath.Join(t.TempDir(), "networks.jsonl")
	mustRun(t, append([]string{"replay", "--key", "src", "--prefix", "24,64", "--window", "1h",
		"--export", "clickhouse://" + ch.Addr + "/nets", "--export", "ipfix://" + col.Addr, "--out", out}, files...)...)
	recs := readRecords(t, out)

	perHour := map[string]map[string]bool{}
	var v4, v6 int
	for _, e := range exactRecords(t, append([]string{"--key", "src", "--prefix", "24,64", "--window", "1h"}, files...)...) {
		h := chDateTime(e.Window)
		if perHour[h] == nil {
			perHour[h] = map[string]bool{}
		}
		perHour[h][e.Src] = true
		switch {
		case strings.HasSuffix(e.Src, "/24") && !strings.Contains(e.Src, ":"):
			v4++
		case strings.HasSuffix(e.Src, "::/64"):
			v6++
		default:
			t.Fatalf("exact replay record %+v: not a /24 or a /64", e)
		}
	}
	if v4 == 0 || v6 == 0 {
		t.Fatalf("%d /24s and %d /64s: want both", v4, v6)
	}
	var want strings.Builder
	for _, h := range slices.Sorted(maps.Keys(perHour)) {
		fmt.Fprintf(&want, "%s\t%d\n", h, len(perHour[h]))
	}
	got := ch.Query(t, "SELECT toStartOfHour(window) AS hour, uniqExact(src) FROM nets.flows WHERE kind = 'src/24,64' GROUP BY hour ORDER BY hour")
	if got != want.String() {
		t.Errorf("distinct networks per hour: ClickHouse says\n%swant\n%s", got, want.String())
	}
	var recSrcs []string
	for _, r := range recs {
		recSrcs = append(recSrcs, r.Src)
	}
	slices.Sort(recSrcs)
	chSrcs := lines(ch.Query(t, "SELECT src FROM nets.flows ORDER BY src"))
	if !slices.Equal(chSrcs, recSrcs) {
		t.Errorf("ClickHouse src column: %d rows, the run's records %d; first rows %q, records %q",
			len(chSrcs), len(recSrcs), chSrcs[:min(3, len(chSrcs))], recSrcs[:min(3, len(recSrcs))])
	}
	if got := ch.Query(t, "SELECT DISTINCT kind FROM nets.flows"); got != "src/24,64\n" {
		t.Errorf("kind column: %q, want src/24,64", got)
	}
	if got := ch.Query(t, "SELECT DISTINCT kind FROM nets.windows"); got != "src/24,64\n" {
		t.Errorf("windows kind column: %q, want src/24,64", got)
	}

	st := col.Stop(t)
	if st.SequenceErrors != 0 || st.BadPackets != 0 || st.Dropped != 0 {
		t.Errorf("nfcapd counted %+v", st)
	}
	sameFlows(t, col.Flows(t), recs)
}

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/collect/collecttest"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
)

// TestPrometheusScrapesCollect: a real Prometheus, started with a
// configuration of the test's (scraping every second, the shipped rules of
// deploy/prometheus loaded), scrapes a running flowdedup collect fed IPFIX
// on loopback. The records' times are in 2020, far behind the wall clock,
// so collect windows them by their own times: 37 sources (10.1.0.1 to
// 10.1.0.37, three flows each) start in the minute from
// 2020-01-01T00:00:00Z, then one flow two minutes later, past that
// window's end and its lateness (one window), closes it. Prometheus must
// then see flowdedup_window_distinct{kind="src"} 37, equal to the
// distinct of the last summary in collect's --summary file; the
// exporter's flowdedup_collect_exporter_window_distinct equal to that
// summary's collect.exporters[0].distinct (37); the window's end,
// 2020-01-01T00:01:00Z; the shipped recording rule
// flowdedup:window_distinct_sources 37; and the open window's count 1
// (10.1.9.9).
func TestPrometheusScrapesCollect(t *testing.T) {
	t.Parallel()
	const sources = 37
	c := startCollector(t, []string{"netflow://127.0.0.1:0"}, "--key", "src", "--window", "1m", "--filter", "exact", "--metrics", "127.0.0.1:0")
	m := regexp.MustCompile(`metrics on http://(\S+)/metrics`).FindStringSubmatch(c.stderr())
	if m == nil {
		t.Fatalf("collect names no metrics address:\n%s", c.stderr())
	}
	target := m[1]

	rules, err := filepath.Abs(filepath.Join("..", "deploy", "prometheus", "flowdedup.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	prom := servers.StartPrometheus(t, "collect", []string{target}, rules)
	defer func() {
		if t.Failed() {
			t.Logf("prometheus:\n%s\ncollect:\n%s", prom.Log(), c.stderr())
		}
	}()

	t0 := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	var flows []collecttest.Flow
	for i := range 3 * sources {
		start := t0.Add(time.Duration(i) * 500 * time.Millisecond)
		flows = append(flows, collecttest.Flow{
			Src: netip.AddrFrom4([4]byte{10, 1, 0, byte(1 + i%sources)}), Dst: netip.MustParseAddr("10.2.0.1"),
			Proto: 6, SrcPort: uint16(40000 + i), DstPort: 443, Start: start, End: start.Add(time.Second), Packets: 3, Bytes: 180,
		})
	}
	e := collecttest.Exporter{Version: 10, Domain: 3, Absolute: true, Boot: t0.Add(-time.Hour)}
	conn, err := net.Dial("udp", c.addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(msgs [][]byte) {
		for _, msg := range msgs {
			if _, err := conn.Write(msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(e.Encode(t0.Add(time.Minute), flows, 20))
	// Every record of the first window decoded before the one that
	// closes it is sent: on loopback a datagram is lost only to a full
	// receive buffer, which the count would show.
	testutil.WaitFor(t, "collect to decode the first window's records", 2*time.Minute, func() bool {
		return strings.Contains(scrapeText(t, "http://"+target+"/metrics"), fmt.Sprintf("\nflowdedup_collect_records_total{filter=\"exact\"} %d\n", len(flows)))
	})
	late := t0.Add(2*time.Minute + time.Second)
	send(e.Encode(late.Add(time.Second), []collecttest.Flow{{Src: netip.MustParseAddr("10.1.9.9"), Dst: netip.MustParseAddr("10.2.0.1"),
		Proto: 6, SrcPort: 40000, DstPort: 443, Start: late, End: late.Add(time.Second), Packets: 1, Bytes: 60}}, 20))

	var summaries []summaryGauges
	testutil.WaitFor(t, "the first window's summary in collect's --summary file", 2*time.Minute, func() bool {
		summaries = readSummaryGauges(t, c.summary)
		return len(summaries) == 1
	})
	last := summaries[len(summaries)-1]
	if last.Distinct != sources || len(last.Collect.Exporters) != 1 || last.Collect.Exporters[0].Distinct != sources {
		t.Fatalf("summary: distinct %d, exporters %+v; want %d sources from one exporter", last.Distinct, last.Collect.Exporters, sources)
	}

	s := prom.WaitSample(t, `flowdedup_window_distinct`)
	if s.Value != float64(last.Distinct) || s.Labels["kind"] != "src" || s.Labels["job"] != "collect" || s.Labels["filter"] != "exact" {
		t.Errorf("prometheus: flowdedup_window_distinct%v %v, want {kind=src,job=collect,filter=exact} %d (the summary's distinct)", s.Labels, s.Value, last.Distinct)
	}
	ex := last.Collect.Exporters[0]
	s = prom.WaitSample(t, `flowdedup_collect_exporter_window_distinct`)
	if s.Value != float64(ex.Distinct) || s.Labels["exporter"] != ex.Exporter || s.Labels["exporter"] != "127.0.0.1#3" || s.Labels["protocol"] != "ipfix" {
		t.Errorf("prometheus: flowdedup_collect_exporter_window_distinct%v %v, want {exporter=127.0.0.1#3,protocol=ipfix} %d (the summary's)", s.Labels, s.Value, ex.Distinct)
	}
	end, err := time.Parse(time.RFC3339, last.WindowEnd)
	if err != nil {
		t.Fatal(err)
	}
	if s = prom.WaitSample(t, `flowdedup_window_end_timestamp_seconds`); s.Value != float64(end.Unix()) || !end.Equal(t0.Add(time.Minute)) {
		t.Errorf("prometheus: flowdedup_window_end_timestamp_seconds %v, the summary's window_end %s, want %s", s.Value, last.WindowEnd, t0.Add(time.Minute).Format(time.RFC3339))
	}
	if s = prom.WaitSample(t, `flowdedup:window_distinct_sources`); s.Value != sources {
		t.Errorf("prometheus: the recording rule flowdedup:window_distinct_sources %v, want %d", s.Value, sources)
	}
	if s = prom.WaitSample(t, `flowdedup_window_distinct_estimate`); s.Value != float64(last.DistinctEstimate) {
		t.Errorf("prometheus: flowdedup_window_distinct_estimate %v, the summary's distinct_estimate %d", s.Value, last.DistinctEstimate)
	}
	// The open window's key is counted by the time its record closed the
	// first window: wait for the scrape that shows it.
	testutil.WaitFor(t, "prometheus to have flowdedup_open_window_distinct 1", 2*time.Minute, func() bool {
		got := prom.Query(t, `flowdedup_open_window_distinct{kind="src"} == 1`)
		return len(got) == 1
	})
	c.stop(t)
}

// summaryGauges is what TestPrometheusScrapesCollect reads of a summary.
type summaryGauges struct {
	WindowEnd        string `json:"window_end"`
	Distinct         uint64 `json:"distinct"`
	DistinctEstimate uint64 `json:"distinct_estimate"`
	Collect          struct {
		Exporters []struct {
			Exporter string `json:"exporter"`
			Protocol string `json:"protocol"`
			Distinct uint64 `json:"distinct"`
		} `json:"exporters"`
	} `json:"collect"`
}

// readSummaryGauges reads the summaries written so far; a last line not
// yet whole is left for the next read.
func readSummaryGauges(t *testing.T, path string) []summaryGauges {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	text := string(b)
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[:i+1]
	} else {
		text = ""
	}
	var out []summaryGauges
	for _, l := range lines(text) {
		var s summaryGauges
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("%s: %q: %v", path, l, err)
		}
		out = append(out, s)
	}
	return out
}

// scrapeText returns the exposition at url, "" while it cannot be read.
func scrapeText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return ""
	}
	return string(b)
}

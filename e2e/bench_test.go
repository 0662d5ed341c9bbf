package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil/servers"
)

// BenchmarkReplayExport measures what --export adds to a replay's wall
// time (issue 9 item 7): the README's 1M-packet capture (gen --packets
// 1000000 --flows 100000 --zipf 1.0 --ipv6 0.2 --duration 600s --seed 42),
// 5-tuple keys, replayed by the flowdedup binary with --out /dev/null
// alone, and with --export ipfix:// to nfcapd and --export clickhouse://
// to clickhouse-server, both started by the benchmark on loopback. Each
// iteration runs the three in turn, so that a machine whose load drifts
// affects them alike (interleaved, A B C A B C ...); the wall time of a
// run includes its start and the export's drain at exit, as a user
// waits for both.
//
// Metrics per run: null-ms, ipfix-ms, clickhouse-ms, and the export's
// cost over --out /dev/null alone, ipfix-%, clickhouse-%. Run it with a
// count of iterations, e.g.:
//
//	go test -run '^$' -bench ReplayExport -benchtime 10x ./e2e/
func BenchmarkReplayExport(b *testing.B) {
	b.ReportAllocs()
	ch := servers.StartClickHouse(b)
	col := servers.StartNfcapd(b)
	capture := gen(b, b.TempDir(), "bench.pcap", "--packets", "1000000", "--flows", "100000", "--zipf", "1.0", "--ipv6", "0.2",
		"--duration", "600s", "--seed", "42")
	variants := []struct {
		metric string
		args   []string
	}{
		{"null-ms", nil},
		{"ipfix-ms", []string{"--export", "ipfix://" + col.Addr}},
		{"clickhouse-ms", []string{"--export", "clickhouse://" + ch.Addr + "/bench"}},
	}
	base := []string{"replay", "--key", "5tuple", "--seed", "1", "--out", os.DevNull, capture}
	mustRun(b, base...) // the capture in the page cache, the binary built
	total := make([]time.Duration, len(variants))
	cpu := make([]time.Duration, len(variants))
	var server time.Duration // the ClickHouse server's CPU in the clickhouse runs
	runs := 0
	for b.Loop() {
		for i, v := range variants {
			s0 := ch.CPUTime(b)
			start := time.Now()
			r := mustRun(b, append(append([]string{}, base...), v.args...)...)
			total[i] += time.Since(start)
			cpu[i] += r.cpu
			if v.metric == "clickhouse-ms" {
				server += ch.CPUTime(b) - s0
			}
		}
		runs++
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(runs) / 1e6 }
	for i, v := range variants {
		b.ReportMetric(ms(total[i]), v.metric)
	}
	// flowdedup's own CPU time per variant: what export costs the router,
	// apart from the server's work on the same cores.
	for i, v := range variants {
		b.ReportMetric(ms(cpu[i]), strings.TrimSuffix(v.metric, "-ms")+"-cpu-ms")
	}
	b.ReportMetric(ms(server), "clickhouse-server-cpu-ms")
	b.ReportMetric(100*(float64(total[1])/float64(total[0])-1), "ipfix-%")
	b.ReportMetric(100*(float64(total[2])/float64(total[0])-1), "clickhouse-%")
	b.ReportMetric(0, "ns/op") // an iteration is three runs: the metrics above say what each took
}

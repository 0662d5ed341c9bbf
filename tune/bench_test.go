package tune

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/gen"
)

// BenchmarkTune1M is issue 11's budget: tune on the 1M-packet capture of
// the README's replay figures (`flowdedup gen --packets 1000000 --flows
// 100000 --zipf 1.0 --ipv6 0.2 --duration 600s --seed 42`), 5-tuple keys,
// 1-minute windows, 64 KiB per shard, default workers and objective, must
// finish within 60 s with nothing cut by the budget. It reports the
// seconds of each phase. Run it with
//
//	go test -run '^$' -bench Tune1M -benchtime 1x ./tune/
func BenchmarkTune1M(b *testing.B) {
	path := filepath.Join(b.TempDir(), "1m.pcap")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if _, err := gen.Write(w, gen.Config{Packets: 1_000_000, Flows: 100_000, Zipf: 1.0, IPv6: 0.2, Duration: 600 * time.Second, Seed: 42}); err != nil {
		b.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var res *Result
	for b.Loop() {
		res, err = Run(context.Background(), Config{Samples: []string{path}, Key: flow.Key5Tuple, Window: time.Minute, Mem: "64KiB"})
		if err != nil {
			b.Fatal(err)
		}
		if s := res.Search; s.BudgetExceeded || s.Seconds > DefaultBudget.Seconds() {
			b.Fatalf("over the budget: %+v", s)
		}
	}
	s := res.Search
	b.ReportMetric(s.Seconds, "s/tune")
	b.ReportMetric(s.LoadSeconds, "read-s")
	b.ReportMetric(s.CoarseSeconds, "coarse-s")
	b.ReportMetric(s.RefineSeconds, "refine-s")
	b.ReportMetric(float64(s.Coarse), "coarse-filters")
	b.ReportMetric(float64(s.Refined), "refined-filters")
}

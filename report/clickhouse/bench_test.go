package clickhouse_test

import (
	"strconv"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/report"
)

// BenchmarkRecords: encoding and inserting batches of 5-tuple records
// (IPv4 and IPv6) into a real server, one INSERT per batch, as
// delivery.Queue calls it. rows/s is the figure to read.
func BenchmarkRecords(b *testing.B) {
	ch := testutil.StartClickHouse(b)
	for _, size := range []int{1000, 10000} {
		b.Run(sizeName(size), func(b *testing.B) {
			e := newExporter(b, ch.Addr, "bench", flow.Key5Tuple, "bench")
			batch := &report.Batch{Records: records(flow.Key5Tuple, size, 0)}
			if err := e.Records(batch); err != nil { // create the tables
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				batch.ID++
				if err := e.Records(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

func sizeName(n int) string { return strconv.Itoa(n) + "rows" }

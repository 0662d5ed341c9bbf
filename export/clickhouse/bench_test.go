package clickhouse_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/export/clickhouse"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/record"
)

// BenchmarkRecords: encoding and inserting batches of 5-tuple records
// (IPv4 and IPv6) into a real server, one INSERT per batch, as
// export.Queue calls it, without and with gzip (Config.Compression).
// Metrics: rows/s (wall, the server's work included), client-ns/row (this
// process's CPU, user and system: encoding, compressing, sending; the
// server runs in another process), server-ns/row (the server's CPU), and
// bytes/row on the wire (the insert bodies).
func BenchmarkRecords(b *testing.B) {
	ch := testutil.StartClickHouse(b)
	for _, compression := range []string{"", clickhouse.CompressionGzip} {
		for _, size := range []int{1000, 10000} {
			name := sizeName(size) + "/" + cmpName(compression)
			b.Run(name, func(b *testing.B) {
				e, err := clickhouse.New(clickhouse.Config{Address: ch.Addr, Database: "bench", Kind: flow.Key5Tuple, Observer: "bench",
					Timeout: 30 * time.Second, Compression: compression})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				batch := &record.Batch{Records: records(flow.Key5Tuple, size, 0)}
				if err := e.Records(batch); err != nil { // create the tables
					b.Fatal(err)
				}
				before, server0 := e.Stats(), ch.CPUTime(b)
				cpu0 := selfCPU()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					batch.ID++
					if err := e.Records(batch); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				rows := float64(b.N * size)
				b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
				b.ReportMetric(float64(selfCPU()-cpu0)/rows, "client-ns/row")
				b.ReportMetric(float64(ch.CPUTime(b)-server0)/rows, "server-ns/row")
				b.ReportMetric(float64(e.Stats().InsertBytes-before.InsertBytes)/rows, "bytes/row")
			})
		}
	}
}

// BenchmarkTableDesign: the flows table of the earlier design (MergeTree,
// sorted by window, observer, src, dst) against today's
// (ReplacingMergeTree, sorted by every column that says what was seen):
// inserts of 1M 5-tuple rows in batches of 65536, as a replay sends them.
// Metrics: rows/s inserted (wall), server-ns/row (the server's CPU for the
// inserts), and disk-bytes/row of the table's active parts once merged
// (OPTIMIZE ... FINAL).
func BenchmarkTableDesign(b *testing.B) {
	ch := testutil.StartClickHouse(b)
	const rows, batchSize = 1 << 20, 1 << 16
	recs := trafficRecords(rows)
	designs := []struct{ name, create string }{
		{"MergeTree-window-observer-src-dst", "ENGINE = MergeTree PARTITION BY toYYYYMM(`window`) ORDER BY (`window`, `observer`, `src`, `dst`)"},
		{"ReplacingMergeTree-all-seen", ""}, // made by the Destination
	}
	for _, d := range designs {
		b.Run(d.name, func(b *testing.B) {
			var insert time.Duration
			var server time.Duration
			var disk float64
			for b.Loop() {
				designDBs++
				db := fmt.Sprintf("design%d", designDBs)
				if d.create != "" {
					ch.Query(b, "CREATE DATABASE "+db)
					ch.Query(b, "CREATE TABLE "+db+".flows (`observer` String, `window` DateTime('UTC'), `ts` DateTime('UTC'), `ts_ns` UInt32, "+
						"`key` String, `src` String, `dst` String, `proto` UInt8, `sport` UInt16, `dport` UInt16, `kind` String, `batch` UInt64) "+d.create)
				}
				e, err := clickhouse.New(clickhouse.Config{Address: ch.Addr, Database: db, Kind: flow.Key5Tuple, Observer: "bench", Timeout: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				if err := e.Records(&record.Batch{ID: 1, Records: recs[:1]}); err != nil { // the tables
					b.Fatal(err)
				}
				s0, start := ch.CPUTime(b), time.Now()
				for at := 1; at < rows; at += batchSize {
					if err := e.Records(&record.Batch{ID: uint64(at), Records: recs[at:min(at+batchSize, rows)]}); err != nil {
						b.Fatal(err)
					}
				}
				insert += time.Since(start)
				server += ch.CPUTime(b) - s0
				e.Close()
				ch.Query(b, "OPTIMIZE TABLE "+db+".flows FINAL")
				bytes, err := strconv.ParseFloat(strings.TrimSpace(ch.Query(b, "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = '"+db+"' AND table = 'flows'")), 64)
				if err != nil {
					b.Fatal(err)
				}
				disk += bytes / rows
			}
			n := float64(b.N)
			b.ReportMetric(n*rows/insert.Seconds(), "rows/s")
			b.ReportMetric(float64(server)/(n*rows), "server-ns/row")
			b.ReportMetric(disk/n, "disk-bytes/row")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// designDBs numbers the databases of BenchmarkTableDesign.
var designDBs int

// trafficRecords returns n records of 5-tuples as traffic has them: 20000
// hosts (a fifth IPv6) drawn with a skew towards the first, random
// ports, over 10 one-minute windows in time order.
func trafficRecords(n int) []record.Record {
	rng := rand.New(rand.NewPCG(19, 2))
	hosts := make([]netip.Addr, 20000)
	for i := range hosts {
		if i%5 == 0 {
			var a [16]byte
			a[0], a[1] = 0x20, 0x01
			binary.BigEndian.PutUint64(a[8:], rng.Uint64())
			hosts[i] = netip.AddrFrom16(a)
		} else {
			hosts[i] = netip.AddrFrom4([4]byte{10, byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))})
		}
	}
	host := func(v6 bool) netip.Addr {
		for {
			h := hosts[int(float64(len(hosts))*rng.Float64()*rng.Float64())] // skewed to the first
			if h.Is6() == v6 {
				return h
			}
		}
	}
	const start = int64(1767225600e9) // 2026-01-01
	recs := make([]record.Record, n)
	for i := range recs {
		v6 := rng.IntN(5) == 0
		ts := start + int64(i)*int64(600e9)/int64(n)
		w := ts / 60e9 * 60e9
		recs[i] = record.Record{
			Key:    flow.MakeKey(flow.Key5Tuple, host(v6), host(v6), []uint8{6, 17, 6, 6}[rng.IntN(4)], uint16(1024+rng.IntN(64000)), []uint16{443, 80, 53, 8443}[rng.IntN(4)]),
			TimeNs: ts, WindowNs: w, WindowEndNs: w + 60e9,
		}
	}
	return recs
}

func sizeName(n int) string { return strconv.Itoa(n) + "rows" }

func cmpName(c string) string {
	if c == "" {
		return "none"
	}
	return c
}

// selfCPU returns this process's CPU time so far, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package clickhouse_test

import (
	"slices"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/export/clickhouse"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/record"
)

// With compression=gzip in the URL, inserts go gzipped (Content-Encoding:
// gzip) and the server stores the same rows as without; a retry's
// read-back still finds what landed, so a batch given again adds nothing.
func TestGzipInserts(t *testing.T) {
	ch := testutil.StartClickHouse(t)
	u, err := clickhouse.ParseURL("clickhouse://" + ch.Addr + "/gz?compression=gzip")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := u.Config(clickhouse.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Compression != clickhouse.CompressionGzip {
		t.Fatalf("Config.Compression %q, want gzip", cfg.Compression)
	}
	cfg.Kind, cfg.Observer, cfg.Timeout = flow.Key5Tuple, "z", 10*time.Second
	e, err := clickhouse.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var want []string
	for id := uint64(1); id <= 3; id++ {
		recs := records(flow.Key5Tuple, 2000, int(id)*2000)
		if err := e.Records(&record.Batch{ID: id, Records: recs}); err != nil {
			t.Fatal(err)
		}
		want = append(want, wantRows(t, flow.Key5Tuple, "z", id, recs)...)
	}
	again := &record.Batch{ID: 3, Records: records(flow.Key5Tuple, 2000, 6000), Retry: true}
	if err := e.Records(again); err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	diffRows(t, readFlows(t, ch, "gz"), want)
	if st := e.Stats(); st.Rows != 6000 || st.RowsFound != 2000 {
		t.Errorf("stats %+v: want 6000 rows inserted, 2000 found on the retry", st)
	}
}

package clickhouse_test

import (
	"slices"
	"testing"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
	"github.com/flowdedup/flowdedup/record"
)

// A batch of many chunks' rows (a first attempt, streamed as the
// transport reads it) lands whole, every row as the jsonl writer prints
// it, and batches of two observers in turn keep theirs.
func TestStreamedInsert(t *testing.T) {
	ch := servers.StartClickHouse(t)
	e := newDestination(t, ch.Addr, "stream", flow.Key5Tuple, "r")
	recs := records(flow.Key5Tuple, 20000, 1) // about 2.4 MB of rows: 37 chunks of 64 KiB
	if err := e.Records(&record.Batch{ID: 5, Records: recs}); err != nil {
		t.Fatal(err)
	}
	other := records(flow.Key5Tuple, 3000, 2)
	if err := e.Records(&record.Batch{ID: 6, Records: other, Observer: "spooled-by-r0"}); err != nil {
		t.Fatal(err)
	}
	want := append(wantRows(t, flow.Key5Tuple, "r", 5, recs), wantRows(t, flow.Key5Tuple, "spooled-by-r0", 6, other)...)
	got := readFlows(t, ch, "stream")
	slices.Sort(want)
	diffRows(t, got, want)
	if st := e.Stats(); st.Rows != 23000 || st.Batches != 2 || st.InsertBytes < 23000*60 {
		t.Errorf("stats %+v: want 23000 rows in 2 batches, and their bytes", st)
	}
}

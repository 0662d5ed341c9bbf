package export

import (
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/report"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestExportCollector: a Queue whose destination hangs shows what it holds
// and what it dropped, and that it is not failing (no attempt failed).
func TestExportCollector(t *testing.T) {
	sink := &fakeSink{gate: make(chan struct{})}
	defer close(sink.gate)
	q := newTestQueue(t, sink, QueueConfig{BatchSize: 10, MaxQueued: 20, BatchAge: time.Hour, DrainTimeout: time.Millisecond})
	defer q.Close()
	q.Records(&record.Batch{Records: genRecords(0, 25)})
	c := NewCollector([]*Queue{q})
	want := `
# HELP flowdedup_export_dropped_total Records and window summaries an export destination did not get, by reason.
# TYPE flowdedup_export_dropped_total counter
flowdedup_export_dropped_total{dest="fake://dest",reason="queue_full"} 5
flowdedup_export_dropped_total{dest="fake://dest",reason="rejected"} 0
flowdedup_export_dropped_total{dest="fake://dest",reason="shutdown"} 0
flowdedup_export_dropped_total{dest="fake://dest",reason="spool_corrupt"} 0
flowdedup_export_dropped_total{dest="fake://dest",reason="spool_full"} 0
# HELP flowdedup_export_queued Records waiting in memory for an export destination.
# TYPE flowdedup_export_queued gauge
flowdedup_export_queued{dest="fake://dest"} 20
# HELP flowdedup_export_sent_total Distinct-flow records an export destination took.
# TYPE flowdedup_export_sent_total counter
flowdedup_export_sent_total{dest="fake://dest"} 0
# HELP flowdedup_export_sent_windows_total Window summaries an export destination took.
# TYPE flowdedup_export_sent_windows_total counter
flowdedup_export_sent_windows_total{dest="fake://dest"} 0
# HELP flowdedup_export_spooled Records waiting in the spool for an export destination.
# TYPE flowdedup_export_spooled gauge
flowdedup_export_spooled{dest="fake://dest"} 0
# HELP flowdedup_export_up Whether the last attempt to deliver to an export destination succeeded (1) or it is failing (0).
# TYPE flowdedup_export_up gauge
flowdedup_export_up{dest="fake://dest"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c, report.NewCollector(func() pipeline.Stats { return pipeline.Stats{} }))
	if _, err := reg.Gather(); err != nil {
		t.Errorf("pedantic gather: %v", err)
	}
}

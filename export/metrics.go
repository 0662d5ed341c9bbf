package export

import (
	"github.com/prometheus/client_golang/prometheus"
)

// NewCollector returns a Prometheus collector of the export Queues'
// counts (Queue.Stats), labelled by destination (Queue.Dest):
//
//	flowdedup_export_sent_total{dest}              records the destination took
//	flowdedup_export_sent_windows_total{dest}      window summaries the destination took
//	flowdedup_export_dropped_total{dest,reason}    records and summaries lost, by reason (DropReasons)
//	flowdedup_export_queued{dest}                  records held in memory now
//	flowdedup_export_spooled{dest}                 records in the spool now
//	flowdedup_export_up{dest}                      1 when the last attempt succeeded, 0 while failing
//
// Every reason of DropReasons is exported from the start, 0 until it
// occurs.
func NewCollector(queues []*Queue) prometheus.Collector {
	return &exportCollector{queues: queues}
}

type exportCollector struct {
	queues []*Queue
}

var (
	descExportSent        = newDesc("export_sent_total", "Distinct-flow records an export destination took.", "dest")
	descExportSentWindows = newDesc("export_sent_windows_total", "Window summaries an export destination took.", "dest")
	descExportDropped     = newDesc("export_dropped_total", "Records and window summaries an export destination did not get, by reason.", "dest", "reason")
	descExportQueued      = newDesc("export_queued", "Records waiting in memory for an export destination.", "dest")
	descExportSpooled     = newDesc("export_spooled", "Records waiting in the spool for an export destination.", "dest")
	descExportUp          = newDesc("export_up", "Whether the last attempt to deliver to an export destination succeeded (1) or it is failing (0).", "dest")
)

func (c *exportCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descExportSent, descExportSentWindows, descExportDropped, descExportQueued, descExportSpooled, descExportUp} {
		ch <- d
	}
}

func (c *exportCollector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range c.queues {
		st := q.Stats()
		ch <- prometheus.MustNewConstMetric(descExportSent, prometheus.CounterValue, float64(st.Sent), st.Dest)
		ch <- prometheus.MustNewConstMetric(descExportSentWindows, prometheus.CounterValue, float64(st.SentWindows), st.Dest)
		for _, reason := range DropReasons {
			ch <- prometheus.MustNewConstMetric(descExportDropped, prometheus.CounterValue, float64(st.Dropped[reason]), st.Dest, reason)
		}
		ch <- prometheus.MustNewConstMetric(descExportQueued, prometheus.GaugeValue, float64(st.Queued), st.Dest)
		ch <- prometheus.MustNewConstMetric(descExportSpooled, prometheus.GaugeValue, float64(st.Spooled), st.Dest)
		up := 0.0
		if st.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(descExportUp, prometheus.GaugeValue, up, st.Dest)
	}
}

func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("flowdedup_"+name, help, labels, nil)
}

package collect

import "github.com/prometheus/client_golang/prometheus"

// Metrics returns a Prometheus collector of c's Stats. Exporters are a
// label, bounded as the observers are (Config.MaxObservers, then one
// "other"), so whatever sends datagrams cannot grow the label set without
// bound.
func (c *Collector) Metrics() prometheus.Collector { return metrics{c} }

type metrics struct{ c *Collector }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("flowdedup_collect_"+name, help, labels, nil)
}

var (
	descDatagrams    = desc("datagrams_total", "Datagrams (TCP: IPFIX messages) received, rejected ones included.")
	descRecords      = desc("records_total", "Flow records and sFlow flow samples decoded.")
	descErrors       = desc("errors_total", "Datagrams, sets and records not keyed, by reason.", "reason")
	descKernelDrops  = desc("kernel_drops_total", "Datagrams the kernel dropped because a socket's receive buffer was full (SO_RXQ_OVFL).")
	descEvicted      = desc("evicted_total", "Exporter state dropped for room, by what: templates, domains, exporters, observers (idle), template_memory (--template-memory).", "what")
	descCounters     = desc("counter_samples_total", "sFlow counter samples, which carry no flows.")
	descConnections  = desc("connections_total", "IPFIX-over-TCP connections accepted.")
	descOverflow     = desc("observer_overflow_total", "Exporters counted as 'other' because the observer registry was full.")
	descShare        = desc("observer_share_overflow_total", "Exporters' domains counted as ADDR#other because their source address had its share of the observer registry.")
	descTmplMem      = desc("template_memory_bytes", "Memory the templates of every exporter and connection take, as counted against --template-memory.")
	descExpDatagrams = desc("exporter_datagrams_total", "Datagrams of an exporter's observation domain.", "exporter", "protocol")
	descExpRecords   = desc("exporter_records_total", "Flow records (sFlow: flow samples) of an exporter's observation domain.", "exporter", "protocol")
	descExpLost      = desc("exporter_lost_total", "What an exporter's sequence numbers say was lost in transit, in unit datagrams (NetFlow v9, sFlow) or records (v5, IPFIX).", "exporter", "protocol", "unit")
	descExpSampling  = desc("exporter_sampling_rate", "An exporter's 1-in-N packet sampling rate as it last said it (0: never said; counts from sampled traffic are lower bounds).", "exporter", "protocol")
)

// IPFIX over TCP: connections open, refused for the limit, closed by a
// timeout.
var (
	descConnsOpen    = desc("connections_open", "IPFIX-over-TCP connections open.")
	descConnsRefused = desc("connections_refused_total", "IPFIX-over-TCP connections closed at once because the listener had its limit (1024) open.")
	descConnsClosed  = desc("connections_closed_total", "IPFIX-over-TCP connections closed by a timeout, by reason: idle (no message began within --tcp-idle-timeout), stalled (a message began and was not whole within 30 s).", "reason")
	descTmplReleased = desc("templates_released_total", "Templates dropped, their bytes back in --template-memory, because their transport session ended, by reason: session_closed (its IPFIX-over-TCP connection closed), session_evicted (its UDP exporter's session was evicted).", "reason")
)

func (m metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDatagrams, descRecords, descErrors, descKernelDrops, descEvicted, descCounters,
		descConnections, descOverflow, descShare, descTmplMem, descExpDatagrams, descExpRecords, descExpLost, descExpSampling,
		descConnsOpen, descConnsRefused, descConnsClosed, descTmplReleased} {
		ch <- d
	}
}

func (m metrics) Collect(ch chan<- prometheus.Metric) {
	s := m.c.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(descDatagrams, s.Datagrams)
	counter(descRecords, s.Records)
	for _, r := range reasons {
		counter(descErrors, s.Errors[r], r)
	}
	counter(descKernelDrops, s.KernelDrops)
	counter(descEvicted, s.TemplatesEvicted, "templates")
	counter(descEvicted, s.DomainsEvicted, "domains")
	counter(descEvicted, s.ExportersEvicted, "exporters")
	counter(descCounters, s.CounterSamples)
	counter(descConnections, s.Connections)
	counter(descOverflow, s.ObserverOverflow)
	ch <- prometheus.MustNewConstMetric(descConnsOpen, prometheus.GaugeValue, float64(s.TCPOpen))
	counter(descConnsRefused, s.TCPRefused)
	counter(descConnsClosed, s.TCPIdleClosed, "idle")
	counter(descConnsClosed, s.TCPStalledClosed, "stalled")
	counter(descShare, s.ObserverShareOverflow)
	counter(descEvicted, s.ObserversEvicted, "observers")
	counter(descEvicted, s.TemplateMemoryEvicted, "template_memory")
	ch <- prometheus.MustNewConstMetric(descTmplMem, prometheus.GaugeValue, float64(s.TemplateMemory))
	counter(descTmplReleased, s.TemplatesSessionClosed, "session_closed")
	counter(descTmplReleased, s.TemplatesSessionEvicted, "session_evicted")
	for _, o := range s.Observers {
		if o.Datagrams == 0 {
			continue // "other" before anything overflowed
		}
		counter(descExpDatagrams, o.Datagrams, o.Name, o.Protocol)
		counter(descExpRecords, o.Records, o.Name, o.Protocol)
		counter(descExpLost, o.Lost, o.Name, o.Protocol, o.LostUnit)
		ch <- prometheus.MustNewConstMetric(descExpSampling, prometheus.GaugeValue, float64(o.SamplingRate), o.Name, o.Protocol)
	}
}

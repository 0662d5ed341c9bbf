package record

// CollectCounts is what flowdedup collect counted since the previous
// summary, in the summary of each window (Summary.Collect).
type CollectCounts struct {
	// Datagrams and Records received (TCP: IPFIX messages) and decoded.
	Datagrams uint64 `json:"datagrams"`
	Records   uint64 `json:"records"`
	// StartAhead counts the records whose flow start was more than
	// collect's --max-clock-ahead after their arrival (an exporter's
	// clock that is wrong):
	// they took their arrival as their time.
	StartAhead uint64 `json:"start_ahead"`
	// Errors counts the datagrams, sets and records not keyed, by reason
	// (collect.Reasons); {} when none.
	Errors map[string]uint64 `json:"errors"`
	// Exporters holds each exporter's observation domain that sent
	// something since the previous summary or has records in the window.
	Exporters []ExporterCounts `json:"exporters"`
}

// ExporterCounts are one exporter's observation domain's counts in a
// summary.
type ExporterCounts struct {
	ID       uint32 `json:"-"`        // its Record.ObserverID
	Exporter string `json:"exporter"` // its name, e.g. 192.0.2.1#0
	Protocol string `json:"protocol"` // netflow5, netflow9, ipfix or sflow
	// Datagrams and Records it sent since the previous summary.
	Datagrams uint64 `json:"datagrams"`
	Records   uint64 `json:"records"`
	// Distinct is how many records of the window are its: the keys it
	// saw in the window, each once (the Reporter counts them).
	Distinct uint64 `json:"distinct"`
	// Lost is what its sequence numbers said was lost in transit since
	// the previous summary, in LostUnit (datagrams or records).
	Lost     uint64 `json:"lost"`
	LostUnit string `json:"lost_unit,omitempty"`
	// SamplingRate is its 1-in-N packet sampling rate, 0 when it never
	// said: with sampling, its counts are lower bounds.
	SamplingRate uint32 `json:"sampling_rate"`
}

// Package netflow decodes NetFlow v5, NetFlow v9 (RFC 3954) and IPFIX
// (RFC 7011) messages into flow records, in place and without allocating
// per message or per record.
//
// A collector keeps one [Session] per transport session: per UDP exporter
// address, or per TCP connection. The Session holds what earlier messages
// announced: templates (bounded, the oldest evicted first), and per
// observation domain (v9 source ID, IPFIX observation domain ID, v5 engine
// type and ID) the sequence number expected next, the exporter's clock
// (IPFIX systemInitTimeMilliseconds) and its sampling rate.
//
//	var m netflow.Message
//	if err := m.Reset(datagram, sess); err != nil {
//		// counted in sess.Stats by reason; nothing to read
//	}
//	var r netflow.Record
//	for m.Next(&r) {
//		// r.Src, r.Dst, r.Proto, r.SrcPort, r.DstPort, r.StartNs
//	}
//
// Message reads its buffer in place: the buffer must not change until the
// last Next. Template and options sets are taken as they come; only flow
// records reach the caller. Whatever is wrong with a message (cut short, an
// unknown version, a data set whose template never came, a template with
// absurd fields) is counted in the Session's Stats by [Reason] and skipped:
// Reset and Next never panic and never allocate but to store a new template
// or a new observation domain.
//
// A record's start time is the flow's start in Unix nanoseconds: NetFlow
// v5 and v9 times are converted from the exporter's uptime with the
// header's clock (modulo 2^32 ms, as the uptime wraps); IPFIX absolute
// times are read as they are, flowStartSysUpTime with the
// systemInitTimeMilliseconds of the domain's options records, and
// flowStartDeltaMicroseconds from the export time. A record with no start
// time takes the message's export time.
//
// A Session is used by one goroutine at a time.
package netflow

// Package ipfix exports distinct-flow records to an IPFIX collector (RFC
// 7011) over UDP or TCP: the --export ipfix://HOST:PORT and
// ipfix+tcp://HOST:PORT destinations. [ParseURL] reads such a URL into a
// [Config]; [New] makes an [Destination], which is a record.Destination.
//
// Each record is one data record with the IANA elements of its key kind
// (source and destination address, protocol, ports), flowStartMilliseconds
// (152, the record's time) and flowEndMilliseconds (153, equal to the
// start); keys by network (--prefix) send each address with its prefix
// length (sourceIPv4PrefixLength 9, destinationIPv4PrefixLength 13,
// sourceIPv6PrefixLength 29, destinationIPv6PrefixLength 30). Template IDs
// are fixed: 256 to 265, one per key kind and address family, plus one per
// family for 5-tuples without ports; 266 to 275 the same for networks;
// 276 to 295 all of those for keys with a segment (flow.Key.Segment: inside
// VXLAN or Geneve), which send layer2SegmentId (351, unsigned64: 0x01, IANA's
// VxLAN type, in the top byte and the VNI in the low three, for Geneve's VNI
// too) after the key's fields. Records are
// gathered into one message per template, sized to the path MTU on UDP
// (Config.MessageSize overrides it). A template goes out with the first
// records that use it on a session, again on UDP every
// DefaultTemplateRefresh or DefaultTemplateRefreshMessages messages, and
// after an ICMP port unreachable. Each observation domain (a batch's
// record.Batch.Domain, else Config.ObservationDomain) has its own messages,
// sequence numbers and templates. Window summaries are not exported (IPFIX
// has no elements for them): Window flushes the window's records. What a
// collector receives, and what nfdump shows of it, is described for users
// in the repository's docs/export.md, "IPFIX".
//
// # Errors
//
// New fails only for a malformed Config: a collector that is down, or a
// name that does not resolve yet, is reported by the sends. A send that
// fails keeps its message whole and returns an error that does not wrap
// record.ErrRejected, so that a export.Queue retries; a batch given again
// (same Batch.ID) resumes after the records already taken. Records that are
// not keys of Config.Kind, or times before 1970, are rejected for good
// (record.ErrRejected) before anything of their batch is taken.
//
//   - TCP: a collector that closed the connection is found before writing
//     ([ErrPeerClosed]); connecting is tried at most once per
//     Config.ReconnectInterval (RFC 7011 section 10.4.4), and sends in
//     between return [ErrNotConnected]. On Linux a record counts as sent
//     (Stats.Records) once the collector's host acknowledged its bytes, and
//     Flush waits for that, up to Config.Timeout; messages not acknowledged
//     when a connection breaks go again, first, on the next.
//   - UDP: the first message after connecting, and after a refusal, waits
//     up to Config.RefusalWait for an ICMP port unreachable, and is kept
//     when one comes (an error wrapping ECONNREFUSED), so a collector that
//     is down at start costs no record.
//
// # Lifecycle
//
// A Destination is used from one goroutine at a time (record.Destination's
// rule) and starts none of its own: template refresh and reconnection
// happen in the calls. In steady state, Records and Flush allocate nothing.
// Close flushes and closes the connection; later calls return [ErrClosed].
//
// Example, with a export.Queue in front of it as `--export` does:
//
//	cfg, err := ipfix.ParseURL("ipfix://127.0.0.1:4739")
//	cfg.Kind, cfg.ObservationDomain = flow.Key5Tuple, 7
//	e, err := ipfix.New(cfg)
//	q, err := export.NewQueue("ipfix://127.0.0.1:4739", e, export.QueueConfig{Notices: os.Stderr})
//
// Why this package encodes IPFIX itself rather than use vmware/go-ipfix:
// docs/decisions/ipfix-exporter.md.
package ipfix

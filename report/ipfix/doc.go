// Package ipfix exports distinct-flow records to an IPFIX collector (RFC
// 7011) over UDP or TCP: the --export ipfix://HOST:PORT and
// ipfix+tcp://HOST:PORT destinations of DESIGN.md section 7. [ParseURL]
// reads such a URL, [New] makes an [Exporter], which is a report.Destination.
//
// # Records and templates
//
// Each record is one data record holding the fields of its key kind, with
// the IANA Information Elements sourceIPv4Address (8) or sourceIPv6Address
// (27), destinationIPv4Address (12) or destinationIPv6Address (28),
// protocolIdentifier (4), sourceTransportPort (7) and
// destinationTransportPort (11), flowStartMilliseconds (152), the
// record's time truncated to the millisecond, and flowEndMilliseconds
// (153), equal to the start: a record marks a flow's first packet and has
// no end of its own, and a collector that finds no end shows an invalid
// one (nfdump: 1970, and a duration of minus 2^31 days). There is one template per key
// kind and address family, and for 5-tuples one more per family without the
// ports, for the keys that have none (ICMP, other portless protocols,
// non-first fragments): a collector can tell "no port" from port 0, and
// nfdump shows such flows with ports 0, as it shows ICMP. Template IDs are
// fixed (256 to 265), the same in every run.
//
// # Messages
//
// Records are gathered into one message per template, so each message holds
// one data set. On UDP a message fills a packet of the path MTU: the kernel's
// IP_MTU or IPV6_MTU of the connected socket, read when it connects, less the
// IP and UDP headers (512-byte packets when unknown, RFC 7011 section
// 10.3.3); on TCP messages are up to 65535 bytes. Config.MessageSize
// overrides both. Flush, Window and Close send messages that are not full.
// The header carries the observation domain, the export time, and the
// sequence number: the data records of that domain sent before it in the
// transport session (RFC 7011 section 3.1), so that a collector counts what
// UDP lost (nfcapd does: "Sequence Errors").
//
// # Observation domains
//
// The domain of a batch's messages is the batch's own
// (report.Batch.Domain: the --observation-domain of the run that saw its
// records, kept by the spool when a later run sends it), else
// Config.ObservationDomain. A collector keys what it receives by exporter
// and domain (nfcapd makes each pair an exporter of its own), and RFC 7011
// scopes sequence numbers (section 3.1) and template IDs (section 3.4.1) to
// the transport session and the domain. So each domain has its own
// messages, its own sequence number, counting its data records from 0 on
// each session, and its own templates: the first message of a template's
// records in a domain carries the template, on TCP and UDP alike, whatever
// other domains sent before; UDP refresh and the resend after an ICMP port
// unreachable apply per domain too. Records of one batch are in one
// domain; a Flush sends the messages of every domain.
//
// A template goes out in the same message as the first records that use it
// on a transport session, so a message never arrives before its template. On
// TCP that is all (RFC 7011 section 8.3). On UDP, which loses and has no
// sessions, a template goes out again with the next message of its records
// once DefaultTemplateRefresh (30 s) has passed or every
// DefaultTemplateRefreshMessages (100) messages, and with the next message
// of every template after an ICMP port unreachable (the collector was not
// listening, so it missed them). Each message keeps room for its template
// set at its head, and whether the template goes in is decided when it is
// sent.
//
// # Failures
//
// New fails only for a malformed Config: a collector that is down, or a
// name that does not resolve yet, is reported by the sends. A send that
// fails keeps its message whole and returns an error that does not wrap
// report.ErrRejected, so that a delivery.Queue retries: the message goes out
// again with the next send, with the header, sequence number and template
// of the session it then goes on. A batch that failed part way and is given
// again (same Batch.ID) resumes after the records already taken, so a retry
// does not duplicate them. Failures by transport:
//
//   - TCP, what counts as sent: a message written is only in the local
//     kernel's buffer. On Linux a message's records count as sent
//     (Stats.Records) once the collector's host has acknowledged its last
//     byte (TCP_INFO tcpi_bytes_acked), and Flush waits, up to
//     Config.Timeout, until everything written is acknowledged, so that a
//     report.Queue counts a batch as delivered only then. When the
//     connection breaks, the messages not acknowledged are kept and go
//     again, first, on the next connection; Close counts them as not sent.
//     An acknowledgement is the host's: bytes the collector's kernel took
//     and the collector never read (it closed with data unread) are lost
//     without a sign, which IPFIX over TCP cannot tell (it has no
//     acknowledgement of its own). Elsewhere a message counts as sent when
//     written. Flush costs one round trip to the collector.
//   - TCP, collector closed the connection: found before writing (a
//     collector never sends, so a readable socket means end of stream), so
//     the message is not written into a dead connection. The send returns
//     ErrPeerClosed, and the next connects again and sends the templates.
//   - TCP, connection refused or timed out (Config.Timeout bounds connecting
//     and writing): the send fails; connecting is tried again at most once
//     per Config.ReconnectInterval, a minute by default, since RFC 7011
//     section 10.4.4 forbids more in an exporter's default configuration.
//     Sends in between return ErrNotConnected, wrapping the last error. A
//     connection that breaks after being up longer than that is retried at
//     once.
//   - UDP, ICMP port unreachable: a datagram to a port nobody listens on
//     is lost, and only the ICMP that comes back tells. So the first
//     message after the socket connects, and the first after a refusal,
//     waits up to Config.RefusalWait (DefaultRefusalWait, 50 ms) for that
//     ICMP: when it comes, the send returns an error wrapping
//     ECONNREFUSED and the message is kept, so a collector that is down at
//     start, or while the export Queue retries, costs no record. Once a
//     message got no refusal, sends do not wait; a collector that goes
//     down then loses the datagrams sent before its ICMP comes back, as
//     UDP loses (the next send returns ECONNREFUSED and keeps its
//     message), and the sequence numbers tell the collector so.
//
// Records that are not valid keys of Config.Kind, or times before 1970, are
// rejected for good (report.ErrRejected) before anything of their batch is
// taken. Window summaries are not exported: IPFIX has no standard elements
// for a window's counts, and --summary and ClickHouse carry them; Window
// flushes the window's records instead.
//
// # Lifecycle
//
// An Exporter is used from one goroutine at a time (report.Destination's rule) and
// starts none of its own: template refresh and reconnection happen in the
// calls. In steady state, Records and Flush allocate nothing. Close flushes
// and closes the connection; later calls return ErrClosed.
//
// # Why not a library
//
// DESIGN.md asks for a well-kept library where one does the job. The obvious
// one, github.com/vmware/go-ipfix (v0.13.0, its newest version the module
// proxy serves; the antrea-io name is not served), was measured against
// what this package must do, and fails it:
//
//   - Sequence numbers are wrong: its exporter adds a message's records to
//     the count before writing the header, so the first data message of 3
//     records carries 3, where RFC 7011 section 3.1 says 0 (measured with
//     its BufferedIPFIXExporter and ExportingProcess).
//   - Its UDP template refresh runs in a goroutine that reads the sequence
//     number the sending goroutine writes: `go test -race` reports a data
//     race in its process.go and buffered.go.
//   - InitExportingProcess dials the collector, so a TCP collector that is
//     down fails construction; nothing reconnects; a failed template refresh
//     closes the connection for good, with only a log line.
//   - It logs through klog to stderr from library code, and brings klog and
//     pion/dtls into the build.
//
// Its record path can be made allocation-free (reusing one record), but
// working around the rest means rewriting its exporting process. The
// encoder here is small because the templates are fixed: encoding/binary
// and copies from flow.Key's binary form, no reflection.
package ipfix

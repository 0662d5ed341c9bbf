// Package collect receives the flow records routers export — NetFlow v5,
// NetFlow v9 and IPFIX over UDP, IPFIX over TCP, sFlow v5 — and hands them
// to the pipeline as capture.Sources, so that `flowdedup collect` keys,
// deduplicates and reports them as replay and run do captured packets.
//
//	c, err := collect.Open(collect.Config{
//		Listeners: []collect.Listener{{Protocol: collect.NetFlow, Addr: "0.0.0.0:2055"}},
//		Key:       flow.KeySrc,
//	})
//	...
//	defer c.Close()
//	err = pipe.Run(ctx, c.Source())
//
// The Collector is one Source, read by one pipeline producer, whose
// windows follow the records' times (several producers would each keep the
// windows of their own exporters' clocks, and a quiet one would hold the
// others back). Goroutines of its own receive: a reader per UDP socket
// (Config.Sockets per listener, bound to one port with SO_REUSEPORT, each
// exporter to one of them) takes datagrams in batches (recvmmsg(2) on
// Linux), and a reader per TCP connection frames IPFIX messages. Next
// decodes them record by record as the producer asks, allocating nothing
// once an exporter is known. A flow record becomes a Packet holding its
// key (Packet.Key) and its flow start time (its arrival when the start is
// more than a minute after it: a wrong clock); an sFlow flow sample becomes
// a Packet holding the packet header it carries, keyed by the pipeline
// (flow.Parse, or through the tunnels of pipeline.Config.Decap: collect
// --decap) and stamped with its arrival.
//
// Each exporter's observation domain (its address and NetFlow v9 source
// ID, IPFIX observation domain, v5 engine, or sFlow agent and sub-agent) is
// an observer: Packet.ObserverID numbers it, so that the pipeline
// deduplicates each router's keys apart, and ObserverName names it in the
// records ("192.0.2.1#0"). What the collector counts — datagrams and
// records per observer, loss in transit from sequence numbers, sampling
// rates, decode errors by reason, the kernel's socket drops — is in
// Stats.
//
// Everything an exporter, or whoever spoofs its address, can make the
// collector keep is bounded: exporters per socket, templates, fields and
// domains per exporter, observers (the rest share OtherName), TCP
// connections and the messages they queue.
package collect

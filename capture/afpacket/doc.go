// Package afpacket captures live from AF_PACKET sockets with TPACKET_V3
// rings. Open opens Config.Sockets sockets on one interface, joined in a
// PACKET_FANOUT group by flow hash so that all frames of a flow, in both
// directions, reach the same socket, and returns each as a capture.Source
// (*Socket) for one reader goroutine. A pcap-filter(7) expression
// (Config.BPF), compiled by capture/pcapfilter, runs in the kernel before a
// frame enters a ring.
//
// Lifecycle: Open needs CAP_NET_RAW. Next hands out frames zero-copy from
// the ring, valid until the next Next on the same socket, and returns
// capture.ErrTimeout after an idle poll interval. Close may be called from
// any goroutine: it wakes a Next waiting in the kernel and unmaps the ring
// only once the reader holds no frame of it. KernelDrops
// (capture.DropCounter) counts the frames the kernel dropped because a ring
// was full.
//
// The package makes its system calls itself, through golang.org/x/sys/unix,
// and waits on its sockets with capture/internal/sockwait; afpacket.go says why it
// does not build on gopacket/afpacket. Linux only.
package afpacket

// Package capture is the contract between packet sources and the pipeline:
// a Packet, the Source that yields packets in capture order, the errors a
// Source returns, and the small interfaces a source implements when it can
// tell more than its packets (DropCounter, KernelCounter, WindowCounter).
//
// The sources live in packages of their own, one job each, as gopacket keeps
// pcapgo and afpacket apart:
//
//   - capture/pcapfile reads pcap and pcapng files, plain or gzip, several
//     in order, streamed in constant memory;
//   - capture/afpacket captures live from AF_PACKET sockets (TPACKET_V3
//     rings, one socket per reader in a PACKET_FANOUT group);
//   - capture/xdp captures from the XDP hook (keys made in the kernel);
//   - capture/afxdp captures from AF_XDP sockets (mirror ports).
//
// capture/pcapfilter compiles pcap-filter(7) expressions to the classic BPF
// that capture/afpacket attaches to its sockets.
//
// Every Source hands out frames zero-copy: a Packet's Data is valid until
// the next Next call on the same Source. A Source is read by one goroutine;
// live sources may be closed from any. A BatchSource (files) also hands out
// a Batch of frames at a time, valid until ReleaseBatch, so that a pipeline
// can key them on other goroutines while it reads on; a pcap file's frames
// come as the records its buffer holds (PcapRecords). This package makes no
// system calls.
package capture

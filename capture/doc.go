// Package capture reads packets: pcap and pcapng files (plain or gzip, any
// link type flow.Parse supports, several files in order, streamed in
// constant memory) and live AF_PACKET sockets (TPACKET_V3 rings, one socket
// per worker joined in a PACKET_FANOUT group, optional classic BPF filter).
//
// Every Source hands out frames zero-copy: a Packet's Data is valid until the
// next Next call. Only this package and fastpath/ make system calls.
package capture

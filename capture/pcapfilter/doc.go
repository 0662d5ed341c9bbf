// Package pcapfilter compiles a subset of the pcap-filter(7) language to
// classic BPF, so that a live capture (capture/afpacket) can drop unwanted
// frames in the kernel without tying the build to libpcap through cgo.
// Compile documents the language it takes; a rejected expression is an
// *Error that says where.
//
// The programs test what libpcap's do for the same expression: the tests run
// both over the same frames, through tcpdump, and attach every program to a
// socket so that the kernel's checker takes it. The package is pure
// computation: no state, no system calls; Compile may be called from any
// goroutine.
package pcapfilter

// Package afxdp captures from AF_XDP sockets: `flowdedup run --mode afxdp`,
// for mirror and SPAN ports.
//
// Open attaches an XDP program (package bpf's XSK redirect program, through
// xdp.Attach) that redirects every frame of the interface into AF_XDP
// sockets, one per receive queue; each socket is a Source whose frames user
// space parses with flow.Parse. Those frames are taken away from the
// kernel's network stack: the host no longer receives traffic on that
// interface.
//
// With Config.Prefilter (the default of `flowdedup run --mode afxdp`) the
// program also keys each frame in the kernel and drops, counting them per
// queue and per window of its own clock, the frames whose key was already
// handed on in their window; the frames that cross carry the kernel's time
// in Packet.TimeNs, and each Source is a capture.WindowCounter, so that
// each window gets exactly its frames (see Prefilter).
//
// Lifecycle: Open, then read each of Sources from a goroutine of its own,
// then Close (from any goroutine), which wakes a blocked Next, detaches the
// program and releases the sockets and their UMEM once no reader holds a
// frame. A Packet's Data points into the UMEM and is valid until the next
// Next on the same Source. The program is attached through a BPF link, so
// the kernel detaches it when the process exits or is killed.
package afxdp

// Package fastpath captures in the kernel's XDP hook.
//
// OpenXDP loads the XDP program of package bpf, which parses frames, keys
// them and drops already-seen keys in a per-CPU prefilter, attaches it to an
// interface through a BPF link, and reads the per-CPU ring buffers: each ring
// is a capture.Source whose packets carry ready-made keys (capture.Packet.Key)
// and whose kernel counters (capture.KernelCounter) account for the frames the
// kernel handled alone, in total and by window (capture.WindowCounter: each
// frame counted in the window of the time its CPU stamped it with, exactly).
//
// OpenAFXDP is the AF_XDP mode for mirror and SPAN ports: an XDP program
// redirects every frame of the interface into AF_XDP sockets, one per receive
// queue, whose frames user space parses with flow.Parse. Those frames are
// taken away from the kernel's network stack.
//
// Everything is attached through BPF links: when the process exits, or is
// killed, the kernel detaches the programs and the interface is left as it
// was.
package fastpath

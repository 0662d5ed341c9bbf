// Package xdp captures in the kernel's XDP hook: the fast path of
// `flowdedup run --mode xdp`.
//
// Open loads the XDP program of package bpf, which parses frames, keys them
// and drops already-seen keys in a per-CPU prefilter, attaches it to an
// interface through a BPF link, and reads the per-CPU ring buffers. Each ring
// is a capture.Source whose packets carry ready-made keys
// (capture.Packet.Key) and whose kernel counters (capture.KernelCounter)
// account for the frames the kernel handled alone, in total and by window
// (capture.WindowCounter: each frame counted in the window of the time its
// CPU stamped it with, exactly).
//
// Lifecycle: Open, then read each of Sources from a goroutine of its own,
// then Close (from any goroutine), which detaches the program and wakes the
// readers. Because the program is attached through a BPF link, the kernel
// also detaches it when the process exits or is killed: the interface is
// left as it was.
//
// The package also holds what every XDP-based capture shares (package
// capture/afxdp uses it): AttachMode and Attach, the errors that say why a
// program cannot be loaded or attached (ErrNoInterface, ErrPermission,
// ErrUnsupported), and Promisc.
package xdp

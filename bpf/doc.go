// Package bpf holds flowdedup's XDP program and loads it.
//
// xdp.c parses each frame by the rules of flow.Parse, builds the flow key of
// the configured kind, asks a per-CPU prefilter (a QHT row table in a per-CPU
// array map) whether the key was seen on this CPU in the current window, and
// writes unseen keys to the ring buffer of its CPU (a map of ring buffers
// indexed by CPU, so no two CPUs contend for a ring). It always returns
// XDP_PASS: it observes traffic and never drops or alters it. flowdedup.h is
// the contract between the C program and this package.
//
// The object files are built by bpf2go (go generate, `make generate`) and
// committed with the generated Go; CI regenerates them and fails when they
// differ. Only a little-endian object is built, and this file is for Linux
// only. The program needs Linux 5.8 or later (BPF ring buffers,
// bpf_ktime_get_boot_ns) and the privileges to load an XDP program
// (CAP_BPF and CAP_NET_ADMIN, or root). Load wraps the kernel's errors, so
// that errors.Is(err, ebpf.ErrNotSupported) and errors.Is(err,
// os.ErrPermission) still work; a program the verifier rejects is an
// *ebpf.VerifierError, which wraps EACCES (os.ErrPermission) too.
//
// Programs and maps go through github.com/cilium/ebpf. The package also
// makes one system call of its own, through golang.org/x/sys/unix: it reads
// the boot-time and wall clocks (clock_gettime) to turn the program's
// boot-time stamps into Unix time.
package bpf

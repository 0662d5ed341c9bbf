// Package bpf holds flowdedup's XDP program and loads it.
//
// xdp.c parses each frame by the rules of flow.Parse, builds the flow key of
// the configured kind (masked to its networks, as flow.Mask.Apply does, with
// Config.Prefix), asks a per-CPU prefilter (a QHT row table in a per-CPU
// array map) whether the key was seen on this CPU in the current window, and
// writes unseen keys to the ring buffer of its CPU (a map of ring buffers
// indexed by CPU, so no two CPUs contend for a ring). It always returns
// XDP_PASS: it observes traffic and never drops or alters it. flowdedup.h is
// the contract between the C program and this package.
//
// # Tunnels
//
// With Config.Decap listing tunnels, the program keys the frame by the
// rules of flow.Key.DecodeDecap instead: the innermost IP header reached
// through GRE, ERSPAN, VXLAN, Geneve, GTP-U and IP-in-IP, at most
// flow.MaxDecapLevels deep, with the VNI of VXLAN and Geneve as the key's
// segment (unless Decap.NoSegment), and counts the five tunnel reasons
// beside the others (Errs, Reasons). The parser is a bounded loop over
// levels, each a link walk, an IP header and a tunnel header, written as
// BPF global functions that the verifier checks once each. With no tunnels
// (the zero Decap) the loader leaves the program's switch at 0 and the
// verifier prunes that code: the program is the one without decapsulation.
// The tests check it frame by frame against DecodeDecap.
//
// # Counts by window
//
// Each CPU counts every frame twice: in its totals since Load (Counters)
// and in the window of the frame's time (WindowCounters), in one of
// WindowSlots per-CPU slots, window modulo WindowSlots, tagged with the
// window it holds. A CPU's clock, the time its events carry, is the boot
// clock plus the offset SyncClock sets, but it never goes back across a
// window boundary: a frame whose time falls before the start of the newest
// window its CPU has counted a frame in (the wall clock was stepped back),
// or before the floor EndWindow sets, is stamped with that start and
// counted, keyed and emitted there. So a CPU never counts a frame in a
// window older than its current one, a slot is only ever taken over by a
// newer window, and no frame is lost from the totals or counted in two
// windows. The counts of window i stay in their slot until the CPU's clock
// reaches window i+WindowSlots.
//
// A window's counts are final once no CPU can count another frame in it:
// once every CPU's clock has passed its end, or once EndWindow has ended
// it, which moves the floor of every CPU's clock past it and waits for the
// program's runs in progress.
//
// The object files are built by bpf2go (go generate, `make generate`) and
// committed with the generated Go; CI regenerates them and fails when they
// differ. Only a little-endian object is built, and this file is for Linux
// only. The program needs Linux 5.8 or later (BPF ring buffers,
// bpf_ktime_get_boot_ns) and the privileges to load an XDP program
// (CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN, or root). Load wraps the
// kernel's errors, so that errors.Is(err, ebpf.ErrNotSupported) and
// errors.Is(err, os.ErrPermission) still work; a program the verifier
// rejects is an *ebpf.VerifierError, which wraps EACCES (os.ErrPermission)
// too.
//
// Programs and maps go through github.com/cilium/ebpf. The package also
// makes one system call of its own, through golang.org/x/sys/unix: it reads
// the boot-time and wall clocks (clock_gettime) to turn the program's
// boot-time stamps into Unix time.
package bpf

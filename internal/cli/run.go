//go:build linux

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/afpacket"
	"github.com/flowdedup/flowdedup/fastpath"
	"github.com/flowdedup/flowdedup/filters"
)

const runExamples = `  flowdedup run --iface eth0 --key src --window 1h --summary hourly.jsonl --out sources.jsonl
  flowdedup run --iface eth0 --mode xdp --key 5tuple --metrics 127.0.0.1:9100
  flowdedup run --iface veth0 --mode afpacket --bpf 'tcp or udp' --workers 2 --format text
  flowdedup run --iface span0 --mode afxdp --key pair    (a mirror port: its traffic leaves the kernel stack)
`

const runHelp = `--iface NAME [--mode xdp|afxdp|afpacket|auto] [flags]

Captures live from an interface and writes each flow key the first time it is seen
in its window; windows follow the wall clock. Stop with Ctrl-C (SIGINT) or SIGTERM:
the last window is closed and written.

Modes:
  xdp       an XDP program keys every frame in the kernel, at the driver, and drops
            the keys its per-CPU prefilter saw in this window; only new keys cross to
            user space, through one ring buffer per CPU. Frames are never dropped or
            altered: the interface works as before. Attached through a BPF link, so
            nothing stays on the interface when flowdedup exits or is killed.
  afxdp     for mirror/SPAN ports only: an XDP program redirects EVERY frame of the
            interface into AF_XDP sockets, one per receive queue, and flowdedup keys
            them in user space. The frames are taken away from the kernel's network
            stack: the host no longer receives traffic on that interface.
  afpacket  AF_PACKET TPACKET_V3 rings with fanout: copies of the frames, keyed in
            user space; the only mode that takes --bpf.
  auto      xdp where the program loads and attaches, otherwise afpacket; it says
            which on stderr.

Nothing is lost silently: keys that do not fit in a full ring are dropped and
counted in the summaries' dropped_by (ring_full: a worker's ring; kernel: the
AF_PACKET or AF_XDP ring; xdp_ring_full: the XDP program's ring buffer).
Needs root (CAP_NET_ADMIN, CAP_NET_RAW; CAP_BPF for the XDP modes).`

// xdpFlags are the flags of the XDP modes.
type xdpFlags struct {
	attach    fastpath.AttachMode
	prefilter string
	ring      string
}

func (x *xdpFlags) bind(fs *flag.FlagSet) {
	x.attach = fastpath.AttachAuto
	fs.Var(&x.attach, "xdp-attach", "XDP hook for --mode xdp and afxdp: auto (native where the driver has it, else generic) | native | generic")
	fs.StringVar(&x.prefilter, "xdp-prefilter", filters.FormatMem(bpf.DefaultPrefilterBytes*8), "`SIZE` of each CPU's in-kernel prefilter (--mode xdp), e.g. 256KiB; off: send every key to user space")
	fs.StringVar(&x.ring, "xdp-ring", filters.FormatMem(bpf.DefaultRingBytes*8), "`SIZE` of each CPU's ring buffer to user space (--mode xdp): a power of two, e.g. 4MiB")
}

// bytes parses a SIZE flag in bytes; "off" gives -1 when allowed.
func sizeFlag(name, v string, off bool) (int, error) {
	if off && strings.EqualFold(v, "off") {
		return -1, nil
	}
	bits, err := filters.ParseMem(v)
	if err != nil || bits%8 != 0 || bits <= 0 || strings.EqualFold(v, "auto") {
		return 0, usagef("--%s %q: want a size such as 256KiB or 4MiB", name, v)
	}
	return bits / 8, nil
}

// ringSize checks the --xdp-ring size: the kernel takes powers of two of at
// least a page.
func ringSize(v string) (int, error) {
	n, err := sizeFlag("xdp-ring", v, false)
	if err != nil {
		return 0, err
	}
	if n < os.Getpagesize() || n&(n-1) != 0 || n > 1<<30 {
		return 0, usagef("--xdp-ring %s: want a power of two from the page size (%d bytes) to 1GiB", v, os.Getpagesize())
	}
	return n, nil
}

func runLive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg CaptureConfig
	var afp afpacket.Config
	var xf xdpFlags
	var af afxdpFlags
	var mode string
	fs := newFlagSet("run", runHelp, runExamples, stderr)
	cfg.BindFlags(fs)
	// A live capture runs for hours: its window summaries go to stderr
	// unless sent elsewhere (--summary PATH) or turned off (--summary '').
	cfg.Summary = "-"
	fs.Lookup("summary").DefValue = "-"
	afp.BindFlags(fs)
	xf.bind(fs)
	af.bind(fs)
	fs.StringVar(&mode, "mode", "auto", "capture path: xdp | afxdp | afpacket | auto (see above)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	switch mode {
	case "xdp", "afxdp", "afpacket", "auto":
	default:
		return usagef("--mode %q: want xdp, afxdp, afpacket or auto", mode)
	}
	if afp.Iface == "" {
		return usagef("--iface is required")
	}
	if err := cfg.check(); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if mode != "afxdp" {
		for _, name := range []string{"afxdp-queues", "afxdp-bind", "afxdp-frames"} {
			if set[name] {
				return usagef("--%s applies to --mode afxdp only", name)
			}
		}
	}
	if mode == "xdp" || mode == "afxdp" {
		for _, name := range []string{"bpf", "afpacket-sockets", "afpacket-fanout-group", "afpacket-block-size", "afpacket-blocks", "afpacket-block-timeout", "snaplen"} {
			if set[name] {
				return usagef("--%s applies to --mode afpacket only", name)
			}
		}
	}
	prefilter, err := sizeFlag("xdp-prefilter", xf.prefilter, true)
	if err != nil {
		return err
	}
	ring, err := ringSize(xf.ring)
	if err != nil {
		return err
	}

	var sources []capture.Source
	var closer io.Closer
	var what string
	switch mode {
	case "xdp", "auto":
		if mode == "auto" && set["bpf"] {
			mode = "afpacket" // the XDP program has no capture filter
			fmt.Fprintln(stderr, "flowdedup run: mode auto: using afpacket (--bpf needs it)")
			break
		}
		x, err := fastpath.OpenXDP(fastpath.XDPConfig{
			Iface: afp.Iface, Key: cfg.Key, Seed: fastpath.PrefilterSeed(cfg.Seed.v), Window: cfg.Window,
			Attach: xf.attach, PrefilterBytes: prefilter, RingBytes: ring, PollTimeout: afp.PollTimeout,
		})
		if err != nil {
			if mode == "xdp" || errors.Is(err, fastpath.ErrNoInterface) {
				return err
			}
			fmt.Fprintf(stderr, "flowdedup run: mode auto: using afpacket: the XDP fast path is not available: %v\n", err)
			mode = "afpacket"
			break
		}
		if mode == "auto" {
			fmt.Fprintln(stderr, "flowdedup run: mode auto: using xdp")
		}
		mode = "xdp"
		sources, closer = x.Sources(), x
		pf := "prefilter off"
		if prefilter > 0 {
			pf = "prefilter " + filters.FormatMem(prefilter*8) + " per CPU"
		}
		what = fmt.Sprintf("XDP (%s hook, %s, %d CPU ring buffers of %s)", x.Mode(), pf, len(sources), filters.FormatMem(ring*8))
	case "afxdp":
		a, err := openAFXDP(afp, xf, af)
		if err != nil {
			return err
		}
		sources, closer = a.Sources(), a
		what = fmt.Sprintf("AF_XDP (%s, %d queues; frames are taken from the kernel stack)", a.Mode(), len(sources))
	}
	if mode == "afpacket" {
		// One socket per worker unless told otherwise: each socket is
		// read by its own goroutine, so reading scales with the workers.
		if !set["afpacket-sockets"] {
			afp.Sockets = cfg.Workers
		}
		srcs, err := afpacket.Open(afp)
		if err != nil {
			return err
		}
		sources = make([]capture.Source, len(srcs))
		copy(sources, srcs)
		closer = closeAll(sources)
		what = fmt.Sprintf("%d AF_PACKET sockets", len(sources))
	}
	defer closer.Close()
	if afp.Promisc && mode != "afpacket" {
		// AF_PACKET sockets set it themselves.
		pr, err := fastpath.Promisc(afp.Iface)
		if err != nil {
			return err
		}
		defer pr.Close()
	}
	s, err := openSession(ctx, &cfg, true, stdout, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "flowdedup run: capturing on %s with %s, %d workers, filter %s\n", afp.Iface, what, cfg.Workers, cfg.Filter)
	return s.run(ctx, sources...)
}

// closeAll closes each source.
type closeAll []capture.Source

func (c closeAll) Close() error {
	var errs []error
	for _, s := range c {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

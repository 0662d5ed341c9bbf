//go:build linux && !(mips || mips64 || ppc64 || s390x)

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/afpacket"
	"github.com/flowdedup/flowdedup/capture/xdp"
	"github.com/flowdedup/flowdedup/units"
)

const runExamples = `  flowdedup run --iface eth0 --key src --window 1h --summary hourly.jsonl --out sources.jsonl
  flowdedup run --iface eth0 --mode xdp --key 5tuple --metrics 127.0.0.1:9100
  flowdedup run --iface veth0 --mode afpacket --bpf 'tcp or udp' --workers 2 --format text
  flowdedup run --iface span0 --mode afxdp --key pair    (a mirror port: its traffic leaves the kernel stack)
  flowdedup run -ni eth0 -w sources.jsonl --window 1h    (tcpdump habits: -n, -i IFACE, -w FILE)
  flowdedup run --iface eth0 --key src --window 1h --out '/var/lib/flowdedup/sources-%Y%m%dT%H.jsonl' \
      --summary '/var/lib/flowdedup/summary-%Y%m%d.jsonl' --retain 168    (a file per hour, a week kept)
  flowdedup run --iface eth0 --window 1h --out /dev/null --export ipfix://collector:4739 --observation-domain 7
  flowdedup run --iface eth0 --window 1m --summary-sketch --out /dev/null --export clickhouse://ch:8123/flows --spool /var/spool/flowdedup
`

const runIntro = `Captures live from an interface and writes each flow key the first time it is seen
in its window; windows follow the wall clock, and a window closes --lateness after
its end. Stop with Ctrl-C (SIGINT) or SIGTERM: the last window is closed and written.`

const runOutro = `Nothing is lost silently: keys that do not fit in a full ring are dropped and
counted in the summaries' dropped_by (ring_full: a worker's ring; kernel: the
AF_PACKET or AF_XDP ring; xdp_ring_full: the XDP program's ring buffer).
Needs root, or CAP_NET_ADMIN and CAP_NET_RAW, with CAP_BPF for the XDP modes
and CAP_PERFMON as well for xdp (without it, auto falls back to afpacket).`

// LiveConfig holds the flags of `flowdedup run`.
type LiveConfig struct {
	CaptureConfig
	Live     liveFlags // what every mode takes: --iface, --promisc, --poll-timeout
	AFPacket afpacket.Config
	XDP      xdpFlags
	AFXDP    afxdpFlags
	Mode     string
}

// newLiveConfig returns run's defaults: a live capture runs for hours, so
// its window summaries go to stderr unless sent elsewhere (--summary PATH)
// or turned off (--summary ”).
func newLiveConfig() LiveConfig {
	c := LiveConfig{CaptureConfig: newCaptureConfig(), Mode: "auto"}
	c.Summary = "-"
	return c
}

// liveShort are the short forms of the AF_PACKET flags, as tcpdump has
// them: -s SNAPLEN (and -i IFACE, bound with the flags every mode shares).
var liveShort = map[string]string{"snaplen": "s"}

// liveFlags are the flags every capture mode takes, bound once here and
// copied into each mode's configuration.
type liveFlags struct {
	iface       string
	promisc     bool
	pollTimeout time.Duration
}

func (l *liveFlags) bind(fs *pflag.FlagSet) {
	fs.StringVarP(&l.iface, "iface", "i", l.iface, "interface to capture on")
	fs.BoolVar(&l.promisc, "promisc", l.promisc, "put the interface in promiscuous mode")
	l.pollTimeout = afpacket.DefaultPollTimeout
	durationFlag(fs, &l.pollTimeout, "poll-timeout", "idle time after which a read returns so windows can close")
}

// BindFlags registers the run flags on fs.
func (c *LiveConfig) BindFlags(fs *pflag.FlagSet) {
	c.CaptureConfig.BindFlags(fs)
	c.Live.bind(fs)
	addGoFlags(fs, c.AFPacket.BindFlags, liveShort)
	c.XDP.bind(fs)
	c.AFXDP.bind(fs)
	fs.TextVar(&c.Decap, "decap", c.Decap, decapUsage+"; with --mode xdp the XDP program decapsulates in the kernel")
	fs.StringVar(&c.Mode, "mode", c.Mode, "capture path: "+strings.Join(liveModeNames(), " | ")+" (see Modes above)")
}

// A flagGroup is a set of flags that only some modes take.
type flagGroup []string

var (
	afpacketFlags  = flagGroup{"bpf", "afpacket-sockets", "afpacket-fanout-group", "afpacket-block-size", "afpacket-blocks", "afpacket-block-timeout", "snaplen"}
	xdpFlagsGroup  = flagGroup{"xdp-prefilter", "xdp-ring"}
	xdpAttachFlags = flagGroup{"xdp-attach"}
	afxdpFlagGroup = flagGroup{"afxdp-queues", "afxdp-bind", "afxdp-frames", "afxdp-prefilter"}
)

// A liveMode is one --mode of run: what it is, the mode-specific flags it
// takes (a flag of a group no mode of the run takes is a usage error), and
// how it opens its sources.
type liveMode struct {
	name  string
	help  string // for the Modes section of the help, wrapped and indented
	takes []*flagGroup
	open  func(l *liveSetup) (*liveSources, error)
}

// liveModes is the table of run's modes.
var liveModes = []liveMode{
	{
		name: "xdp",
		help: `an XDP program keys every frame in the kernel, at the driver, and drops
            the keys its per-CPU prefilter saw in this window; only new keys cross to
            user space, through one ring buffer per CPU. Frames are never dropped or
            altered: the interface works as before. Attached through a BPF link, so
            nothing stays on the interface when flowdedup exits or is killed.`,
		takes: []*flagGroup{&xdpFlagsGroup, &xdpAttachFlags},
		open:  (*liveSetup).openXDP,
	},
	{
		name: "afxdp",
		help: `for mirror/SPAN ports only: an XDP program redirects EVERY frame of the
            interface into AF_XDP sockets, one per receive queue, and flowdedup keys
            them in user space. The frames are taken away from the kernel's network
            stack: the host no longer receives traffic on that interface. By default
            the program also keys each frame and drops, counting them, the frames
            whose key user space already has in their window (--afxdp-prefilter;
            not with --decap or --prefix; --afxdp-prefilter=false: every frame
            crosses).`,
		takes: []*flagGroup{&afxdpFlagGroup, &xdpAttachFlags},
		open:  (*liveSetup).openAFXDP,
	},
	{
		name: "afpacket",
		help: `AF_PACKET TPACKET_V3 rings with fanout: copies of the frames, keyed in
            user space; the only mode that takes --bpf.`,
		takes: []*flagGroup{&afpacketFlags},
		open:  (*liveSetup).openAFPacket,
	},
	{
		name: "auto",
		help: `xdp where the program loads and attaches, otherwise afpacket; it says
            which on stderr.`,
		takes: []*flagGroup{&xdpFlagsGroup, &xdpAttachFlags, &afpacketFlags},
		open:  (*liveSetup).openAuto,
	},
}

func liveModeNames() []string {
	names := make([]string, len(liveModes))
	for i, m := range liveModes {
		names[i] = m.name
	}
	return names
}

func lookupLiveMode(name string) (*liveMode, bool) {
	for i := range liveModes {
		if liveModes[i].name == name {
			return &liveModes[i], true
		}
	}
	return nil, false
}

// checkFlags refuses a flag set on the command line that belongs to a
// group mode does not take, naming the modes that take it.
func (m *liveMode) checkFlags(set func(string) bool) error {
	for _, other := range liveModes {
		for _, g := range other.takes {
			if slices.Contains(m.takes, g) {
				continue
			}
			for _, name := range *g {
				if set(name) {
					return usagef("--%s applies to --mode %s only", name, strings.Join(modesTaking(g), " or "))
				}
			}
		}
	}
	return nil
}

// modesTaking lists the modes but auto that take g.
func modesTaking(g *flagGroup) []string {
	var names []string
	for _, m := range liveModes {
		if m.name != "auto" && slices.Contains(m.takes, g) {
			names = append(names, m.name)
		}
	}
	return names
}

func runLong() string {
	var b strings.Builder
	b.WriteString(runIntro + "\n\nModes:\n")
	for _, m := range liveModes {
		fmt.Fprintf(&b, "  %-9s %s\n", m.name, m.help)
	}
	b.WriteString("\n" + runOutro + "\n\n" + outputHelp)
	return b.String()
}

func runCommand() command {
	return command{
		use:     "run --iface NAME [--mode " + strings.Join(liveModeNames(), "|") + "] [flags]",
		short:   "live capture from an interface (xdp, afxdp, afpacket) -> distinct flows and window summaries",
		long:    runLong(),
		example: runExamples,
		bind: func(cmd *cobra.Command) runFunc {
			cfg := newLiveConfig()
			fs := cmd.Flags()
			cfg.BindFlags(fs)
			completeCaptureFlags(cmd)
			complete(cmd, "mode", liveModeNames()...)
			complete(cmd, "xdp-attach", "auto", "native", "generic")
			complete(cmd, "afxdp-bind", "auto", "copy", "zerocopy")
			_ = cmd.RegisterFlagCompletionFunc("iface", completeInterfaces)
			noArgs(cmd)
			return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				return runLive(ctx, &cfg, fs.Changed, args, stdout, stderr)
			}
		},
	}
}

// completeInterfaces offers the names of this host's interfaces.
func completeInterfaces(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]cobra.Completion, len(ifs))
	for i, ifc := range ifs {
		names[i] = ifc.Name
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// xdpFlags are the flags of the XDP modes.
type xdpFlags struct {
	attach    xdp.AttachMode
	prefilter string
	ring      string
}

func (x *xdpFlags) bind(fs *pflag.FlagSet) {
	x.attach = xdp.AttachAuto
	fs.Var(typed{&x.attach, "MODE"}, "xdp-attach", "XDP hook for --mode xdp and afxdp: auto (native where the driver has it, else generic) | native | generic")
	fs.StringVar(&x.prefilter, "xdp-prefilter", units.FormatBytes(bpf.DefaultPrefilterBytes), "`SIZE` of each CPU's in-kernel prefilter (--mode xdp), e.g. 256KiB; off: send every key to user space")
	fs.StringVar(&x.ring, "xdp-ring", units.FormatBytes(bpf.DefaultRingBytes), "`SIZE` of each CPU's ring buffer to user space (--mode xdp): a power of two, e.g. 4MiB")
}

// sizeFlag parses a SIZE flag in bytes (units.ParseBytes); "off" gives -1
// when allowed.
func sizeFlag(name, v string, off bool) (int, error) {
	if off && strings.EqualFold(v, "off") {
		return -1, nil
	}
	n, err := units.ParseBytes(v)
	if err != nil || n > 1<<40 {
		return 0, usagef("--%s %q: want a size such as 256KiB or 4MiB", name, v)
	}
	return int(n), nil
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

// liveSetup is one `flowdedup run` being set up: its flags, checked, and
// where it reports what it does.
type liveSetup struct {
	cfg       *LiveConfig
	set       func(string) bool // whether a flag was given
	prefilter int               // bytes per CPU, -1 off
	ring      int               // bytes per CPU
	stderr    io.Writer
}

// liveSources is what a mode opened.
type liveSources struct {
	mode    string // the mode in effect (auto becomes xdp or afpacket)
	sources []capture.Source
	closer  io.Closer
	what    string // for the "capturing on" line
}

// runLive captures as cfg says; set tells which flags were given.
func runLive(ctx context.Context, cfg *LiveConfig, set func(string) bool, args []string, stdout, stderr io.Writer) (err error) {
	catchHangup()
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	mode, ok := lookupLiveMode(cfg.Mode)
	if !ok {
		return usagef("--mode %q: want %s", cfg.Mode, orList(liveModeNames()))
	}
	if cfg.Live.iface == "" {
		return usagef("--iface is required")
	}
	if err := mode.checkFlags(set); err != nil {
		return err
	}
	if err := cfg.check(systemMemory()); err != nil {
		return err
	}
	l := &liveSetup{cfg: cfg, set: set, stderr: stderr}
	if l.prefilter, err = sizeFlag("xdp-prefilter", cfg.XDP.prefilter, true); err != nil {
		return err
	}
	if l.ring, err = ringSize(cfg.XDP.ring); err != nil {
		return err
	}
	src, err := mode.open(l)
	if err != nil {
		return err
	}
	defer src.closer.Close()
	if cfg.Live.promisc && src.mode != "afpacket" {
		// AF_PACKET sockets set it themselves.
		pr, err := xdp.Promisc(cfg.Live.iface)
		if err != nil {
			return err
		}
		defer pr.Close()
	}
	s, err := openSession(ctx, &cfg.CaptureConfig, sessionMode{name: "run", live: true, wallClock: true}, stdout, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "flowdedup run: capturing on %s with %s, %s\n", cfg.Live.iface, src.what, cfg.describe())
	return s.run(ctx, src.sources...)
}

func (l *liveSetup) openXDP() (*liveSources, error) {
	cfg := l.cfg
	x, err := xdp.Open(xdp.Config{
		Iface: cfg.Live.iface, Key: cfg.Key, Prefix: cfg.Prefix, Seed: xdp.PrefilterSeed(cfg.Seed.v), Window: cfg.Window,
		Attach: cfg.XDP.attach, PrefilterBytes: l.prefilter, RingBytes: l.ring, PollTimeout: cfg.Live.pollTimeout,
		Decap: cfg.Decap,
	})
	if err != nil {
		return nil, err
	}
	pf := "prefilter off"
	if l.prefilter > 0 {
		pf = "prefilter " + units.FormatBytes(int64(l.prefilter)) + " per CPU"
	}
	sources := x.Sources()
	return &liveSources{
		mode: "xdp", sources: sources, closer: x,
		what: fmt.Sprintf("XDP (%s hook, %s, %d CPU ring buffers of %s)", x.Mode(), pf, len(sources), units.FormatBytes(int64(l.ring))),
	}, nil
}

func (l *liveSetup) openAFXDP() (*liveSources, error) {
	af := l.cfg.AFXDP
	af.prefilterSet = l.set("afxdp-prefilter")
	a, err := openAFXDP(&l.cfg.CaptureConfig, l.cfg.Live, l.cfg.XDP, af)
	if err != nil {
		return nil, err
	}
	sources := a.Sources()
	pf := "prefilter off"
	if a.Prefiltered() {
		pf = "prefilter on"
	}
	return &liveSources{
		mode: "afxdp", sources: sources, closer: a,
		what: fmt.Sprintf("AF_XDP (%s, %s, %d queues; frames are taken from the kernel stack)", a.Mode(), pf, len(sources)),
	}, nil
}

func (l *liveSetup) openAFPacket() (*liveSources, error) {
	afp := l.cfg.AFPacket
	afp.Iface, afp.Promisc, afp.PollTimeout = l.cfg.Live.iface, l.cfg.Live.promisc, l.cfg.Live.pollTimeout
	// One socket per worker unless told otherwise: each socket is read by
	// its own goroutine, so reading scales with the workers.
	if !l.set("afpacket-sockets") {
		afp.Sockets = l.cfg.Workers
	}
	sources, err := afpacket.Open(afp)
	if err != nil {
		return nil, err
	}
	return &liveSources{
		mode: "afpacket", sources: sources, closer: closeAll(sources),
		what: fmt.Sprintf("%d AF_PACKET sockets", len(sources)),
	}, nil
}

// openAuto opens xdp where it can, else afpacket, and says which.
func (l *liveSetup) openAuto() (*liveSources, error) {
	if l.set("bpf") {
		fmt.Fprintln(l.stderr, "flowdedup run: mode auto: using afpacket (--bpf needs it)")
		return l.openAFPacket()
	}
	src, err := l.openXDP()
	if err != nil {
		if errors.Is(err, xdp.ErrNoInterface) {
			return nil, err
		}
		fmt.Fprintf(l.stderr, "flowdedup run: mode auto: using afpacket: the XDP fast path is not available: %v\n", err)
		return l.openAFPacket()
	}
	fmt.Fprintln(l.stderr, "flowdedup run: mode auto: using xdp")
	return src, nil
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

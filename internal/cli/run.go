//go:build linux

package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/flowdedup/flowdedup/capture"
)

const runExamples = `  flowdedup run --iface eth0 --key src --window 1h --summary hourly.jsonl --out sources.jsonl
  flowdedup run --iface eth0 --key 5tuple --bpf 'tcp or udp' --metrics 127.0.0.1:9100
  flowdedup run --iface veth0 --mode afpacket --workers 2 --format text
`

func runLive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg CaptureConfig
	var afp capture.AFPacketConfig
	var mode string
	fs := newFlagSet("run", "--iface NAME [--mode afpacket|auto] [flags]\n\nCaptures live from an interface and writes each flow key the first time it is seen\nin its window; windows follow the wall clock. The capture never blocks on a slow\nworker: keys that do not fit in a full ring are dropped and counted\n(summaries' dropped_by.ring_full), as are frames the kernel drops (dropped_by.kernel).\nStop with Ctrl-C (SIGINT) or SIGTERM: the last window is closed and written.", runExamples, stderr)
	cfg.BindFlags(fs)
	afp.BindFlags(fs)
	fs.StringVar(&mode, "mode", "auto", "capture path: afpacket (AF_PACKET TPACKET_V3 rings with fanout) | xdp | afxdp (not built yet) | auto (the fastest available: afpacket for now)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	switch mode {
	case "afpacket":
	case "auto":
		fmt.Fprintln(stderr, "flowdedup run: mode auto: using afpacket (the XDP fast path is not built into this version)")
	case "xdp", "afxdp":
		return usagef("--mode %s is not built into this version yet; use --mode afpacket", mode)
	default:
		return usagef("--mode %q: want afpacket, xdp, afxdp or auto", mode)
	}
	if afp.Iface == "" {
		return usagef("--iface is required")
	}
	if err := cfg.check(); err != nil {
		return err
	}
	// One socket per worker unless told otherwise: each socket is read by its
	// own goroutine, so reading scales with the workers.
	socketsSet := false
	fs.Visit(func(f *flag.Flag) { socketsSet = socketsSet || f.Name == "afpacket-sockets" })
	if !socketsSet {
		afp.Sockets = cfg.Workers
	}
	sources, err := capture.OpenAFPacket(afp)
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range sources {
			s.Close()
		}
	}()
	s, err := openSession(ctx, &cfg, true, stdout, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "flowdedup run: capturing on %s with %d AF_PACKET sockets, %d workers, filter %s\n", afp.Iface, len(sources), cfg.Workers, cfg.Filter)
	return s.run(ctx, sources...)
}

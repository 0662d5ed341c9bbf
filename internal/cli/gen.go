package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flowdedup/flowdedup/gen"
)

// GenConfig holds the flags of `flowdedup gen`.
type GenConfig struct {
	gen.Config
	Out string
}

// BindFlags registers the gen flags on fs.
func (c *GenConfig) BindFlags(fs *pflag.FlagSet) {
	fs.IntVar(&c.Packets, "packets", 0, "frames to write, malformed ones included (required), e.g. --packets 20000")
	fs.IntVar(&c.Flows, "flows", 0, fmt.Sprintf("distinct flows (5-tuples) the well-formed frames carry, each at least once; at most --packets and %d (required), e.g. --flows 2000", gen.MaxFlows))
	fs.Float64Var(&c.Zipf, "zipf", 0, "flow popularity: 0 = uniform, S > 0 = Zipf law P(rank k) ∝ k^-S, e.g. --zipf 1.1")
	fs.Float64Var(&c.IPv6, "ipv6", 0, "fraction of the flows that are IPv6, e.g. --ipv6 0.3")
	fs.BoolVar(&c.VLAN, "vlan", false, "tag every frame with 802.1Q (about one client in four behind an 802.1ad QinQ stack)")
	durationFlag(fs, &c.Duration, "duration", "timestamps spread over this span `D` after --start, e.g. --duration 150s")
	fs.TextVar(&c.Start, "start", gen.DefaultStart, "`TIME` of the first packet, RFC 3339 (--jitter and --interface-skew may move it back)")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "random seed; the same flags and seed give the same file, byte for byte")
	fs.StringVar(&c.Format, "format", "", "pcap | pcapng (default: pcapng when FILE ends in .pcapng or .pcapng.gz, else pcap)")
	fs.BoolVar(&c.Gzip, "gzip", false, "gzip the file (implied when FILE ends in .gz)")
	fs.Float64Var(&c.Malformed, "malformed", 0, "fraction of frames written broken: cut inside the IP header, a bad IP version, or ARP (equally often), e.g. --malformed 0.05")
	fs.Float64Var(&c.Fragments, "fragments", 0, "fraction of IPv4 UDP packets written as non-first fragments (keyed without ports), e.g. --fragments 0.1")
	fs.IntVarP(&c.SnapLen, "snaplen", "s", 0, fmt.Sprintf("cut frames to this many bytes, as a capture's snap length does (tcpdump -s); 0 = no limit, else at least %d", gen.MinSnapLen))
	fs.StringVarP(&c.Out, "out", "o", "", "output `FILE` (required; - = stdout); an existing file is overwritten, as tcpdump -w does")
	// Messy captures, for testing what reads them.
	durationFlag(fs, &c.Jitter, "jitter", "move each packet's time back by a random amount up to `D` (by --seed), so time goes backwards by up to D between packets, e.g. --jitter 2s")
	fs.IntVar(&c.Interfaces, "interfaces", 1, fmt.Sprintf("pcapng only: describe N interfaces (at most %d) and send each packet out on one drawn at random", gen.MaxInterfaces))
	durationFlag(fs, &c.InterfaceSkew, "interface-skew", "with --interfaces N: interface i's clock runs i*`D`/(N-1) behind the first's, so time goes back by up to D where interfaces interleave, e.g. --interface-skew 1s")
	fs.IntVar(&c.Scanner, "scanner", 0, "add a scanner: 203.0.113.66 sends one TCP SYN to port 22 of each of `K` distinct hosts of 100.64.0.0/11, after the --packets frames (its fan-out for --spread src), e.g. --scanner 500")
	fs.IntVar(&c.Victim, "victim", 0, "add the victim of a SYN flood: `K` distinct hosts of 100.96.0.0/11 each send one TCP SYN to port 80 of 203.0.113.80, after the scanner's (its fan-in for --spread dst), e.g. --victim 2000")
	fs.BoolVar(&c.CutShort, "cut-short", false, "end the file inside one more record (its header and half its data), as a capture whose writer was killed: readers get --packets records, then a truncated file")
}

const genExamples = `  flowdedup gen --packets 2000 --flows 300 -o small.pcap
  flowdedup gen --packets 20000 --flows 2000 --zipf 1.1 --ipv6 0.25 --duration 150s -o zipf.pcap.gz
  flowdedup gen --packets 2000 --flows 300 --vlan --malformed 0.05 --format pcapng -o - | tshark -r - -c 5
  flowdedup gen --packets 5000 --flows 500 --duration 5m --jitter 3s -o backwards.pcap
  flowdedup gen --packets 5000 --flows 500 --interfaces 2 --interface-skew 2s -o twoifaces.pcapng
  flowdedup gen --packets 100 --flows 10 --cut-short -o crashed.pcap
  flowdedup gen --packets 5000 --flows 500 --scanner 300 --victim 2000 -o attacks.pcap   # for --spread
  flowdedup gen --packets 1000 --flows 100 --start 2026-01-01T01:00:00Z -o later.pcap   # with small.pcap: files out of order
`

func genCommand() command {
	return command{
		use:     "gen --packets N --flows F [flags] -o FILE",
		short:   "write a synthetic pcap/pcapng: N packets over F distinct flows",
		long:    "Writes a synthetic capture whose flows, and so whose distinct keys of every kind,\nare known: the summary on stderr gives their counts.",
		example: genExamples,
		bind: func(cmd *cobra.Command) runFunc {
			cfg := GenConfig{Config: gen.Config{Duration: time.Minute, Seed: 1}}
			cfg.BindFlags(cmd.Flags())
			complete(cmd, "format", gen.FormatPcap, gen.FormatPcapNG)
			noArgs(cmd)
			return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				return runGen(ctx, &cfg, args, stdout, stderr)
			}
		},
	}
}

// runGen writes the capture cfg describes.
func runGen(ctx context.Context, cfg *GenConfig, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	if cfg.Packets == 0 || cfg.Flows == 0 {
		return usagef("--packets and --flows are required")
	}
	if cfg.Out == "" {
		return usagef("-o FILE is required (- for stdout)")
	}
	base := cfg.Out
	if trimmed, ok := strings.CutSuffix(base, ".gz"); ok {
		cfg.Gzip = true
		base = trimmed
	}
	if cfg.Format == "" {
		cfg.Format = gen.FormatPcap
		if strings.HasSuffix(base, ".pcapng") {
			cfg.Format = gen.FormatPcapNG
		}
	}
	if err := cfg.Validate(); err != nil {
		var ce *gen.ConfigError
		if errors.As(err, &ce) {
			return usagef("%s", ce.Problem)
		}
		return usageError{err}
	}

	st, err := writeCapture(ctx, cfg.Out, stdout, cfg.Config)
	if err != nil {
		return err
	}
	name := cfg.Out
	if name == "-" {
		name = "stdout"
	}
	format := cfg.Format
	if cfg.Gzip {
		format += ", gzip"
	}
	var messy string
	if st.Backward > 0 {
		messy += fmt.Sprintf("; %d timestamps go back", st.Backward)
	}
	if cfg.CutShort {
		messy += "; then a record cut short"
	}
	if cfg.Scanner > 0 {
		messy += fmt.Sprintf("; scanner 203.0.113.66 to %d destinations", cfg.Scanner)
	}
	if cfg.Victim > 0 {
		messy += fmt.Sprintf("; victim 203.0.113.80 of %d sources", cfg.Victim)
	}
	fmt.Fprintf(stderr, "flowdedup gen: %d packets, %d flows -> %s (%s); keys: %d src, %d dst, %d pair, %d 5tuple; "+
		"%d malformed (%d truncated, %d bad IP version, %d ARP); %d fragments%s\n",
		st.Packets, st.Flows, name, format, st.Sources, st.Destinations, st.Pairs, st.FiveTuples,
		st.Malformed, st.Truncated, st.BadVersion, st.NotIP, st.Fragments, messy)
	return nil
}

// writeCapture writes the capture to path, or to stdout for "-". A failed
// or interrupted write removes the partial file.
func writeCapture(ctx context.Context, path string, stdout io.Writer, cfg gen.Config) (gen.Stats, error) {
	if path == "-" {
		return gen.Write(ctxWriter{ctx, stdout}, cfg)
	}
	f, err := os.Create(path)
	if err != nil {
		return gen.Stats{}, err
	}
	st, err := gen.Write(ctxWriter{ctx, f}, cfg)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return gen.Stats{}, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// ctxWriter fails writes once ctx is done, so that SIGINT stops a long
// generation at its next buffer flush.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

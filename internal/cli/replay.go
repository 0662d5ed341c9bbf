package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flowdedup/flowdedup/capture"
)

// ReplayConfig holds the flags of `flowdedup replay`.
type ReplayConfig struct {
	CaptureConfig
	Stats bool
	Read  []string // -r FILE, as tcpdump takes it
}

// BindFlags registers the replay flags on fs.
func (c *ReplayConfig) BindFlags(fs *pflag.FlagSet) {
	c.CaptureConfig.BindFlags(fs)
	fs.BoolVar(&c.Stats, "stats", c.Stats, "print throughput (packets/s, ns and allocations per packet) on stderr at the end")
	fs.StringArrayVarP(&c.Read, "read", "r", nil, "read capture `FILE` (repeatable), as tcpdump -r does; the same as giving FILE as an argument")
}

const replayLong = `Reads pcap/pcapng files (gzip accepted, several in order) and writes each flow key
the first time it is seen in its window; windows follow packet time, and a window
closes --lateness after the newest packet time passes its end. Replay never drops:
it runs as fast as the workers take keys.

The filter in effect (the spec with the product defaults of the parameters it
leaves out, mem=auto resolved) is printed on stderr at start.`

const replayExamples = `  flowdedup replay testdata/pcaps/zipf.pcap.gz
  flowdedup replay capture.pcapng --key pair --window 1m --summary - --format text
  flowdedup replay --key 5tuple --filter exact --out flows.jsonl day1.pcap day2.pcap.gz
  flowdedup replay -nr capture.pcap -w sources.jsonl     # tcpdump habits: -n, -r FILE, -w FILE
  flowdedup replay --stats --out /dev/null big.pcap      # throughput only
  flowdedup replay --window 1h --export ipfix://127.0.0.1:4739 big.pcap     # to 'nfcapd -w /tmp/flows -p 4739'
  flowdedup replay --window 1h --observer r1 --export clickhouse://127.0.0.1:8123/flows --spool /var/tmp/flowdedup day1.pcap
  flowdedup replay --window 1m --observer r1 --summary-sketch --summary r1.jsonl r1.pcap   # then 'flowdedup merge --by 1h r*.jsonl'
`

func replayCommand() command {
	return command{
		use:     "replay [flags] FILE...",
		short:   "pcap/pcapng files -> distinct flows and window summaries",
		long:    replayLong,
		example: replayExamples,
		bind: func(cmd *cobra.Command) runFunc {
			cfg := ReplayConfig{CaptureConfig: newCaptureConfig()}
			cfg.BindFlags(cmd.Flags())
			completeCaptureFlags(cmd)
			return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				return runReplay(ctx, &cfg, args, stdout, stderr)
			}
		},
	}
}

// runReplay replays files (or cfg.Read) as cfg says.
func runReplay(ctx context.Context, cfg *ReplayConfig, files []string, stdout, stderr io.Writer) error {
	switch {
	case len(cfg.Read) > 0 && len(files) > 0:
		return usagef("give the capture files with -r or as arguments, not both: the order they are read in would be ambiguous")
	case len(cfg.Read) > 0:
		files = cfg.Read
	case len(files) == 0:
		return usagef("no capture file given")
	}
	if err := cfg.check(systemMemory()); err != nil {
		return err
	}
	src, err := capture.OpenFiles(files...)
	if err != nil {
		return err
	}
	defer src.Close()
	fmt.Fprintf(stderr, "flowdedup replay: %s\n", cfg.describe())
	s, err := openSession(ctx, &cfg.CaptureConfig, false, stdout, stderr)
	if err != nil {
		return err
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	err = s.run(ctx, src)
	elapsed := time.Since(start)
	if cfg.Stats {
		runtime.ReadMemStats(&m1)
		st := s.pipe.Stats()
		pkts := max(st.Packets, 1)
		fmt.Fprintf(stderr, "stats: %d packets in %s: %.2f Mpps, %.1f ns/packet, %.3f allocs/packet, %d workers\n",
			st.Packets, elapsed.Round(time.Millisecond), float64(st.Packets)/elapsed.Seconds()/1e6,
			float64(elapsed.Nanoseconds())/float64(pkts), float64(m1.Mallocs-m0.Mallocs)/float64(pkts), cfg.Workers)
	}
	return err
}

package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/flowdedup/flowdedup/capture/pcapfile"
)

const replayExamples = `  flowdedup replay testdata/pcaps/zipf.pcap.gz
  flowdedup replay --key pair --window 1m --summary - --format text capture.pcapng
  flowdedup replay --key 5tuple --filter exact --out flows.jsonl day1.pcap day2.pcap.gz
  flowdedup replay --stats --out /dev/null big.pcap      # throughput only
`

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg CaptureConfig
	var stats bool
	fs := newFlagSet("replay", "[flags] FILE...\n\nReads pcap/pcapng files (gzip accepted, several in order) and writes each flow key\nthe first time it is seen in its window; windows follow packet time. Replay never\ndrops: it runs as fast as the workers take keys.", replayExamples, stderr)
	cfg.BindFlags(fs)
	fs.BoolVar(&stats, "stats", false, "print throughput (packets/s, ns and allocations per packet) on stderr at the end")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usagef("no capture file given")
	}
	if err := cfg.check(); err != nil {
		return err
	}
	src, err := pcapfile.Open(fs.Args()...)
	if err != nil {
		return err
	}
	defer src.Close()
	s, err := openSession(ctx, &cfg, false, stdout, stderr)
	if err != nil {
		return err
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	err = s.run(ctx, src)
	elapsed := time.Since(start)
	if stats {
		runtime.ReadMemStats(&m1)
		st := s.pipe.Stats()
		pkts := max(st.Packets, 1)
		fmt.Fprintf(stderr, "stats: %d packets in %s: %.2f Mpps, %.1f ns/packet, %.3f allocs/packet, %d workers\n",
			st.Packets, elapsed.Round(time.Millisecond), float64(st.Packets)/elapsed.Seconds()/1e6,
			float64(elapsed.Nanoseconds())/float64(pkts), float64(m1.Mallocs-m0.Mallocs)/float64(pkts), cfg.Workers)
	}
	return err
}

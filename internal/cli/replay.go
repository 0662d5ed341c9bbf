package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// ReplayConfig holds the flags of `flowdedup replay`.
type ReplayConfig struct {
	CaptureConfig
	Stats   bool
	Strict  bool     // exit 1 when a capture file was damaged
	Read    []string // -r FILE, as tcpdump takes it
	Parsers int      // goroutines that key the frames; -1 (the default): 0
}

// BindFlags registers the replay flags on fs.
func (c *ReplayConfig) BindFlags(fs *pflag.FlagSet) {
	c.CaptureConfig.BindFlags(fs)
	fs.BoolVar(&c.Stats, "stats", c.Stats, "print throughput (packets/s, ns and allocations per packet) on stderr at the end")
	fs.BoolVar(&c.Strict, "strict", c.Strict, "exit 1 when a capture file was truncated or damaged, once everything readable has been replayed (records, summaries and totals written); without it such a file gets a warning and the exit status is 0")
	fs.IntVar(&c.Parsers, "parsers", -1, "goroutines that key and hash the frames while one goroutine reads the files; 0 (the default): the reading goroutine keys them and runs the workers itself, which costs the least CPU; 2 or more may take less wall time on idle cores. The output is the same for any number")
	fs.StringArrayVarP(&c.Read, "read", "r", nil, "read capture `FILE` (repeatable), as tcpdump -r does; the same as giving FILE as an argument")
	fs.TextVar(&c.Decap, "decap", c.Decap, decapUsage)
}

// decapUsage is the help of --decap.
const decapUsage = "key the innermost IP header through the tunnels in `LIST`: none (the outermost header) | all | a comma list of gre, erspan, vxlan, geneve, gtpu, ipip, with vxlan=PORT[+PORT], geneve=PORT, gtpu=PORT for other ports (4789+8472, 6081, 2152) and novni for no VXLAN/Geneve segment in the keys (docs/keys.md, Tunnels)"

const replayLong = `Reads pcap/pcapng files (gzip accepted, several in order) and writes each flow key
the first time it is seen in its window; windows follow packet time, and a window
closes --lateness after the newest packet time passes its end. Replay never drops:
it runs as fast as the workers take keys.

FILE - reads standard input, as it is written: tcpdump -U -w - | flowdedup replay -
(-U: tcpdump writes each packet at once). When the pipe has been quiet for 100 ms,
the keys read so far are filtered and their records written, so slow traffic is
not held back (not for a gzip stream on a pipe, which waits for more).

The filter in effect (the spec with the product defaults of the parameters it
leaves out, mem=auto resolved) is printed on stderr at start.

A truncated or damaged capture file (an empty one too) gets one warning on stderr
naming the file, the record and its byte offset; what it held before the damage is
replayed, the rest of it skipped, and the files after it are read as usual. Its
summary counts the record it cost as malformed (reason corrupt_file), and the
totals count the file (damaged files, by reason: empty, truncated, damaged); an
empty file cost no record. The exit status stays 0 unless --strict is given. A file that is not a capture at all, or is missing,
stops the replay before it starts.`

const replayExamples = `  flowdedup replay testdata/pcaps/zipf.pcap.gz
  flowdedup replay capture.pcapng --key pair --window 1m --summary - --format text
  flowdedup replay --key 5tuple --filter exact --out flows.jsonl day1.pcap day2.pcap.gz
  flowdedup replay -nr capture.pcap -w sources.jsonl     # tcpdump habits: -n, -r FILE, -w FILE
  flowdedup replay big.pcap --key dst --window 1h -w 'dst-%Y%m%dT%H.jsonl' --retain 48
  flowdedup replay --stats --out /dev/null big.pcap      # throughput only
  flowdedup replay --window 1h --export ipfix://127.0.0.1:4739 big.pcap     # to 'nfcapd -w /tmp/flows -p 4739'
  flowdedup replay --window 1h --observer r1 --export clickhouse://127.0.0.1:8123/flows --spool /var/tmp/flowdedup day1.pcap
  flowdedup replay --window 1m --observer r1 --summary-sketch --summary r1.jsonl r1.pcap   # then 'flowdedup merge --by 1h r*.jsonl'
  flowdedup replay --out /dev/null --cpuprofile cpu.pprof big.pcap && go tool pprof -top cpu.pprof
`

func replayCommand() command {
	return command{
		use:     "replay [flags] FILE...",
		short:   "pcap/pcapng files -> distinct flows and window summaries",
		long:    replayLong + "\n\n" + outputHelp,
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
func runReplay(ctx context.Context, cfg *ReplayConfig, files []string, stdout, stderr io.Writer) (err error) {
	catchHangup()
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
	gc := pipeline.HoldCollections() // no collection in the setup or the run: pipeline.GCHold
	defer gc.Release()
	switch {
	case cfg.Parsers > 1024 || cfg.Parsers < -1:
		return usagef("--parsers %d: give 0 to 1024", cfg.Parsers)
	case cfg.Parsers >= 0:
		cfg.parsers = cfg.Parsers
	} // else 0: the reading goroutine keys the frames and runs the workers, at less CPU than parse goroutines (docs/decisions/replay-inline-workers.md)
	reader, err := pcapfile.Open(files...)
	if err != nil {
		return err
	}
	defer reader.Close()
	// The producer warns while the reporter writes summaries and totals:
	// an *os.File takes concurrent writes, anything else gets a lock.
	if _, ok := stderr.(*os.File); !ok {
		stderr = &lockedWriter{w: stderr}
	}
	src := &warnSource{Reader: reader, warn: stderr, erase: isTerminal(stderr)}
	cfg.damagedFiles = reader.Damaged
	fmt.Fprintf(stderr, "flowdedup replay: %s\n", cfg.describe())
	s, err := openSession(ctx, &cfg.CaptureConfig, sessionMode{name: "replay"}, stdout, stderr)
	if err != nil {
		return err
	}
	// ReadMemStats stops the world and gathers every statistic of the
	// runtime (1-2% of a short replay's CPU): only --stats reads it.
	var m0, m1 runtime.MemStats
	if cfg.Stats {
		runtime.ReadMemStats(&m0)
	}
	start := time.Now()
	gc.Bound()
	err = s.run(ctx, src)
	gc.Release()
	elapsed := time.Since(start)
	if cfg.Stats {
		runtime.ReadMemStats(&m1)
		st := s.pipe.Stats()
		pkts := max(st.Packets, 1)
		fmt.Fprintf(stderr, "stats: %d packets in %s: %.2f Mpps, %.1f ns/packet, %.3f allocs/packet, %d workers\n",
			st.Packets, elapsed.Round(time.Millisecond), float64(st.Packets)/elapsed.Seconds()/1e6,
			float64(elapsed.Nanoseconds())/float64(pkts), float64(m1.Mallocs-m0.Mallocs)/float64(pkts), cfg.Workers)
	}
	damaged := uint64(0)
	for _, n := range reader.Damaged() {
		damaged += n
	}
	if err == nil && cfg.Strict && damaged > 0 {
		err = fmt.Errorf("--strict: %d of %d capture files truncated or damaged (see the warnings above)", damaged, len(files))
	}
	return err
}

// warnSource is replay's capture source: the files, with a warning on
// stderr for each damaged one as it is found (the reader reports a file
// once, then moves on to the next; it counts the file by reason itself,
// pcapfile.Reader.Damaged, for the run totals and --strict). The error
// still goes to the pipeline, which counts the record it cost as a
// malformed frame (malformed_by corrupt_file), unless the file was empty:
// that cost none.
type warnSource struct {
	*pcapfile.Reader
	warn  io.Writer
	erase bool // stderr is a terminal: clear the progress line first
}

func (s *warnSource) Next(p *capture.Packet) error {
	return s.warned(s.Reader.Next(p))
}

func (s *warnSource) NextBatch(b *capture.Batch) error {
	return s.warned(s.Reader.NextBatch(b))
}

// warned writes the warning for err if it is a damaged file's.
func (s *warnSource) warned(err error) error {
	if err != nil && errors.Is(err, capture.ErrCorrupt) {
		line := "flowdedup replay: warning: " + damageWarning(err) + "\n"
		if s.erase {
			line = "\r\033[K" + line
		}
		io.WriteString(s.warn, line)
	}
	return err
}

// damageWarning says what is wrong with a damaged capture file, in the
// words tcpdump users know ("truncated dump file"):
//
//	day.pcap: truncated dump file: record 4 at offset 1234: file ends inside the record data after 12 of its 60 bytes
//	day.pcap: damaged capture file: record 2 at offset 100: captured length 4294967280 exceeds 262144; the rest of the file is skipped
func damageWarning(err error) string {
	var fe *pcapfile.Error
	if !errors.As(err, &fe) {
		return err.Error()
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Sprintf("%s: truncated dump file: %s: %v", fe.Path, fe.Where(), fe.Err)
	}
	return fmt.Sprintf("%s: damaged capture file: %s: %v; the rest of the file is skipped", fe.Path, fe.Where(), fe.Err)
}

// lockedWriter serialises the writes of several goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// isTerminal reports whether w is a terminal, where the progress line is.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

package pipeline

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/gen"
)

// replayBenchPackets is the size of BenchmarkReplay's capture: half of
// make bench-replay's (the same flows per packet, zipf and IPv6 share), so
// that a run is long enough to time and short enough to repeat.
const replayBenchPackets = 1_000_000

// replayCapture writes BenchmarkReplay's capture into a temporary
// directory of b's.
func replayCapture(b *testing.B) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "replay.pcap")
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(out, 1<<20)
	_, err = gen.Write(w, gen.Config{Packets: replayBenchPackets, Flows: replayBenchPackets / 10, Zipf: 1.0, IPv6: 0.2, Seed: 9})
	if err == nil {
		err = w.Flush()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	return path
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReplay replays a generated capture file (1M packets, 100k
// flows, zipf 1.0, 20% IPv6; page cache) as `flowdedup replay --key src`
// does with its default filter, through pcapfile.Reader and the whole
// pipeline, into a Sink that counts, for 1 and 2 workers and several
// numbers of parse goroutines; without parse goroutines the workers run on
// the reading goroutine (inline), or, as /ringed, on goroutines of their
// own as they did before (the pair says what inline saves). Besides wall ns/pkt it reports cpu-ns/pkt,
// the process's user+system CPU time per packet: on a machine shared with
// other jobs the wall time says how long a run waited for a CPU, the CPU
// time what it cost.
func BenchmarkReplay(b *testing.B) {
	path := replayCapture(b)
	for _, c := range []struct {
		workers, parsers int
		ringed           bool
	}{{1, 0, false}, {1, 0, true}, {2, 0, false}, {2, 0, true}, {2, 1, false}, {2, 2, false}} {
		name := fmt.Sprintf("workers=%d/parsers=%d", c.workers, c.parsers)
		if c.ringed {
			name += "/ringed"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var cpu time.Duration
			var packets uint64
			for b.Loop() {
				r, err := pcapfile.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				p, err := New(Config{Workers: c.workers, Parsers: c.parsers, Filter: "qht:mem=1MiB,buckets=4,fpbits=12", Key: flow.KeySrc, Seed: 1}, &countSink{})
				if err != nil {
					b.Fatal(err)
				}
				p.ringed = c.ringed
				c0 := cpuTime(b)
				if err := p.Run(b.Context(), r); err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime(b) - c0
				packets += p.Stats().Packets
				r.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(packets), "ns/pkt")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(packets), "cpu-ns/pkt")
		})
	}
}

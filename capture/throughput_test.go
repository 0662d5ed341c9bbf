//go:build linux && !(mips || mips64 || ppc64 || s390x)

package capture_test

// End-to-end throughput of the three live capture modes on the same
// traffic: a kernel traffic generator (bpf.TrafficGen, BPF_PROG_TEST_RUN in
// live-frames mode) transmits frames of tputFlows flows out of one end of a
// veth pair; the mode under test captures on the other end, and a pipeline
// with the default filter counts them. docs/throughput.md has the numbers
// and what they mean.
//
//	go test -run '^$' -bench Throughput -benchtime 5000000x ./capture/
//
// One benchmark op is one frame: ns/op is the wall time per frame, from
// the first frame sent to the moment the pipeline has accounted for the
// last one.
//
// The veth end that receives frames sent with XDP_TX (the peer's
// ndo_xdp_xmit) must run veth's NAPI receive path, which it does only while
// it has an XDP program or GRO turned on. The xdp and afxdp modes attach
// their own program. The afpacket mode gets a pass-through program
// (bpf.TrafficGen.Pass, which counts the frame and returns XDP_PASS): with
// it the frames take exactly the kernel path they take in the xdp mode (the
// XDP hook, an skb built from the frame, GRO skipped because a program is
// attached, the taps, the stack), except that the hook's program keys
// nothing, so the two modes differ only by what is being compared.
// afpacket-gro turns GRO on instead (the SIOCETHTOOL ioctl: this machine has
// no ethtool), as a check: that path runs each frame through the GRO engine
// (which merges none of these UDP frames), which the xdp mode does not.
// The baseline runs the pass-through program alone, without a capture: the
// cost of the generator, veth and the stack.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/afpacket"
	"github.com/flowdedup/flowdedup/capture/afxdp"
	"github.com/flowdedup/flowdedup/capture/xdp"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/netns"
	"github.com/flowdedup/flowdedup/internal/testutil/testframe"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/record"
)

const (
	// tputFlows is the number of flows (source addresses) of the traffic.
	tputFlows = 4096
	// tputFilter is the pipeline's default filter spec.
	tputFilter = "qht:mem=auto,buckets=4,fpbits=12"
	// tputPoll is every mode's poll timeout: the pipeline's counters catch
	// up with the last frames of a run within about this long (the xdp
	// mode folds its kernel counters in on idle ticks).
	tputPoll = 10 * time.Millisecond
	// tputQuiet: when the pipeline's counters have not moved for this
	// long, the frames still missing are lost.
	tputQuiet = time.Second
	// tputUserHZ is the unit of /proc/stat (USER_HZ, 100 on every Linux
	// architecture Go runs on).
	tputUserHZ = 100
)

// The modes measured.
const (
	// tputBaseline captures nothing: the pass-through program on the
	// receiving end, which counts the frames, and the stack. What the
	// generator, veth and the stack cost without a capture.
	tputBaseline = "baseline"
	tputXDP      = "xdp"
	// tputAFXDP is what `flowdedup run --mode afxdp` opens by default:
	// the in-kernel prefilter (afxdp.Config.Prefilter, the run's key and
	// window) and the default UMEM. Only frames of keys the reader has not
	// handed on yet cross to user space.
	tputAFXDP = "afxdp"
	// tputAFXDPPlain is the plain socket (--afxdp-prefilter=false): every
	// frame crosses.
	tputAFXDPPlain = "afxdp-plain"
	// tputAFXDPPrefilter is afxdp with a larger UMEM (--afxdp-frames
	// 16384): room for the frames that cross before their keys are
	// learnt while the reader is descheduled.
	tputAFXDPPrefilter = "afxdp-prefilter"
	// tputPrefilterFrames is the UMEM of afxdp-prefilter (32 MiB).
	tputPrefilterFrames = 16384
	// tputXDPWindow and tputAFXDPWindow are xdp and afxdp with windows of
	// tputWindow, in the kernel and in the pipeline: every frame takes the
	// kernel's clock, and each key crosses again in each window.
	tputXDPWindow   = "xdp-window"
	tputAFXDPWindow = "afxdp-window"
	// tputAFXDPWindowFrames is afxdp-window with tputPrefilterFrames UMEM
	// frames: room for every key new in a window to cross once.
	tputAFXDPWindowFrames = "afxdp-window-frames"
	tputWindow            = 100 * time.Millisecond
	tputAFPacket          = "afpacket"     // with the pass-through XDP program on the capture end
	tputAFPacketGRO       = "afpacket-gro" // with GRO on the capture end instead
)

// tputFrame is the generator's template: Ethernet, IPv4 (its source and
// checksum rewritten for each frame), UDP 1000 -> 53, 60 bytes in all.
func tputFrame() []byte {
	return testframe.UDP4Frame(netip.MustParseAddr("10.0.0.0"), netip.MustParseAddr("192.0.2.1"), 1000, 53, 60)
}

// tputSink counts the pipeline's records.
type tputSink struct{ records atomic.Uint64 }

func (s *tputSink) Record(*record.Record) error        { s.records.Add(1); return nil }
func (s *tputSink) Window(*record.WindowSummary) error { return nil }
func (s *tputSink) Close() error                       { return nil }

// tputRig is a namespace with a veth pair, the generator on end 1, a capture
// mode on end 0 and a pipeline reading it.
type tputRig struct {
	ns    *netns.Namespace
	gen   *bpf.TrafficGen
	genIf int // ifindex of veth end 1
	frame []byte
	mode  string             // the mode, with the capture's own description
	pipe  *pipeline.Pipeline // nil in the baseline
	sink  *tputSink
	srcs  []capture.Source
}

// newTputGen loads the generator, sends one frame to check that the kernel runs
// it in live-frames mode (nothing is attached to the peer yet: veth drops
// it) and returns it with the ifindex of veth end 1.
func newTputGen(tb testing.TB, ns *netns.Namespace) (*bpf.TrafficGen, int) {
	tb.Helper()
	gen, err := bpf.LoadTrafficGen(tputFlows)
	if err != nil {
		if errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, os.ErrPermission) {
			testutil.SkipOrFail(tb, "cannot load the traffic generator: %v", err)
		}
		tb.Fatalf("LoadTrafficGen: %v", err)
	}
	tb.Cleanup(func() { gen.Close() })
	ifindex := ns.Link(tb, ns.Veth[1]).Attrs().Index
	if err := ns.Do(func() error { return gen.Send(ifindex, tputFrame(), 1) }); err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, ebpf.ErrNotSupported) {
			testutil.SkipOrFail(tb, "the kernel does not run XDP programs in live-frames mode (Linux 5.18+): %v", err)
		}
		tb.Fatalf("traffic generator: %v", err)
	}
	return gen, ifindex
}

// openTputMode opens the capture of mode on veth end 0 and returns its sources
// and a description; everything is closed by tb's cleanup.
func openTputMode(tb testing.TB, ns *netns.Namespace, gen *bpf.TrafficGen, mode string, sockets int) ([]capture.Source, string) {
	tb.Helper()
	iface := ns.Veth[0]
	var srcs []capture.Source
	desc := mode
	err := ns.Do(func() error {
		switch mode {
		case tputXDP, tputXDPWindow:
			x, err := xdp.Open(xdp.Config{Iface: iface, Key: flow.KeySrc, Seed: 1, PollTimeout: tputPoll, Window: tputWindowOf(mode)})
			if err != nil {
				return err
			}
			tb.Cleanup(func() { x.Close() })
			srcs, desc = x.Sources(), fmt.Sprintf("xdp (%s, %d ring sources)", x.Mode(), len(x.Sources()))
		case tputAFXDP, tputAFXDPPlain, tputAFXDPPrefilter, tputAFXDPWindow, tputAFXDPWindowFrames:
			cfg := afxdp.Config{Iface: iface, PollTimeout: tputPoll}
			if mode != tputAFXDPPlain {
				cfg.Prefilter = &afxdp.Prefilter{Kind: flow.KeySrc, Seed: xdp.PrefilterSeed(1), Window: tputWindowOf(mode)}
			}
			if mode == tputAFXDPPrefilter || mode == tputAFXDPWindowFrames {
				// Until the reader has learnt a flow, its frames cross:
				// room for a burst of them while it is descheduled.
				cfg.NumFrames = tputPrefilterFrames
			}
			a, err := afxdp.Open(cfg)
			if err != nil {
				return err
			}
			tb.Cleanup(func() { a.Close() })
			srcs, desc = a.Sources(), fmt.Sprintf("%s (%s, %d sockets)", mode, a.Mode(), len(a.Sources()))
		case tputBaseline, tputAFPacket, tputAFPacketGRO:
			how := "pass-through XDP program"
			if mode != tputAFPacketGRO {
				ifi, err := xdp.InterfaceIndex(iface)
				if err != nil {
					return err
				}
				l, err := link.AttachXDP(link.XDPOptions{Program: gen.Pass(), Interface: ifi, Flags: link.XDPDriverMode})
				if err != nil {
					return fmt.Errorf("%w: attaching the pass-through XDP program: %v", xdp.ErrUnsupported, err)
				}
				tb.Cleanup(func() { l.Close() })
			} else {
				was, err := tputSetGRO(iface, true)
				if err != nil {
					return fmt.Errorf("%w: turning GRO on: %v", xdp.ErrUnsupported, err)
				}
				how = fmt.Sprintf("GRO on (was %v)", was)
			}
			if mode == tputBaseline {
				desc = "baseline (pass-through XDP program, no capture)"
				return nil
			}
			var err error
			srcs, err = afpacket.Open(afpacket.Config{Iface: iface, Sockets: sockets, PollTimeout: tputPoll})
			if err != nil {
				return err
			}
			tb.Cleanup(func() {
				for _, s := range srcs {
					s.Close()
				}
			})
			desc = fmt.Sprintf("%s (%d sockets, %s)", mode, len(srcs), how)
		default:
			return fmt.Errorf("unknown mode %q", mode)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, xdp.ErrUnsupported) || errors.Is(err, xdp.ErrPermission) {
			testutil.SkipOrFail(tb, "mode %s unavailable here: %v", mode, err)
		}
		tb.Fatalf("opening mode %s: %v", mode, err)
	}
	return srcs, desc
}

// tputWindowOf returns the window of mode: tputWindow for the -window
// modes, else 0 (one window).
func tputWindowOf(mode string) time.Duration {
	if mode == tputXDPWindow || mode == tputAFXDPWindow || mode == tputAFXDPWindowFrames {
		return tputWindow
	}
	return 0
}

// newTputRig builds the namespace, the generator, the capture of mode and a
// running pipeline over the capture's sources.
func newTputRig(tb testing.TB, mode string) *tputRig {
	tb.Helper()
	ns := netns.NetNS(tb)
	gen, genIf := newTputGen(tb, ns)
	// One AF_PACKET socket per worker, as flowdedup run does.
	srcs, desc := openTputMode(tb, ns, gen, mode, runtime.NumCPU())
	r := &tputRig{ns: ns, gen: gen, genIf: genIf, frame: tputFrame(), mode: desc, sink: new(tputSink), srcs: srcs}
	if mode == tputBaseline {
		return r
	}
	var err error
	r.pipe, err = pipeline.New(pipeline.Config{
		Filter:           tputFilter,
		Key:              flow.KeySrc,
		Seed:             1,
		Live:             true,
		WallClockWindows: true,
		Window:           tputWindowOf(mode),
		Lateness:         tputWindowOf(mode),
	}, r.sink)
	if err != nil {
		tb.Fatalf("pipeline.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.pipe.Run(ctx, srcs...) }()
	// Registered after the capture's cleanups, so run before them: stop
	// the pipeline, then (in the capture's cleanups) close the sources.
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				tb.Errorf("pipeline: %v", err)
			}
		case <-time.After(time.Minute):
			tb.Errorf("pipeline still running a minute after cancel")
		}
	})
	return r
}

// tputCPU is the machine's and the process's CPU time so far.
type tputCPU struct {
	busy    time.Duration // all CPUs, from /proc/stat: neither idle nor iowait
	softirq time.Duration // all CPUs, the part of busy sampled in softirqs
	proc    time.Duration // this process, user + system (getrusage)
	user    time.Duration // the user part of proc
	// runDelay is the time this process's threads spent runnable but
	// waiting for a CPU (the second field of /proc/self/task/*/schedstat,
	// summed over the threads alive at the sample): the CPU that others
	// took from the pipeline's goroutines and from the generator.
	runDelay time.Duration
}

func sampleTputCPU(tb testing.TB) tputCPU {
	tb.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		tb.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		tb.Fatalf("/proc/stat: first line %q", line)
	}
	// user nice system idle iowait irq softirq steal (guest time is
	// already in user and nice).
	var s tputCPU
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			tb.Fatalf("/proc/stat: %q: %v", line, err)
		}
		d := time.Duration(n) * time.Second / tputUserHZ
		if i != 3 && i != 4 {
			s.busy += d
		}
		if i == 6 {
			s.softirq = d
		}
	}
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	s.proc = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	s.user = time.Duration(ru.Utime.Nano())
	s.runDelay = tputRunDelay()
	return s
}

// tputRunDelay sums the run-queue delay of the process's threads (0 where
// the kernel has no schedstat). Threads that ended in between are missing
// from the later sample, so a difference can only understate the delay; a
// Go process keeps its threads.
func tputRunDelay() time.Duration {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			sum += time.Duration(n)
		}
	}
	return sum
}

// tputResult is what one run measured.
type tputResult struct {
	sent     uint64        // frames the generator transmitted
	elapsed  time.Duration // first frame sent to the last one accounted for (or the last progress)
	sendTime time.Duration // the generator's own time
	cpu      tputCPU       // CPU time over elapsed

	// Pipeline modes: the pipeline's counters at the end and their
	// changes during the run.
	st      pipeline.Stats
	packets uint64 // Stats().Packets
	dropped uint64 // Stats().Dropped: kernel, ring_full, xdp_ring_full
	events  uint64 // keys handed to user space: Keys - Prefiltered
	// lost counts the frames that nobody counted: sent - Packets -
	// DroppedBy["kernel"] in the pipeline modes, sent - passed in the
	// baseline (veth had no room for them).
	lost uint64
}

// processed is the number of frames whose key reached the filters (or the
// prefilter) or which had no key: those not dropped or lost.
func (r *tputResult) processed() uint64 { return r.sent - min(r.sent, r.dropped+r.lost) }

// tputAccounted is how many frames the pipeline has counted, as packets or as
// frames the capture's kernel ring dropped.
func tputAccounted(st *pipeline.Stats) uint64 { return st.Packets + st.DroppedBy["kernel"] }

// tputSettled says whether the workers have caught up with the producers: every
// packet counted is a key the filters took (or the kernel's prefilter), a
// frame without a key or a drop.
func tputSettled(st *pipeline.Stats) bool {
	return st.Packets == st.Malformed+st.Skipped+st.Keys+st.DroppedBy["ring_full"]+st.DroppedBy["xdp_ring_full"]
}

// progress returns how many frames the rig has accounted for so far, and
// whether everything accounted for has been processed.
func (r *tputRig) progress(tb testing.TB) (uint64, bool) {
	if r.pipe == nil {
		n, err := r.gen.Passed()
		if err != nil {
			tb.Fatal(err)
		}
		return n, true
	}
	st := r.pipe.Stats()
	return tputAccounted(&st), tputSettled(&st)
}

// run sends n frames and waits for the pipeline to account for them all and
// for its workers to have taken every key, or to stop making progress.
//
// The CPU figures span the same interval. System-wide busy time is every
// CPU's non-idle time from /proc/stat: the generator (its system call and
// the frames it builds), veth's transmit and receive, the capture's kernel
// side (the XDP program, the AF_XDP copy, AF_PACKET's copy into its ring,
// the stack's handling of the frames the capture passes on), the pipeline's
// goroutines, and anything else the machine ran meanwhile (this test's
// polling of Stats, other processes: little on an idle machine). Without
// CONFIG_IRQ_TIME_ACCOUNTING, softirq work (veth's NAPI receive, which
// runs the capture's kernel side) is charged to the task it interrupted:
// mostly the generator's thread, so the process's own CPU time includes
// it, as well as user space; softirq work deferred to ksoftirqd is not
// the process's.
func (r *tputRig) run(tb testing.TB, n int) tputResult {
	tb.Helper()
	var st0 pipeline.Stats
	if r.pipe != nil {
		st0 = r.pipe.Stats()
	}
	base, _ := r.progress(tb)
	sent0, err := r.gen.Sent()
	if err != nil {
		tb.Fatal(err)
	}
	c0 := sampleTputCPU(tb)
	start := time.Now()
	if err := r.ns.Do(func() error { return r.gen.Send(r.genIf, r.frame, n) }); err != nil {
		tb.Fatalf("send: %v", err)
	}
	sendTime := time.Since(start)
	sent1, err := r.gen.Sent()
	if err != nil {
		tb.Fatal(err)
	}
	res := tputResult{sent: sent1 - sent0, sendTime: sendTime}
	target := base + res.sent
	got, last, lastAt := uint64(0), uint64(math.MaxUint64), time.Now()
	for {
		var ok bool
		got, ok = r.progress(tb)
		now := time.Now()
		if got >= target && ok {
			lastAt = now
			break
		}
		if got != last {
			last, lastAt = got, now
		} else if now.Sub(lastAt) > tputQuiet {
			tb.Logf("%s: stalled: %d of %d frames tputAccounted for (tputSettled %v)", r.mode, got-base, res.sent, ok)
			break
		}
		time.Sleep(time.Millisecond)
	}
	c1 := sampleTputCPU(tb)
	res.elapsed = lastAt.Sub(start)
	res.cpu = tputCPU{c1.busy - c0.busy, c1.softirq - c0.softirq, c1.proc - c0.proc, c1.user - c0.user, max(0, c1.runDelay-c0.runDelay)}
	if r.pipe == nil {
		res.lost = res.sent - min(res.sent, got-base)
		return res
	}
	res.st = r.pipe.Stats()
	st := &res.st
	res.packets = st.Packets - st0.Packets
	res.dropped = st.Dropped - st0.Dropped
	res.events = (st.Keys - st.Prefiltered) - (st0.Keys - st0.Prefiltered)
	if a := tputAccounted(st) - tputAccounted(&st0); a < res.sent {
		res.lost = res.sent - a
	}
	return res
}

// xskStats returns the XDP_STATISTICS of the rig's AF_XDP sockets: which
// of the kernel's reasons its drops had ("" for the other modes).
func (r *tputRig) xskStats() string {
	var parts []string
	for _, src := range r.srcs {
		if s, ok := src.(interface {
			Stats() (unix.XDPStatistics, error)
			Queue() int
		}); ok {
			st, err := s.Stats()
			if err != nil {
				parts = append(parts, fmt.Sprintf("queue %d: %v", s.Queue(), err))
				continue
			}
			parts = append(parts, fmt.Sprintf("queue %d: rx_dropped %d rx_ring_full %d rx_fill_ring_empty_descs %d",
				s.Queue(), st.Rx_dropped, st.Rx_ring_full, st.Rx_fill_ring_empty_descs))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; XDP_STATISTICS " + strings.Join(parts, ", ")
}

// vethDrops returns the drop counters of the pair's ends.
func (r *tputRig) vethDrops(tb testing.TB) string {
	var parts []string
	for _, name := range r.ns.Veth {
		s := r.ns.Link(tb, name).Attrs().Statistics
		if s == nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s rx_dropped %d tx_dropped %d", name, s.RxDropped, s.TxDropped))
	}
	return strings.Join(parts, ", ")
}

func BenchmarkThroughput(b *testing.B) {
	for _, mode := range []string{tputBaseline, tputXDP, tputAFXDP, tputAFXDPPlain, tputAFXDPPrefilter, tputXDPWindow, tputAFXDPWindow, tputAFXDPWindowFrames, tputAFPacket, tputAFPacketGRO} {
		b.Run(mode, func(b *testing.B) { benchmarkThroughputMode(b, mode) })
	}
}

// benchmarkThroughputMode reports, per frame sent:
//
//   - pkts/s: frames processed (their key reached the filters or the XDP
//     prefilter, or they had no key) per second of elapsed time;
//   - gen-pkts/s: frames sent per second of the generator's time, the
//     offered load (the receive side's kernel work slows the generator:
//     it mostly runs in the generator's softirqs, on its CPU);
//   - drops: frames not processed, as the pipeline counts them
//     (DroppedBy: "kernel", the capture's kernel ring was full;
//     "ring_full", a pipeline ring was full; "xdp_ring_full", the XDP
//     program's ring buffer was full, the frame counted and its key lost)
//     plus those nobody counted (veth had no room);
//   - sys-ns/pkt, softirq-ns/pkt, proc-ns/pkt: CPU time (see run);
//   - events/pkt (xdp): keys the kernel handed to user space per frame,
//     the prefilter's effect.
func benchmarkThroughputMode(b *testing.B, mode string) {
	r := newTputRig(b, mode)
	b.ReportAllocs()
	b.ResetTimer()
	res := r.run(b, b.N)
	b.StopTimer()

	n := float64(res.sent)
	b.ReportMetric(float64(res.processed())/res.elapsed.Seconds(), "pkts/s")
	b.ReportMetric(n/res.sendTime.Seconds(), "gen-pkts/s")
	b.ReportMetric(float64(res.dropped+res.lost), "drops")
	b.ReportMetric(float64(res.cpu.busy.Nanoseconds())/n, "sys-ns/pkt")
	b.ReportMetric(float64(res.cpu.softirq.Nanoseconds())/n, "softirq-ns/pkt")
	b.ReportMetric(float64(res.cpu.proc.Nanoseconds())/n, "proc-ns/pkt")
	b.ReportMetric(float64(res.cpu.runDelay.Nanoseconds())/n, "runq-ns/pkt")
	if p := res.processed(); p > 0 {
		// The pipeline's cost per frame it processed, in user mode
		// only (the generator runs in the kernel): what one frame
		// costs the readers and workers, whatever the drops.
		b.ReportMetric(float64(res.cpu.user.Nanoseconds())/float64(p), "user-ns/processed")
	}
	if mode != tputAFXDPPlain && mode != tputAFPacket && mode != tputAFPacketGRO && mode != tputBaseline && res.packets > 0 {
		b.ReportMetric(float64(res.events)/float64(res.packets), "events/pkt")
	}
	if b.N > 1 {
		b.Logf("%s: sent %d in %v (generator %v), pipeline packets %d, dropped %v, lost %d, %d records, run-queue delay %v; %s%s",
			r.mode, res.sent, res.elapsed.Round(time.Millisecond), res.sendTime.Round(time.Millisecond),
			res.packets, res.st.DroppedBy, res.lost, r.sink.records.Load(), res.cpu.runDelay.Round(time.Millisecond), r.vethDrops(b), r.xskStats())
	}
}

// The machinery of the benchmarks, in CI: the generator's frames all reach
// the xdp mode's pipeline, which keys each flow once.
func TestTrafficGenXDP(t *testing.T) {
	r := newTputRig(t, tputXDP)
	const n = 10000
	res := r.run(t, n)
	t.Logf("%s: %d frames in %v, %d events, dropped %v, lost %d, %s", r.mode, res.sent, res.elapsed, res.events, res.st.DroppedBy, res.lost, r.vethDrops(t))
	if res.sent != n {
		t.Fatalf("generator sent %d frames, want %d", res.sent, n)
	}
	if res.packets != n || res.dropped != 0 || res.lost != 0 || res.st.Malformed != 0 || res.st.Skipped != 0 {
		t.Errorf("pipeline counted %d packets (%d dropped %v, %d malformed, %d skipped), want %d, all keyed",
			res.packets, res.dropped, res.st.DroppedBy, res.st.Malformed, res.st.Skipped, n)
	}
	// Each flow reaches user space at least once and at most once per
	// CPU's prefilter.
	if res.events < tputFlows || res.events > uint64(tputFlows*runtime.NumCPU()) {
		t.Errorf("%d events for %d flows", res.events, tputFlows)
	}
	// Records come once the keys have gone through the filters: wait for
	// them (the filter may take a few flows for duplicates, not more).
	testutil.WaitUntil(time.Minute, func() bool { return r.sink.records.Load() >= tputFlows*99/100 })
	if got := r.sink.records.Load(); got < tputFlows*99/100 || got > tputFlows {
		t.Errorf("%d records for %d flows", got, tputFlows)
	}
}

// The AF_XDP prefilter through the pipeline: every frame is counted, as a
// packet that crossed or as one the kernel prefiltered, every one is
// keyed, none is dropped, most never cross, and each flow gets its record,
// as in the xdp mode.
func TestTrafficGenAFXDPPrefilter(t *testing.T) {
	r := newTputRig(t, tputAFXDPPrefilter)
	const n = 10000 // fewer than the rig's UMEM frames: none is dropped, however late the reader
	res := r.run(t, n)
	t.Logf("%s: %d frames in %v, %d crossed, dropped %v, lost %d, %s%s", r.mode, res.sent, res.elapsed, res.events, res.st.DroppedBy, res.lost, r.vethDrops(t), r.xskStats())
	if res.sent != n {
		t.Fatalf("generator sent %d frames, want %d", res.sent, n)
	}
	// run waits a second for the workers to take the last keys; a
	// loaded machine (or -race) can hold them back longer: wait for
	// them here, with a generous bound, and count from then on (the rig
	// is new, so its totals are this run's).
	testutil.WaitFor(t, "the workers to take every key", time.Minute, func() bool {
		st := r.pipe.Stats()
		return tputSettled(&st)
	})
	res.st = r.pipe.Stats()
	st := &res.st
	res.events = st.Keys - st.Prefiltered
	if res.packets != n || res.dropped != 0 || res.lost != 0 || st.Malformed != 0 || st.Skipped != 0 || st.Keys != n {
		t.Errorf("pipeline counted %d packets, %d keys (%d dropped %v, %d malformed, %d skipped, %d late %v), want %d, all keyed",
			res.packets, st.Keys, res.dropped, st.DroppedBy, st.Malformed, st.Skipped, st.Late, st.LateBy, n)
	}
	// Each flow crosses at least once (more often only while its reader
	// has not learnt it yet, which depends on the scheduler), and every
	// frame that did not cross was counted as prefiltered.
	if res.events < tputFlows || st.Prefiltered+res.events != n {
		t.Errorf("%d frames crossed and %d were prefiltered, for %d flows and %d frames", res.events, st.Prefiltered, tputFlows, n)
	}
	testutil.WaitUntil(time.Minute, func() bool { return r.sink.records.Load() >= tputFlows*99/100 })
	if got := r.sink.records.Load(); got < tputFlows*99/100 || got > tputFlows {
		t.Errorf("%d records for %d flows", got, tputFlows)
	}
}

// The generator's frames, as captured on the peer: valid IPv4 checksums,
// and source addresses going round the flows in order.
func TestTrafficGenFrames(t *testing.T) {
	ns := netns.NetNS(t)
	gen, genIf := newTputGen(t, ns)
	srcs, _ := openTputMode(t, ns, gen, tputAFPacket, 1)
	const n = 3 * tputFlows
	if err := ns.Do(func() error { return gen.Send(genIf, tputFrame(), n) }); err != nil {
		t.Fatal(err)
	}
	// n is a multiple of the flows: each source address comes 3 times,
	// whatever frame number the generator started from.
	count := map[netip.Addr]int{}
	for got := 0; got < n; got++ {
		var p capture.Packet
		if err := srcs[0].Next(&p); err != nil {
			t.Fatalf("frame %d of %d: %v", got, n, err)
		}
		f := p.Data
		if len(f) != 60 {
			t.Fatalf("frame %d: %d bytes, want 60", got, len(f))
		}
		ip := f[14:34]
		var sum uint32
		for i := 0; i < len(ip); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(ip[i:]))
		}
		for sum > 0xffff {
			sum = sum&0xffff + sum>>16
		}
		if sum != 0xffff {
			t.Fatalf("frame %d: bad IPv4 header checksum (sum %#x): % x", got, sum, ip)
		}
		count[netip.AddrFrom4([4]byte(ip[12:16]))]++
	}
	for i := range uint32(tputFlows) {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], bpf.TrafficGenSrcBase+i)
		if c := count[netip.AddrFrom4(a)]; c != n/tputFlows {
			t.Errorf("source %v: %d frames, want %d", netip.AddrFrom4(a), c, n/tputFlows)
		}
	}
	if len(count) != tputFlows {
		t.Errorf("%d source addresses, want %d", len(count), tputFlows)
	}
}

// tputSetGRO turns GRO on or off on iface (ETHTOOL_SGRO, as `ethtool -K iface
// gro on|off`) and returns whether it was on.
func tputSetGRO(iface string, on bool) (bool, error) {
	const ethtoolGGRO, ethtoolSGRO = 0x2b, 0x2c
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	ethtool := func(cmd, data uint32) (uint32, error) {
		v := &struct{ cmd, data uint32 }{cmd, data} // struct ethtool_value
		var pin runtime.Pinner
		pin.Pin(v)
		defer pin.Unpin()
		var ifr struct { // struct ifreq
			name [unix.IFNAMSIZ]byte
			data uintptr
			_    [16]byte
		}
		copy(ifr.name[:unix.IFNAMSIZ-1], iface)
		ifr.data = uintptr(unsafe.Pointer(v))
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 {
			return 0, e
		}
		return v.data, nil
	}
	was, err := ethtool(ethtoolGGRO, 0)
	if err != nil {
		return false, fmt.Errorf("ETHTOOL_GGRO: %w", err)
	}
	var d uint32
	if on {
		d = 1
	}
	if _, err := ethtool(ethtoolSGRO, d); err != nil {
		return was != 0, fmt.Errorf("ETHTOOL_SGRO: %w", err)
	}
	return was != 0, nil
}

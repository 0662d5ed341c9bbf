package pipeline

import (
	"math"

	"github.com/flowdedup/flowdedup/flow"
)

// Window indexes. A window is identified by floor(t / Window); with windows
// off every packet is in window 0. Two sentinels extend the index space:
// winUnknown is where a producer (and a worker's view of it) starts when
// the first window is only known from the first packet, and winDone is
// where a producer goes when its input ends. Both compare correctly with
// real indexes: a producer's position only ever grows.
const (
	winUnknown int64 = math.MinInt64
	winDone    int64 = math.MaxInt64
	// winNone marks a ring marker that closes no window (it only moves
	// its producer's low window) and a worker slot that holds no window.
	winNone int64 = math.MinInt64 + 1
)

// MaxOpenWindows bounds how many windows may be open at once (Lateness
// over Window, plus one), so that a worker's filters for them stay a
// small, fixed array: New refuses a Config that would keep more open.
const MaxOpenWindows = 64

// maxGapWindows bounds the empty summaries written for a gap in the
// traffic. A longer gap (a capture paused for a day under one-second
// windows, or a corrupt timestamp years ahead) gets one empty summary that
// spans it, so a bad timestamp cannot make the collator write billions of
// lines.
const maxGapWindows = 100_000

// windowing is the window arithmetic of one run.
type windowing struct {
	d int64 // window length in ns; 0: windows off
	l int64 // allowed lateness in ns (0 with windows off)
}

func newWindowing(cfg *Config) windowing {
	if cfg.Window == 0 {
		return windowing{}
	}
	return windowing{d: int64(cfg.Window), l: int64(cfg.Lateness)}
}

// open returns how many windows can be open at once: a window closes when
// the newest time seen passes its end plus the lateness, so the windows
// of times [T-l, T] are open, ceil(l/d)+1 of them at most.
func (w windowing) open() int {
	if w.d == 0 {
		return 1
	}
	return int((w.l+w.d-1)/w.d) + 1
}

// low returns the oldest window still open once time t has been seen:
// the first window whose end plus the lateness is after t.
func (w windowing) low(t int64) int64 {
	if w.d == 0 {
		return 0
	}
	if t < math.MinInt64+w.l {
		return w.index(math.MinInt64)
	}
	return w.index(t - w.l)
}

// closesAt returns the time whose sight closes window i: its end plus the
// lateness, saturated.
func (w windowing) closesAt(i int64) int64 {
	e := w.end(i)
	if e > math.MaxInt64-w.l {
		return math.MaxInt64
	}
	return e + w.l
}

// index returns the window of time t (Unix ns).
func (w windowing) index(t int64) int64 {
	if w.d == 0 {
		return 0
	}
	i := t / w.d
	if t < 0 && i*w.d != t {
		i-- // floor, for times before 1970
	}
	return i
}

// start returns the start of window i, Unix ns.
func (w windowing) start(i int64) int64 {
	if w.d == 0 {
		return 0
	}
	return satMul(i, w.d)
}

// end returns the end (exclusive) of window i, Unix ns. The producer uses
// it as the time at which its current window ends: never with windows off.
func (w windowing) end(i int64) int64 {
	if w.d == 0 || i == winDone {
		return math.MaxInt64
	}
	if i == winUnknown {
		return math.MinInt64 // the first packet starts a window
	}
	return satMul(i+1, w.d)
}

// satMul is a*b clamped to the int64 range (b > 0).
func satMul(a, b int64) int64 {
	switch {
	case a > math.MaxInt64/b:
		return math.MaxInt64
	case a < math.MinInt64/b:
		return math.MinInt64
	}
	return a * b
}

// Counter indexes. Reasons are flow.Reason's labels plus corruptFile, for a
// source that reported a damaged capture file (capture.ErrCorrupt).
const (
	corruptFile = "corrupt_file"
	maxReasons  = 16

	dropRingFull    = 0 // live: a worker's ring was full
	dropKernel      = 1 // DropCounter: the kernel's capture ring was full
	dropXDPRingFull = 2 // KernelCounter: the XDP program's ring buffer to user space was full
	numDrops        = 3

	lateClosed = 0 // the packet's window had closed: older than every open window
	lateJump   = 1 // the packet's time jumped past every open window and the next packet's time went back (producer.screen)
	numLate    = 2
)

var (
	reasonLabels = append(flow.Reasons(), corruptFile)
	dropLabels   = [numDrops]string{dropRingFull: "ring_full", dropKernel: "kernel", dropXDPRingFull: "xdp_ring_full"}
	lateLabels   = [numLate]string{lateClosed: "window_closed", lateJump: "time_jump"}

	// malformedLabel says which flow.Reason labels are malformed frames
	// (flow.IsMalformed) rather than skipped ones, for the error counts a
	// KernelCounter reports by label.
	malformedLabel = func() map[string]bool {
		m := map[string]bool{}
		for _, err := range []error{flow.ErrTruncated, flow.ErrNotIP, flow.ErrBadHeader, flow.ErrUnsupportedLink, flow.ErrTooManyHeaders, flow.ErrBadKind,
			flow.ErrTunnelTruncated, flow.ErrTunnelBadHeader, flow.ErrTunnelUnknown, flow.ErrTunnelNotData, flow.ErrTunnelTooDeep} {
			m[flow.Reason(err)] = flow.IsMalformed(err)
		}
		return m
	}()
)

func init() {
	if len(reasonLabels) > maxReasons {
		panic("pipeline: flow.Reasons has grown past maxReasons")
	}
}

// reasonIndex returns the index in reasonLabels of the label flow.Reason
// gives err. It does not allocate: a linear search over a handful of
// constant strings, on the error path only.
func reasonIndex(label string) int {
	for i, l := range reasonLabels {
		if l == label {
			return i
		}
	}
	return len(reasonLabels) - 2 // "other"
}

// counts are what a producer counts in one window. They travel to the
// workers in window markers; worker 0 adds up the producers' counts and
// hands them to the collator with its window close.
type counts struct {
	packets   uint64
	prefilter uint64             // keys a KernelCounter's prefilter found already seen (part of the window's keys)
	malformed [maxReasons]uint64 // flow.IsMalformed errors and corrupt files, by reason
	skipped   [maxReasons]uint64 // frames with no IP key, by reason
	dropped   [numDrops]uint64
	late      [numLate]uint64 // packets that came after their window closed, by reason
	firstNs   int64           // earliest packet time seen (math.MaxInt64: none)
	lastNs    int64           // latest packet time seen (math.MinInt64: none)
}

func (c *counts) reset() {
	*c = counts{firstNs: math.MaxInt64, lastNs: math.MinInt64}
}

func (c *counts) add(o *counts) {
	c.packets += o.packets
	c.prefilter += o.prefilter
	for i := range c.malformed {
		c.malformed[i] += o.malformed[i]
		c.skipped[i] += o.skipped[i]
	}
	for i := range c.dropped {
		c.dropped[i] += o.dropped[i]
	}
	for i := range c.late {
		c.late[i] += o.late[i]
	}
	c.firstNs = min(c.firstNs, o.firstNs)
	c.lastNs = max(c.lastNs, o.lastNs)
}

// byLabel returns the non-zero counters of v keyed by label, and their sum.
func byLabel(v []uint64, labels []string) (map[string]uint64, uint64) {
	m := make(map[string]uint64)
	var sum uint64
	for i, n := range v {
		if n != 0 {
			m[labels[i]] = n
			sum += n
		}
	}
	return m, sum
}

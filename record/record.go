package record

import (
	"github.com/flowdedup/flowdedup/flow"
)

// Record is a distinct key: the first time it was seen in its window.
type Record struct {
	Key         flow.Key
	TimeNs      int64 // packet time of the first sighting, Unix ns
	WindowNs    int64 // start of its window, Unix ns (0 when windows are off)
	WindowEndNs int64 // end of its window (0 when windows are off)
	Worker      int   // the shard that reported it
	// ObserverID is the capture.Packet.ObserverID of the first sighting: the
	// key is distinct among that observer's keys of the window. 0 for
	// sources of one observation point.
	ObserverID uint32
	// Windowed says the record has a window (Config.Window is not 0):
	// WindowNs and WindowEndNs are its bounds. It, not a zero bound, is
	// what tells a record of a run without windows: a window may start
	// or end at any int64 time, before 1970, at the epoch itself
	// ([-60s, 0) has end 0, [0, 60s) start 0) or far ahead.
	Windowed bool
}

// WindowSummary describes one closed window (--summary; its fields are in
// docs/architecture.md#records-and-summaries). With windows off, the whole run is one window.
type WindowSummary struct {
	StartNs, EndNs int64
	Packets        uint64            // frames read in the window
	Malformed      uint64            // frames flow.Parse rejected as corrupt (flow.IsMalformed), and damaged capture files
	Keys           uint64            // keys given to the filters, the kernel's prefilter included
	Distinct       uint64            // keys the filters reported unseen
	Dropped        uint64            // keys or frames lost (live only; replay never drops)
	MalformedBy    map[string]uint64 // by flow.Reason, plus "corrupt_file"
	DroppedBy      map[string]uint64 // by reason: "ring_full", "kernel", "xdp_ring_full"
	Final          bool              // the last window, closed at end of input or on a signal
	// Windowed says the run has windows (Config.Window is not 0), so that
	// StartNs and EndNs are a window's nominal bounds (but in a run that
	// keyed no packet at all, whose one summary spans the packets read or
	// the run's wall-clock time). Without windows the one summary spans
	// the packets' times. As for Record.Windowed, no bound being 0 says
	// anything: a window may end or start at the epoch.
	Windowed bool

	// Skipped counts frames that are well formed but carry no IP key (ARP,
	// LLDP, an unknown link type: flow.ErrNotIP, flow.ErrUnsupportedLink),
	// which flow's documentation asks to count apart from the malformed
	// ones. Packets = Malformed + Skipped + Keys + DroppedBy["ring_full"]
	// + DroppedBy["xdp_ring_full"] + Late.
	Skipped   uint64
	SkippedBy map[string]uint64 // by flow.Reason

	// Prefiltered counts the keys of sources that key frames in the
	// kernel (capture.KernelCounter, the XDP fast path) which the kernel's
	// prefilter found already seen in the window, so never handed to the
	// filters: duplicates by the prefilter's judgement. They are part of
	// Keys. 0 for other sources.
	Prefiltered uint64

	// Late counts packets not keyed for their time, by reason:
	// "window_closed", older than every window still open
	// (Config.Lateness); "time_jump", a lone packet far ahead of the
	// packets before and after it (a wrong timestamp; see the package
	// documentation). They are neither keyed nor reported, and are
	// counted, in Packets too, in the newest window open when they came.
	Late   uint64
	LateBy map[string]uint64

	// DistinctEstimate is a HyperLogLog estimate (package sketch) of the
	// distinct keys of the window: every key the workers were given, hashed
	// under Config.SketchSeed, so it is independent of the filters' errors
	// and mergeable across workers, windows and routers. Its standard error
	// is 1.04/sqrt(2^Config.SketchPrecision): 0.81% by default. With a
	// source that keys in the kernel (capture.KernelCounter) the workers
	// get only the keys the kernel's prefilter had not seen in the window,
	// which is each distinct key at least once: the estimate is that of
	// every key of the window all the same (keys the kernel lost to a full
	// ring, and never sent again in the window, are missing, as they are
	// from the records).
	DistinctEstimate uint64
	// Sketch is that HyperLogLog in its binary form (sketch.HLL
	// MarshalBinary, with its precision and seed fingerprint), nil unless
	// Config.KeepSketch. Empty windows carry the form of an empty sketch.
	// Unlike the rest of the summary it is never reused: the pipeline does
	// not write to it after the Window call, so a Sink may keep it.
	Sketch []byte
}

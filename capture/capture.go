package capture

import (
	"errors"

	"github.com/flowdedup/flowdedup/flow"
)

// Packet is one captured frame.
//
// Ownership: Data belongs to the Source and is valid only until the next
// call to Next on the same Source (zero-copy reads, as gopacket's
// ZeroCopyReadPacketData). Copy it to keep it.
type Packet struct {
	Data     []byte        // the captured bytes (at most the snap length)
	WireLen  int           // the frame's length on the wire (>= len(Data))
	TimeNs   int64         // capture time, Unix nanoseconds (packet time for files)
	LinkType flow.LinkType // how to parse Data

	// Key, when valid, is the frame's flow key, already extracted by a
	// source that parses in the kernel (the XDP fast path) or that reads
	// keys rather than frames (collect's flow records). Data is then
	// empty. A source that implements KernelCounter counts the frames
	// behind its keys there, not per Packet; any other source's keyed
	// Packet counts as one packet. Sources of frames leave it zero.
	//
	// Such a source says so in its type: it implements KernelCounter,
	// whose counts stand for the frames behind its keys. The key itself
	// travels in the Packet, rather than through a read method of its own
	// (a KeySource interface), because a key is read like a frame: it
	// comes with its time, in capture order, and goes through the same
	// windows, lateness check and batches. One Next and one producer loop
	// serve both kinds; a second method would need a second copy of that
	// per-packet path, or a type switch on it, to save one branch.
	Key flow.Key

	// ObserverID, when not 0, says which of several observation points a
	// source gathers the frame or key came from (collect's exporters: a
	// router and its observation domain, numbered by the source). The
	// pipeline deduplicates the keys of each observer apart, so that a
	// key two observers saw is reported for each, and hands the number on
	// in its records (record.Record.ObserverID). Sources of one
	// observation point leave it 0.
	ObserverID uint32
}

// Source yields frames in capture order. A Source is used by one goroutine.
type Source interface {
	// Next reads the next frame into p. It returns io.EOF at the end of the
	// input (never for live sources unless closed), ErrClosed after Close,
	// ErrTimeout when a live source saw no frame for its poll interval (so
	// the caller can close windows on an idle link and check for shutdown;
	// a file source returns it too when it reads a pipe whose writer is
	// quiet, so that what it read is handed on),
	// or an error that wraps ErrCorrupt when the input itself is damaged
	// (a record header that cannot be right), and ErrEmpty too when it held
	// no data at all (no frame was lost then). The framing of that input is
	// lost: a single-file source then returns io.EOF, a multi-file source
	// moves on to its next file. The caller counts the error and calls Next
	// again; only io.EOF and ErrClosed end a source.
	Next(p *Packet) error
	// Close releases the source. Next then returns ErrClosed (live sources:
	// a Next blocked in the kernel returns promptly).
	Close() error
}

// DropCounter is implemented by live sources that can tell how many frames
// the kernel dropped because the capture ring was full.
type DropCounter interface {
	// KernelDrops is the number of frames dropped since the source opened.
	KernelDrops() (uint64, error)
}

// KernelCounter is implemented by sources whose frames are parsed and partly
// filtered in the kernel (the XDP fast path): Next returns only the keys the
// kernel's prefilter had not seen, with Packet.Key set, and the frames behind
// them are counted here instead of one Packet each.
type KernelCounter interface {
	// KernelCounts fills c with the source's counts since it opened.
	KernelCounts(c *KernelCounts) error
}

// WindowCounter is implemented by KernelCounters that also count by window
// in the kernel (the XDP fast path): each frame is counted in the window of
// its kernel timestamp, the same time its Packet.TimeNs carries, so a
// window's counts are exact rather than polled near its boundary.
type WindowCounter interface {
	KernelCounter
	// WindowCounts fills c with the counts of window i: the frames whose
	// time t falls in [i*d, (i+1)*d) for the window length d the source
	// was opened with. A window's counts are final once every frame of it
	// has been read from the source. The kernel keeps the counts of the
	// last WindowSlots windows of each CPU: those of older windows are
	// gone, and WindowCounts returns an error wrapping ErrWindowGone.
	WindowCounts(i int64, c *KernelCounts) error
	// WindowSlots is how many recent windows the kernel keeps counts of.
	WindowSlots() int
}

// KernelCounts are the cumulative counts of a KernelCounter. Packets =
// Keyed + the frames in Errors; Keyed = Prefiltered + keys delivered by
// Next + RingFull.
type KernelCounts struct {
	Packets     uint64 // frames the kernel program saw
	Keyed       uint64 // frames that gave a key
	Prefiltered uint64 // keys the kernel's prefilter had seen in the window: not delivered
	RingFull    uint64 // keys lost because the kernel-to-user ring was full
	// Errors counts the frames without a key by flow.Reason label:
	// malformed ones (flow.IsMalformed) and skipped ones ("not_ip") alike.
	// KernelCounts makes the map when it is nil and refills it otherwise,
	// so that polling allocates nothing.
	Errors map[string]uint64
}

// Errors.
var (
	ErrClosed  = errors.New("capture: source closed")
	ErrCorrupt = errors.New("capture: corrupt capture file")
	// ErrEmpty is wrapped, with ErrCorrupt, by the error of an input file
	// that holds no data at all (0 bytes, or gzip data that decompresses
	// to none), such as a capture killed before its first write: not even
	// a header, so no frame either.
	ErrEmpty   = errors.New("capture: empty capture file")
	ErrTimeout = errors.New("capture: no frame within the poll interval")
	// ErrWindowGone: WindowCounts of a window the kernel no longer keeps.
	ErrWindowGone = errors.New("capture: the kernel no longer keeps this window's counts")
)

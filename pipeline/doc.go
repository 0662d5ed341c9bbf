// Package pipeline is flowdedup's data path: it reads packets from capture
// sources, shards their flow keys over per-core workers that each own one
// duplicate filter, and reports the unseen keys and per-window counts to a
// Sink (DESIGN.md section 3).
//
//	source 0 ─ producer 0 ─┬─ ring[0][0] ─┐
//	                       └─ ring[0][1] ─┼─ worker 0 (filter 0) ─┐
//	source 1 ─ producer 1 ─┬─ ring[1][0] ─┘                       ├─ collator ─ Sink
//	                       └─ ring[1][1] ─── worker 1 (filter 1) ─┘
//
// # Data path
//
// One producer goroutine per source reads a frame, keys it (flow.Parse),
// hashes the key with the secret seed (flow.Key.Hash) and picks its shard
// with flow.ShardOf, which remixes the hash so the shard never correlates
// with the bits the filters read. The key, its hash and its packet time are
// written straight into a slot of the single-producer single-consumer ring
// from that producer to that shard's worker; a full slot (a batch of
// BatchSize keys) is published with one atomic store. A key always goes to
// the same worker, so no filter is shared and nothing on the per-packet
// path takes a lock, crosses an atomic or allocates: producers and workers
// exchange batches, the workers and the collator exchange batches of
// records over a channel (one operation per batch) and recycle them.
//
// # Parallel parsing (replay)
//
// With Config.Parsers, a source that frames in bulk (capture.BatchSource:
// replay's files, stdin included) is read by its producer a buffer at a
// time, by reference, and keyed by Parsers goroutines. The producer keeps
// every decision that depends on file order (the time-jump guard, windows,
// lateness, the markers that close windows) and hands each run of frames,
// with the window of each frame and the markers due between them, to the
// next parse goroutine in turn, which keys, hashes and writes the keys into
// its own ring to each worker, then a turn item. Each worker reads the
// parse goroutines' rings in that same turn, so every shard's filter takes
// its keys in file order: records, summaries and Stats are those of the
// producer keying alone, for any number of parse goroutines and any filter.
// Frames the parsers cannot key are counted by them and sent to worker 0
// before the marker that closes their window.
//
// A worker that finds its rings empty yields a few times, then parks on a
// channel; a producer wakes it only when it is parked (one atomic load per
// published batch). Producers blocked on a full ring park the same way.
//
// # Backpressure
//
// Replay (Config.Live false): a producer waits for a full ring, so nothing
// is ever dropped and a slow Sink or filter slows the read of the file.
// Live: a producer that finds a worker's ring full drops the key and counts
// it as DroppedBy["ring_full"] (in the window and in Stats), so the capture
// never stalls because of a slow shard; the kernel then drops nothing on
// our account, and its own drops (capture.DropCounter) are reported as
// DroppedBy["kernel"], polled at every window boundary and at the end.
// Window markers are never dropped, live or not: they wait for a slot.
//
// # Windows, lateness and the marker protocol
//
// With Config.Window, a packet belongs to window floor(t/Window) of its time
// t (packet time; with WallClockWindows the wall clock also moves time on
// idle links). Each key is reported at most once per window: each window
// has its own filter, cleared when the window closes (landmark windows).
//
// Time may go backwards: interfaces interleaved in one pcapng file, several
// capture rings, files merged by hand. A window closes only when a producer
// has seen a time past its end plus Config.Lateness; until then a packet
// of it is keyed in it, even after the next window has begun. A packet
// older than every open window is late: counted by reason (Late,
// LateBy["window_closed"]) in the newest open window, neither keyed nor
// reported, never put in a window it does not belong to. A packet more
// than an hour (or two windows and the lateness) ahead of the newest time
// and of the packet after it is a wrong timestamp, not a jump of the
// clock: it is late for reason "time_jump" (producer.screen; packet-time
// windows only), so that one wrong packet does not close every window and
// make what follows late. Up to
// ceil(Lateness/Window)+1 windows are open at once, and each worker keeps a
// filter for each of them: the filters take that many times the memory of
// the spec.
//
// Each producer keeps its own open windows lo..hi (hi the window of the
// newest time it has seen, lo the oldest still open). Keys of hi are
// written in place into the ring slot of their shard; keys of an older
// open window go through a small side buffer per shard and are copied into
// a slot of their own, so that every batch holds keys of one window. When
// a producer's newest time passes the end of lo plus the lateness, it
// flushes its batches and writes a marker into every one of its rings: "I
// close window lo, here are my counts of it (packets, malformed and skipped
// frames by reason, drops, late packets); I send nothing for windows before
// N". Rings are FIFO, so a worker sees all of a producer's keys of a window
// before the marker that closes it.
//
// A worker holds the windows from the smallest of its producers' N on, one
// filter each; an item of a window further ahead than it has filters for
// waits at the head of its ring until the slowest producer moves on. When
// every producer has closed a window, the worker sends its close to the
// collator (its key and distinct counts; worker 0 also the producers'
// counts) and clears that window's filter. Workers close the same windows
// in the same order. The collator passes records to the Sink as they come,
// whatever their window, and writes a window's summary when every worker
// has closed it: every record of a window comes before its summary, while
// records of the next window may come before it too. Windows with no
// packet between two busy ones get empty summaries, so the summaries form a
// regular time series (a gap of more than 100000 windows gets one summary
// spanning it).
//
// When windows are based on packet time the first window is not known
// before the first packet, so each producer's first packet sends a start
// marker saying where it begins, and workers take no keys before every
// producer has; with windows off (one window, index 0) or wall-clock
// windows, everybody starts in the known windows.
//
// # Distinct-count sketches
//
// Besides its filter, each worker keeps a HyperLogLog (package sketch) for
// each window slot, and adds to it every key of every batch it is given,
// hashed under Config.SketchSeed: not only the keys its filter found
// unseen, so the estimate does not inherit the filter's errors. A cache of
// the flow hashes of the keys it inserted lately (sketchFeed, exact up to
// 64-bit hash collisions) spares the repeats of a flow that hash and
// update. When a worker closes a window it swaps that window's sketch with
// the empty one its output batch carries, and hands the full one to the
// collator with its close; the collator merges the workers' sketches of
// the window (register by register: the sketch of the union of their
// keys), writes the estimate (and, with Config.KeepSketch, the binary
// form) into the summary, and empties the sketches for reuse. Nothing
// allocates per key or, without KeepSketch, per window: each worker has
// 2^p bytes (16 KiB at the default p = 14) and a 128 KiB cache per window
// slot (ceil(Lateness/Window)+1 slots) and 2^p bytes per output batch (4),
// the collator 2^p bytes per window being assembled; KeepSketch allocates
// the encoded sketch of each window (62 bytes empty, about 7.5 KiB full
// at p = 14).
//
// # Lifecycle
//
// New checks the Config and builds the filters; Run runs the pipeline once
// over its sources. At the end of every source (io.EOF), or when the
// caller's context is cancelled, or after a Sink error, each producer
// flushes what it has read and sends a done marker; the workers drain
// their rings, the final window is written (Final) and Sink.Close is
// called. A frame read is never lost to cancellation. Stats is safe from
// any goroutine, during and after Run.
package pipeline

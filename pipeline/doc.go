// Package pipeline is flowdedup's data path: it reads packets from capture
// sources, shards their flow keys over per-core workers that each own one
// duplicate filter per open window, and reports the unseen keys and
// per-window counts to a [Sink].
//
//	source 0 ─ producer 0 ─┬─ ring[0][0] ─┐
//	                       └─ ring[0][1] ─┼─ worker 0 (filter 0) ─┐
//	source 1 ─ producer 1 ─┬─ ring[1][0] ─┘                       ├─ collator ─ Sink
//	                       └─ ring[1][1] ─── worker 1 (filter 1) ─┘
//
// One producer goroutine per source keys each frame (flow.Parse, or the
// key a kernel source made), hashes it with the secret seed and picks its
// worker with flow.ShardOf. Producers and workers exchange batches of keys
// over single-producer single-consumer rings; a key always goes to the same
// worker, so no filter is shared and nothing on the per-packet path takes a
// lock or allocates. The collator hands the Sink each record, and each
// window's summary once every worker has closed the window.
//
// Backpressure: in replay (Config.Live false) a producer waits for a full
// ring, so nothing is dropped. Live, a producer drops a key its worker's
// ring cannot take and counts it (DroppedBy["ring_full"]); the kernel's own
// drops (capture.DropCounter) are counted as DroppedBy["kernel"].
//
// Windows (Config.Window) follow packet time, or the wall clock with
// WallClockWindows. Each key is reported at most once per window. A window
// closes only when time has passed its end plus Config.Lateness, so up to
// ceil(Lateness/Window)+1 windows are open at once, each with its own
// filter in every worker; packets older than every open window are counted
// as late, never keyed. Windows close through markers that the producers
// write into their rings, in order with the keys: the repository's
// docs/architecture.md ("Windows and the marker protocol") describes the
// protocol, the rings and the sketches each worker keeps.
//
// Replay in parallel: with Config.Parsers, a source that frames in bulk
// (capture.BatchSource: replay's files, standard input too) is read a
// buffer at a time by its producer, which keeps every decision that depends
// on file order (windows, lateness, the time-jump guard, the markers), and
// keyed by Parsers goroutines that take its runs of frames in turn; each
// worker reads their rings in the same turn, so every filter takes its keys
// in file order and the output is that of the producer keying alone.
//
// Replay on one goroutine: a replayed source (Config.Live false) that is
// the only one and is keyed by its producer (no Parsers) has no worker
// goroutines: the producer runs each worker itself right after it
// publishes an item into that worker's ring, so a batch is filtered while
// it is still in the core's cache, and nothing parks, spins or crosses
// cores but the records on their way to the collator. The rings, batches
// and markers are the same, and so is the output.
//
// # Lifecycle
//
// [New] checks the Config and builds the filters; [Pipeline.Run] runs the
// pipeline once over its sources and returns when every source has ended
// (io.EOF), or the context was cancelled, or the Sink failed: every frame
// already read is still reported, the final window is written (Final), and
// Sink.Close is called. Run does not close the sources: the caller owns
// them. The Sink is called from the collator goroutine alone. Stats is safe
// from any goroutine, during and after Run.
//
// Example, replaying files into a report.Reporter:
//
//	r, err := pcapfile.Open("day1.pcap", "day2.pcap.gz")
//	rep, err := report.New(report.Config{Out: os.Stdout, Kind: flow.KeySrc})
//	p, err := pipeline.New(pipeline.Config{Key: flow.KeySrc, Window: time.Hour, Filter: "qht:mem=1MiB"}, rep)
//	err = p.Run(ctx, r) // Run closes rep, not r
package pipeline

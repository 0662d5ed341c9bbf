package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// framesPerParser is how many runs of frames each parse goroutine may
// have queued or in hand: enough that the producer reads on while the
// parsers work, few enough that the runs (about 330 KiB of file each)
// stay in the caches.
const framesPerParser = 3

// fanout is a producer's side of parallel parsing (Config.Parsers), for a
// source that frames in bulk (capture.BatchSource): the producer reads
// runs of frames by reference and makes every decision that depends on
// file order (the time-jump guard, windows, lateness, the markers that
// close windows), and hands each run to the next parse goroutine in turn,
// which keys, hashes and routes its frames to the shards' rings. Each
// worker reads the parse goroutines' rings in the same turn (slotTurn), so
// every shard takes its keys, and the markers, in file order: the filters
// see what they would see with the producer parsing alone.
type fanout struct {
	src  capture.BatchSource
	in   []chan *frames // by parse goroutine
	free chan *frames
	cur  *frames // being filled; nil between runs
	at   int     // the frame of cur's batch being handled (Len: after the last)
	next int     // the parse goroutine of the next run
}

// frames is one run of frames: a batch of the source, which of its frames
// are to be keyed and in which window (runs), and what is due between
// them (events: markers, and a frame the time-jump guard held). Frames are
// numbered in the batch's order: its Frames, then its Records.
type frames struct {
	batch  capture.Batch
	runs   []frameRun
	events []frameEvent
}

// frameRun says that the frames [lo, hi) of the batch are to be keyed in
// window w. The producer writes one per change of window, not one per
// frame: most batches have one run. Frames in no run (late, or held by
// the time-jump guard) are not keyed. A run is within the batch's Frames
// or within its Records.
type frameRun struct {
	lo, hi int
	w      int64
}

// frameEvent is what the producer sends before frame at of the batch (at
// = len(frames): after the last): a marker, or a frame the time-jump
// guard held and handed on late, whose bytes are a copy of the producer's.
type frameEvent struct {
	at   int
	mark bool

	// a marker: the window it closes, the producer's next low window and
	// its counts of the window closed
	window int64
	next   int64
	counts counts

	// a held frame
	data []byte
	t, w int64
	link flow.LinkType
}

func newFanout(src capture.BatchSource, parsers int) *fanout {
	f := &fanout{src: src, in: make([]chan *frames, parsers), free: make(chan *frames, parsers*framesPerParser)}
	for i := range f.in {
		f.in[i] = make(chan *frames, framesPerParser)
	}
	for range cap(f.free) {
		f.free <- new(frames)
	}
	return f
}

// take returns the run being filled, starting one if there is none: it
// waits for a parse goroutine to give one back.
func (f *fanout) take() *frames {
	if f.cur == nil {
		fr := <-f.free
		fr.runs, fr.events = fr.runs[:0], fr.events[:0]
		f.cur, f.at = fr, 0
	}
	return f.cur
}

// dispatch hands the run being filled to the next parse goroutine.
func (f *fanout) dispatch() {
	if f.cur == nil {
		return
	}
	f.in[f.next] <- f.cur
	f.next = (f.next + 1) % len(f.in)
	f.cur = nil
}

// end hands on the last run and tells the parse goroutines the source has
// ended.
func (f *fanout) end() {
	f.take() // the last markers may have come after the last run
	f.dispatch()
	for _, c := range f.in {
		close(c)
	}
}

// add queues frame pkt of window w for keying: frame f.at of the batch
// being read, or a packet the time-jump guard held (p.hold), which is in
// the producer's buffer: that one is copied (a rare packet, after a jump)
// into an event before frame f.at.
func (p *producer) add(pkt *capture.Packet, w int64) {
	f := p.fan
	fr := f.take()
	if pkt == &p.hold {
		fr.events = append(fr.events, frameEvent{at: f.at, data: bytes.Clone(pkt.Data), t: pkt.TimeNs, w: w, link: pkt.LinkType})
		return
	}
	fr.keep(f.at, w)
}

// keep adds frame i of window w to the runs; i is past every frame in
// them.
func (fr *frames) keep(i int, w int64) {
	if n := len(fr.runs); n > 0 {
		if r := &fr.runs[n-1]; r.hi == i && r.w == w && i != len(fr.batch.Frames) {
			r.hi++
			return
		}
	}
	fr.runs = append(fr.runs, frameRun{lo: i, hi: i + 1, w: w})
}

// mark queues a marker before frame f.at (see producer.mark).
func (f *fanout) mark(window int64, c *counts, next int64) {
	fr := f.take()
	fr.events = append(fr.events, frameEvent{at: f.at, mark: true, window: window, next: next})
	m := &fr.events[len(fr.events)-1]
	if c != nil {
		m.counts = *c
	} else {
		m.counts.reset()
	}
}

// runBatches is run for a producer with a fanout: the same decisions, in
// the same order, on frames read a batch at a time.
func (p *producer) runBatches() error {
	f := p.fan
	defer f.end()
	defer p.finish()
	defer p.release() // before finish: a held packet is counted in its window
	for {
		if p.stop.Load() {
			return nil // replay: the file is still there
		}
		fr := f.take()
		err := f.src.NextBatch(&fr.batch)
		b := &fr.batch
		for i := range b.Frames {
			p.frame(fr, i, b.Frames[i].TimeNs)
		}
		for i := range b.Records.Len() {
			p.frame(fr, len(b.Frames)+i, b.Records.Time(i))
		}
		f.at = b.Len()
		if err == nil {
			f.dispatch()
			continue
		}
		switch {
		case errors.Is(err, capture.ErrTimeout):
			p.release() // a quiet pipe: nothing contradicts it
			f.dispatch()
			p.publishStats()
			continue
		case errors.Is(err, io.EOF), errors.Is(err, capture.ErrClosed):
			return nil
		case errors.Is(err, capture.ErrEmpty):
			f.dispatch() // an empty file held no frame: nothing to count
			continue
		case errors.Is(err, capture.ErrCorrupt):
			c := p.current()
			c.packets++
			c.malformed[reasonIndex(corruptFile)]++
			f.dispatch()
			continue
		}
		return fmt.Errorf("pipeline: source %d: %w", p.id, err)
	}
}

// frame makes the decisions of frame i of the batch being read, as run
// does for a packet: a frame of window hi that moves no window takes a
// short path.
func (p *producer) frame(fr *frames, i int, t int64) {
	if t < p.next && t >= p.hiStart && !p.held && (p.n+1)%statsEvery != 0 {
		p.n++
		c := p.hiCounts
		c.packets++
		c.firstNs = min(c.firstNs, t)
		c.lastNs = max(c.lastNs, t)
		fr.keep(i, p.hi)
		return
	}
	p.fan.at = i
	b := &fr.batch
	var pkt capture.Packet
	if i < len(b.Frames) {
		fm := &b.Frames[i]
		pkt.Data, pkt.TimeNs, pkt.LinkType = fm.Data, fm.TimeNs, fm.LinkType
	} else {
		pkt.Data, pkt.TimeNs = b.Records.Record(i - len(b.Frames))
		pkt.LinkType = b.Records.LinkType
	}
	if p.guard && (p.held || t >= p.next) && !p.screen(&pkt) {
		return
	}
	p.packet(&pkt)
}

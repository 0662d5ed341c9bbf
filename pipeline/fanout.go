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
	next int     // the parse goroutine of the next run
}

// frames is one run of frames: a batch of the source, what of it is to be
// keyed (recs, in file order, with the window of each) and the markers
// due between them.
type frames struct {
	batch capture.Batch
	recs  []frameRec
	marks []frameMark
}

// frameRec is a frame to key: its bytes (the source's, by reference), its
// time and its window.
type frameRec struct {
	data []byte
	t    int64
	w    int64
	link flow.LinkType
}

// frameMark is a marker the producer sends after recs[:at].
type frameMark struct {
	at     int
	window int64
	next   int64
	counts counts
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
		fr.recs, fr.marks = fr.recs[:0], fr.marks[:0]
		f.cur = fr
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

// add queues frame pkt of window w for keying. A packet the time-jump
// guard held (p.hold) is in the producer's buffer, which the next held
// packet overwrites: it is copied (a rare packet, after a jump).
func (p *producer) add(pkt *capture.Packet, w int64) {
	data := pkt.Data
	if pkt == &p.hold {
		data = bytes.Clone(data)
	}
	fr := p.fan.take()
	fr.recs = append(fr.recs, frameRec{data: data, t: pkt.TimeNs, w: w, link: pkt.LinkType})
}

// fanMark queues a marker after the frames queued so far (see mark).
func (f *fanout) mark(window int64, c *counts, next int64) {
	fr := f.take()
	fr.marks = append(fr.marks, frameMark{at: len(fr.recs), window: window, next: next})
	m := &fr.marks[len(fr.marks)-1]
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
		for i := range fr.batch.Packets {
			pkt := &fr.batch.Packets[i]
			if p.guard && (p.held || pkt.TimeNs >= p.next) && !p.screen(pkt) {
				continue
			}
			p.packet(pkt)
		}
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
			p.damaged(err)
			f.dispatch()
			continue
		}
		return fmt.Errorf("pipeline: source %d: %w", p.id, err)
	}
}

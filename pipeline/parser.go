package pipeline

import (
	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// parser is one parse goroutine of a producer's fanout. It takes every
// len(fanout.in)-th run of frames, keys and hashes its frames, and writes
// the keys into its own ring to each shard: a batch per window, as the
// producer does (the newest window's keys in place, older ones through a
// side buffer). At a marker it publishes what it holds, sends worker 0
// the counts of what it could not key (malformed and skipped frames, by
// window), then the marker to every shard; at the end of the run, the
// same, then a slotTurn item to every shard, which sends the workers on to
// the next parse goroutine's ring.
type parser struct {
	id    int
	kind  flow.KeyKind
	mask  flow.Mask
	decap *flow.Decap // nil without --decap: Decode
	seed  uint64
	src   capture.BatchSource
	in    <-chan *frames
	done  chan<- *frames
	rings []*ring    // by shard
	cur   []*slot    // by shard: the reserved slot being filled, or nil
	side  []sideKeys // by shard: keys of a window older than cur's
	wake  []*parker  // by shard: the worker's parker
	park  *parker    // this parser's, woken by its workers when they free a slot
	full  *ring      // the ring a blocked parser waits on
	hi    int64      // the newest window the parser has had a key of
	ready func() bool

	open  []openCounts // the counts not sent yet, by window modulo len(open)
	total counts       // everything counted, for Stats
	stats *producerStats
}

func newParser(id int, cfg *Config, f *fanout, rings []*ring, wake []*parker) *parser {
	q := &parser{
		id:    id,
		kind:  cfg.Key,
		mask:  cfg.Prefix,
		decap: decapOf(cfg),
		seed:  cfg.Seed,
		src:   f.src,
		in:    f.in[id],
		done:  f.free,
		rings: rings,
		cur:   make([]*slot, len(rings)),
		side:  make([]sideKeys, len(rings)),
		wake:  wake,
		park:  newParker(),
		open:  make([]openCounts, newWindowing(cfg).open()),
		stats: new(producerStats),
	}
	q.ready = q.slotFree
	q.hi = winUnknown
	for s := range q.side {
		q.side[s] = sideKeys{
			hashes: make([]uint64, cfg.BatchSize),
			keys:   make([]flow.Key, cfg.BatchSize),
			times:  make([]int64, cfg.BatchSize),
		}
	}
	for i := range q.open {
		q.open[i].window = winNone
	}
	q.total.reset()
	return q
}

// run parses the runs it is given until the producer ends.
func (q *parser) run() {
	for fr := range q.in {
		q.parse(fr)
		q.src.ReleaseBatch(&fr.batch)
		for i := range fr.events {
			fr.events[i].data = nil // a copy: let it go
		}
		q.done <- fr // never blocks: the pool has room for every run
	}
}

// parse keys one run of frames, with its events in between.
func (q *parser) parse(fr *frames) {
	b := &fr.batch
	e := 0
	for _, r := range fr.runs {
		lo := r.lo
		for lo < r.hi {
			// The frames up to the next event, in one loop.
			hi := r.hi
			for e < len(fr.events) && fr.events[e].at <= lo {
				q.event(&fr.events[e])
				e++
			}
			if e < len(fr.events) {
				hi = min(hi, fr.events[e].at)
			}
			if lo < len(b.Frames) {
				q.frames(b.Frames[lo:hi], r.w)
			} else {
				q.records(&b.Records, lo-len(b.Frames), hi-len(b.Frames), r.w)
			}
			lo = hi
		}
	}
	for ; e < len(fr.events); e++ {
		q.event(&fr.events[e])
	}
	q.flush()
	for s := range q.rings {
		b := q.slot(s)
		b.kind, b.window, b.n = slotTurn, winNone, 0
		q.put(s)
	}
	q.publishStats()
}

// frames keys frames of window w: the hot loop.
func (q *parser) frames(frames []capture.Frame, w int64) {
	for i := range frames {
		f := &frames[i]
		q.frame(f.Data, f.LinkType, f.TimeNs, w)
	}
}

// records keys records [lo, hi) of recs, of window w: the hot loop of
// pcap files.
func (q *parser) records(recs *capture.PcapRecords, lo, hi int, w int64) {
	link := recs.LinkType
	for i := lo; i < hi; i++ {
		data, t := recs.Record(i)
		q.frame(data, link, t, w)
	}
}

// frame keys one frame of window w.
func (q *parser) frame(data []byte, link flow.LinkType, t, w int64) {
	var key flow.Key
	var err error
	if q.decap == nil {
		err = key.Decode(data, link, q.kind)
	} else {
		err = key.DecodeDecap(data, link, q.kind, q.decap)
	}
	if err != nil {
		parseError(q.counts(w), err)
		return
	}
	q.mask.Apply(&key)
	h := flow.HashKey(&key, q.seed)
	q.key(flow.ShardOf(h, len(q.rings)), w, h, &key, t)
}

// event handles what the producer sent before a frame: a marker, or a
// frame the time-jump guard held.
func (q *parser) event(ev *frameEvent) {
	if ev.mark {
		q.mark(ev)
		return
	}
	q.frame(ev.data, ev.link, ev.t, ev.w)
}

// key writes key k of window w, hash h and time t for shard s. As in
// the producer, the slot being filled takes keys of the newest window
// (hi) only and a side buffer the older ones: a window's keys go to the
// slot while it is the newest, to the side buffer after, and the slot is
// always published before the side buffer, so each shard gets each
// window's keys in file order.
func (q *parser) key(s int, w int64, h uint64, k *flow.Key, t int64) {
	if w > q.hi {
		q.hi = w
	} else if w < q.hi {
		q.sideKey(s, w, h, k, t)
		return
	}
	b := q.cur[s]
	if b != nil && b.window != w {
		q.publish(s)
		b = nil
	}
	if b == nil {
		b = q.slot(s)
		b.kind, b.window, b.n = slotData, w, 0
		q.cur[s] = b
	}
	i := b.n
	b.hashes[i] = h
	b.keys[i] = *k
	b.times[i] = t
	b.n = i + 1
	if b.n == len(b.hashes) {
		q.publish(s)
	}
}

// sideKey buffers a key of window w, older than that of shard s's slot.
func (q *parser) sideKey(s int, w int64, h uint64, k *flow.Key, t int64) {
	sk := &q.side[s]
	if sk.n > 0 && (sk.window != w || sk.n == len(sk.hashes)) {
		q.flushSide(s)
	}
	if sk.n == 0 {
		sk.window = w
	}
	i := sk.n
	sk.hashes[i], sk.keys[i], sk.times[i] = h, *k, t
	sk.n = i + 1
}

// flushSide copies shard s's side keys into a slot of their own, after
// the slot being filled (a ring has one slot reserved at a time).
func (q *parser) flushSide(s int) {
	sk := &q.side[s]
	if sk.n == 0 {
		return
	}
	q.publish(s)
	b := q.slot(s)
	b.kind, b.window = slotData, sk.window
	b.n = copy(b.hashes, sk.hashes[:sk.n])
	copy(b.keys, sk.keys[:sk.n])
	copy(b.times, sk.times[:sk.n])
	sk.n = 0
	q.put(s)
}

// flush publishes every shard's keys, then sends worker 0 the counts.
func (q *parser) flush() {
	for s := range q.rings {
		q.flushSide(s)
		q.publish(s)
	}
	for i := range q.open {
		if o := &q.open[i]; o.window != winNone {
			q.sendCounts(o)
		}
	}
}

// mark publishes what the parser holds and sends marker mk to every shard.
func (q *parser) mark(mk *frameEvent) {
	q.flush()
	for s := range q.rings {
		b := q.slot(s)
		b.kind, b.window, b.n, b.next = slotMarker, mk.window, 0, mk.next
		b.counts = mk.counts
		q.put(s)
	}
}

// counts returns the counts of window w, sending worker 0 those of the
// window that had its place.
func (q *parser) counts(w int64) *counts {
	o := &q.open[slotOf(w, len(q.open))]
	if o.window != w {
		if o.window != winNone {
			q.sendCounts(o)
		}
		o.window = w
		o.counts.reset()
	}
	return &o.counts
}

// sendCounts sends worker 0 the counts o and frees their place.
func (q *parser) sendCounts(o *openCounts) {
	q.total.add(&o.counts)
	q.publish(0)
	b := q.slot(0)
	b.kind, b.window, b.n = slotCounts, o.window, 0
	b.counts = o.counts
	q.put(0)
	o.window = winNone
}

// slot reserves the next slot of shard s's ring, waiting for one.
func (q *parser) slot(s int) *slot {
	r := q.rings[s]
	if b := r.reserve(); b != nil {
		return b
	}
	q.full = r
	q.park.park(q.ready)
	q.full = nil
	return r.reserve()
}

// slotFree is the parking condition of slot.
func (q *parser) slotFree() bool { return q.full.reserve() != nil }

// publish hands shard s's slot being filled, if any, to its worker.
func (q *parser) publish(s int) {
	b := q.cur[s]
	if b == nil {
		return
	}
	q.cur[s] = nil
	if b.n == 0 {
		return // reserved but empty: reserve hands out the same slot again
	}
	q.put(s)
}

// put publishes the reserved slot of shard s's ring.
func (q *parser) put(s int) {
	q.rings[s].publish()
	q.wake[s].wake()
}

// publishStats stores what the parser counted for Stats.
func (q *parser) publishStats() {
	st := q.stats
	for i := range st.malformed {
		st.malformed[i].Store(q.total.malformed[i])
		st.skipped[i].Store(q.total.skipped[i])
	}
}

// decapOf returns the Decap the parsers and producers of cfg key frames
// with, or nil when it lists no tunnel: they call Decode then, whose cost
// --decap none keeps.
func decapOf(cfg *Config) *flow.Decap {
	if cfg.Decap.Tunnels == 0 {
		return nil
	}
	d := cfg.Decap
	return &d
}

package collect

import (
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/collect/netflow"
	"github.com/flowdedup/flowdedup/collect/sflow"
	"github.com/flowdedup/flowdedup/flow"
)

// decoder turns the datagrams (or TCP messages) of a source into packets
// for the pipeline: flow records as keys, sFlow samples as the frames they
// carry. It is the part of a source after its socket, and is used by the
// source's goroutine only.
type decoder struct {
	kind  flow.KeyKind
	reg   *registry
	stats *sourceStats
	lim   netflow.Limits
	// ahead is how far a flow's start may be after the arrival of its
	// record (exporters' clocks are not quite in step with ours) before
	// the arrival is taken instead (Config.MaxClockAhead).
	ahead int64

	state    uint8 // what the datagram being read is: stateNone, stateNetFlow, stateSFlow
	exp      *exporter
	obs      *observer // nil until a record of the datagram decodes, when not known before
	dom      *netflow.Domain
	sess     *netflow.Session
	msg      netflow.Message
	sfd      sflow.Datagram
	akey     agentKey
	rec      netflow.Record
	smp      sflow.Sample
	nrec     uint64 // records or samples of the datagram decoded
	missing  uint64 // records of the datagram without a field of the key
	nahead   uint64 // records of the datagram that start after ahead past their arrival
	nbadTime uint64 // records of the datagram whose start is no sane time
	arrival  int64  // when the datagram came, Unix ns (sFlow samples' time)
}

const (
	stateNone = iota
	stateNetFlow
	stateSFlow
)

// startNetFlow begins decoding a NetFlow or IPFIX message from exporter e,
// which came at time now.
func (d *decoder) startNetFlow(b []byte, e *exporter, now int64) {
	d.arrival, d.exp, d.obs = now, e, nil
	d.sess = e.session(d.lim)
	if err := d.msg.Reset(b, d.sess); err != nil {
		d.sessionStats()
		return
	}
	d.dom = d.msg.Domain()
	if tg, _ := d.dom.Tag.(*tag); tg != nil && tg.valid(now) {
		tg.obs.seen.Store(now)
		d.netflowObserver(tg.obs)
	}
	d.state = stateNetFlow
}

// netflowObserver makes o the observer of the message being read.
func (d *decoder) netflowObserver(o *observer) {
	d.obs = o
	o.version.Store(uint32(d.msg.Header.Version))
	o.datagrams.Add(1)
}

// startSFlow begins decoding an sFlow datagram from exporter e, which
// came at time now.
func (d *decoder) startSFlow(b []byte, e *exporter, now int64) {
	d.arrival, d.exp, d.obs = now, e, nil
	if err := d.sfd.Reset(b); err != nil {
		d.sflowStats()
		return
	}
	d.akey = agentKey{d.sfd.Agent.Unmap(), d.sfd.SubAgent}
	if a := e.agents[d.akey]; a != nil && a.valid(now) {
		a.obs.seen.Store(now)
		d.sflowObserver(a)
	}
	d.state = stateSFlow
}

// sflowObserver makes a's observer the observer of the datagram being
// read, and takes its sequence number.
func (d *decoder) sflowObserver(a *agent) {
	a.used = true
	before := a.seq.Lost
	a.seq.Observe(d.sfd.Sequence, 1)
	d.obs = a.obs
	d.obs.version.Store(versionSFlow)
	d.obs.datagrams.Add(1)
	d.obs.lost.Add(a.seq.Lost - before)
}

// register finds the observer of the datagram being read, whose first
// record or sample just decoded: nothing is registered for a datagram
// that decodes none (a flood of damaged datagrams, each naming another
// agent or domain, leaves the registry as it was).
func (d *decoder) register() {
	e := d.exp
	switch d.state {
	case stateNetFlow:
		tg, _ := d.dom.Tag.(*tag)
		if tg == nil {
			tg = new(tag) // once per domain: not per datagram
			d.dom.Tag = tg
		}
		tg.set(d.reg.lookup(e.addr, e.addr, d.dom.ID, d.arrival), d.arrival)
		d.netflowObserver(tg.obs)
	case stateSFlow:
		a := e.agent(d.akey)
		if !a.valid(d.arrival) {
			a.set(d.reg.lookup(e.addr, d.akey.addr, d.akey.sub, d.arrival), d.arrival)
		}
		d.sflowObserver(a)
	}
}

// tag is what a source keeps of the observer of a domain or an sFlow
// agent (netflow.Domain.Tag, agent): the observer, and when one lumped
// with others (OtherObserver, ADDR#other) is to be looked up again, in
// case the registry has room by then.
type tag struct {
	obs   *observer
	retry int64 // Unix ns; 0: never
}

// lumpedRetry is how often an exporter counted as OtherObserver or
// under its address's ShareName is looked up again.
const lumpedRetry = int64(10 * time.Second)

func (tg *tag) set(o *observer, now int64) {
	tg.obs, tg.retry = o, 0
	if o.id == OtherObserver || o.key.share {
		tg.retry = now + lumpedRetry
	}
}

// valid reports whether the observer kept is the one to count under at
// now: known, in the registry, and not lumped past its retry time.
func (tg *tag) valid(now int64) bool {
	return tg.obs != nil && tg.obs.live.Load() && (tg.retry == 0 || now < tg.retry)
}

// next fills p with the next packet of the datagram being read and
// reports whether there was one; at the datagram's end it accounts for it.
func (d *decoder) next(p *capture.Packet) bool {
	switch d.state {
	case stateNetFlow:
		for d.msg.Next(&d.rec) {
			if d.obs == nil {
				d.register()
			}
			d.nrec++
			if d.record(p) {
				return true
			}
			d.missing++
		}
		d.endNetFlow()
	case stateSFlow:
		for d.sfd.Next(&d.smp) {
			if d.obs == nil {
				d.register()
			}
			d.nrec++
			if d.sample(p) {
				return true
			}
			d.missing++
		}
		d.endSFlow()
	}
	return false
}

// record makes the packet of flow record d.rec; false when the record
// lacks a field of the key.
func (d *decoder) record(p *capture.Packet) bool {
	r := &d.rec
	if d.kind == flow.Key5Tuple && !r.HasProto {
		return false
	}
	k := flow.MakeKey(d.kind, r.Src, r.Dst, r.Proto, r.SrcPort, r.DstPort)
	if !k.IsValid() || (k.HasPorts() && !r.HasPorts) {
		return false
	}
	t := r.StartNs
	switch {
	case t < minSaneNs:
		// Before 1993 (NetFlow's first year), before 1970, or no time at
		// all (netflow.BadTime): a broken clock, or a forged record. Its
		// arrival is the better time, and such a time must not make a
		// window of its own.
		t = d.arrival
		d.nbadTime++
	case t > d.arrival+d.ahead:
		// A flow that starts after it was exported: the exporter's clock
		// is wrong (softflowd reading a file sends times from the
		// capture's uptime, weeks ahead; a router's clock may be fast).
		// Its arrival is the better time, and such a time must not close
		// the windows other exporters' records are still coming into.
		t = d.arrival
		d.nahead++
	}
	*p = capture.Packet{Key: k, TimeNs: t, ObserverID: d.obs.id}
	return true
}

// minSaneNs is the earliest flow start taken as it is: 1993-01-01 UTC,
// before any NetFlow exporter.
const minSaneNs = int64(725846400) * 1e9

// DefaultMaxClockAhead is Config.MaxClockAhead's default: exporters'
// clocks kept by NTP are within milliseconds of ours, and a few seconds
// off is not a window's worth.
const DefaultMaxClockAhead = 5 * time.Second

// sample makes the packet of sFlow sample d.smp: its header as a frame,
// or a key of the sampled IP fields.
func (d *decoder) sample(p *capture.Packet) bool {
	s := &d.smp
	if s.Header != nil {
		lt := flow.LinkEthernet
		switch s.Protocol {
		case sflow.ProtoIPv4:
			lt = flow.LinkIPv4
		case sflow.ProtoIPv6:
			lt = flow.LinkIPv6
		}
		*p = capture.Packet{Data: s.Header, WireLen: max(int(s.FrameLength), len(s.Header)), TimeNs: d.arrival, LinkType: lt, ObserverID: d.obs.id}
		return true
	}
	k := flow.MakeKey(d.kind, s.Src, s.Dst, s.Proto, s.SrcPort, s.DstPort)
	if !k.IsValid() {
		return false
	}
	*p = capture.Packet{Key: k, TimeNs: d.arrival, ObserverID: d.obs.id}
	return true
}

// endNetFlow accounts for the message read to its end.
func (d *decoder) endNetFlow() {
	if o := d.obs; o != nil {
		o.records.Add(d.nrec)
		if lost := d.msg.Lost(); lost != 0 {
			o.lost.Add(uint64(lost)) // a negative one takes back: two's complement
		}
		if r := d.dom.SamplingRate; r != 0 {
			o.sampling.Store(r)
		}
	}
	d.stats.records.Add(d.nrec)
	if d.missing != 0 {
		d.stats.errors[errMissing].Add(d.missing)
	}
	if d.nahead != 0 {
		d.stats.startAhead.Add(d.nahead)
	}
	if d.nbadTime != 0 {
		d.stats.errors[errBadTime].Add(d.nbadTime)
	}
	d.sessionStats()
	d.state, d.nrec, d.missing, d.nahead, d.nbadTime, d.obs = stateNone, 0, 0, 0, 0, nil
}

// endSFlow accounts for the datagram read to its end.
func (d *decoder) endSFlow() {
	if o := d.obs; o != nil {
		o.records.Add(d.nrec)
		if d.nrec != 0 && d.smp.SamplingRate != 0 {
			o.sampling.Store(d.smp.SamplingRate)
		}
	}
	d.stats.records.Add(d.nrec)
	if d.missing != 0 {
		d.stats.errors[errMissing].Add(d.missing)
	}
	d.sflowStats()
	d.state, d.nrec, d.missing, d.obs = stateNone, 0, 0, nil
}

// sessionStats moves the counters of the session just used into the
// source's.
func (d *decoder) sessionStats() {
	st := &d.sess.Stats
	for r, n := range st.Errors {
		if n != 0 {
			d.stats.errors[netflowReason[r]].Add(n)
		}
	}
	if st.TemplatesEvicted != 0 {
		d.stats.templatesEvicted.Add(st.TemplatesEvicted)
	}
	if st.DomainsEvicted != 0 {
		d.stats.domainsEvicted.Add(st.DomainsEvicted)
	}
	*st = netflow.Stats{}
}

// sflowStats moves the sFlow decoder's counters into the source's.
func (d *decoder) sflowStats() {
	st := &d.sfd.Stats
	for r, n := range st.Errors {
		if n != 0 {
			d.stats.errors[sflowReason[r]].Add(n)
		}
	}
	if st.Counters != 0 {
		d.stats.counterSamples.Add(st.Counters)
	}
	d.sfd.Stats = sflow.Stats{}
}

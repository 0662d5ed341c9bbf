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

	state   uint8 // what the datagram being read is: stateNone, stateNetFlow, stateSFlow
	obs     *observer
	dom     *netflow.Domain
	sess    *netflow.Session
	msg     netflow.Message
	sfd     sflow.Datagram
	rec     netflow.Record
	smp     sflow.Sample
	nrec    uint64 // records or samples of the datagram decoded
	missing uint64 // records of the datagram without a field of the key
	ahead   uint64 // records of the datagram that start after maxAhead past their arrival
	arrival int64  // when the datagram came, Unix ns (sFlow samples' time)
}

const (
	stateNone = iota
	stateNetFlow
	stateSFlow
)

// startNetFlow begins decoding a NetFlow or IPFIX message from exporter e,
// which came at time now.
func (d *decoder) startNetFlow(b []byte, e *exporter, now int64) {
	d.arrival = now
	d.sess = e.session(d.lim)
	if err := d.msg.Reset(b, d.sess); err != nil {
		d.sessionStats()
		return
	}
	d.dom = d.msg.Domain()
	if d.dom.Tag == 0 {
		d.dom.Tag = d.reg.lookup(e.addr, d.dom.ID).id
	}
	d.obs = d.reg.observers()[d.dom.Tag]
	d.obs.version.Store(uint32(d.msg.Header.Version))
	d.obs.datagrams.Add(1)
	d.state = stateNetFlow
}

// startSFlow begins decoding an sFlow datagram from exporter e, which
// came at time now.
func (d *decoder) startSFlow(b []byte, e *exporter, now int64) {
	if err := d.sfd.Reset(b); err != nil {
		d.sflowStats()
		return
	}
	a := e.agent(agentKey{d.sfd.Agent.Unmap(), d.sfd.SubAgent}, d.reg)
	before := a.seq.Lost
	a.seq.Observe(d.sfd.Sequence, 1)
	d.obs = a.obs
	d.obs.version.Store(versionSFlow)
	d.obs.datagrams.Add(1)
	d.obs.lost.Add(a.seq.Lost - before)
	d.arrival = now
	d.state = stateSFlow
}

// next fills p with the next packet of the datagram being read and
// reports whether there was one; at the datagram's end it accounts for it.
func (d *decoder) next(p *capture.Packet) bool {
	switch d.state {
	case stateNetFlow:
		for d.msg.Next(&d.rec) {
			d.nrec++
			if d.record(p) {
				return true
			}
			d.missing++
		}
		d.endNetFlow()
	case stateSFlow:
		for d.sfd.Next(&d.smp) {
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
	if t > d.arrival+maxAhead {
		// A flow that starts after it was exported: the exporter's clock
		// is wrong (softflowd reading a file sends times from the
		// capture's uptime, weeks ahead). Its arrival is the better time,
		// and such a time must not close the open windows.
		t = d.arrival
		d.ahead++
	}
	*p = capture.Packet{Key: k, TimeNs: t, Observer: d.obs.id}
	return true
}

// maxAhead is how far a flow's start may be after the arrival of its
// record (exporters' clocks are not quite in step with ours) before the
// arrival is taken instead.
const maxAhead = int64(time.Minute)

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
		*p = capture.Packet{Data: s.Header, WireLen: max(int(s.FrameLength), len(s.Header)), TimeNs: d.arrival, LinkType: lt, Observer: d.obs.id}
		return true
	}
	k := flow.MakeKey(d.kind, s.Src, s.Dst, s.Proto, s.SrcPort, s.DstPort)
	if !k.IsValid() {
		return false
	}
	*p = capture.Packet{Key: k, TimeNs: d.arrival, Observer: d.obs.id}
	return true
}

// endNetFlow accounts for the message read to its end.
func (d *decoder) endNetFlow() {
	d.obs.records.Add(d.nrec)
	if lost := d.msg.Lost(); lost != 0 {
		d.obs.lost.Add(uint64(lost)) // a negative one takes back: two's complement
	}
	if r := d.dom.SamplingRate; r != 0 {
		d.obs.sampling.Store(r)
	}
	d.stats.records.Add(d.nrec)
	if d.missing != 0 {
		d.stats.errors[errMissing].Add(d.missing)
	}
	if d.ahead != 0 {
		d.stats.startAhead.Add(d.ahead)
	}
	d.sessionStats()
	d.state, d.nrec, d.missing, d.ahead = stateNone, 0, 0, 0
}

// endSFlow accounts for the datagram read to its end.
func (d *decoder) endSFlow() {
	d.obs.records.Add(d.nrec)
	if d.nrec != 0 && d.smp.SamplingRate != 0 {
		d.obs.sampling.Store(d.smp.SamplingRate)
	}
	d.stats.records.Add(d.nrec)
	if d.missing != 0 {
		d.stats.errors[errMissing].Add(d.missing)
	}
	d.sflowStats()
	d.state, d.nrec, d.missing = stateNone, 0, 0
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

package collect

import (
	"net/netip"

	"github.com/flowdedup/flowdedup/collect/internal/seqnum"
	"github.com/flowdedup/flowdedup/collect/netflow"
)

// exporter is what a source keeps of one address that sends it datagrams:
// a NetFlow/IPFIX session (templates, domains) and the sFlow agents whose
// datagrams come from it.
type exporter struct {
	addr   netip.Addr
	nf     *netflow.Session // nil until its first NetFlow or IPFIX datagram
	agents map[agentKey]*agent
	aclock []agentKey
	ahand  int
	used   bool // sent something since the CLOCK last passed
}

type agentKey struct {
	addr netip.Addr
	sub  uint32
}

// agent is an sFlow agent (and sub-agent) as a source tracks it.
type agent struct {
	seq  seqnum.Counter
	obs  *observer
	used bool
}

// maxAgents bounds the sFlow agents kept per exporter address: an sFlow
// datagram names its agent, so one address could otherwise claim any
// number of them.
const maxAgents = 64

// exporters is a source's table of exporters, bounded: a new exporter
// beyond max evicts one that sent nothing since the CLOCK last passed it
// (its templates are learnt again from its next refresh).
type exporters struct {
	m     map[netip.Addr]*exporter
	clock []netip.Addr
	hand  int
	max   int
	lim   netflow.Limits
	stats *sourceStats
}

func newExporters(max int, lim netflow.Limits, stats *sourceStats) exporters {
	return exporters{m: make(map[netip.Addr]*exporter), max: max, lim: lim, stats: stats}
}

// get returns the exporter of addr, making it if new.
func (t *exporters) get(addr netip.Addr) *exporter {
	if e, ok := t.m[addr]; ok {
		e.used = true
		return e
	}
	if len(t.m) >= t.max {
		t.evict()
	}
	e := &exporter{addr: addr}
	t.m[addr] = e
	t.clock = append(t.clock, addr)
	return e
}

func (t *exporters) evict() {
	for range 2*len(t.clock) + 1 {
		if t.hand >= len(t.clock) {
			t.hand = 0
		}
		a := t.clock[t.hand]
		if e := t.m[a]; e.used {
			e.used = false
			t.hand++
			continue
		}
		delete(t.m, a)
		t.clock = append(t.clock[:t.hand], t.clock[t.hand+1:]...)
		t.stats.exportersEvicted.Add(1)
		return
	}
}

// session returns e's NetFlow session, making it if new.
func (e *exporter) session(lim netflow.Limits) *netflow.Session {
	if e.nf == nil {
		e.nf = netflow.NewSession(lim)
	}
	return e.nf
}

// agent returns the sFlow agent k of e, making it (with its observer from
// reg) if new.
func (e *exporter) agent(k agentKey, reg *registry) *agent {
	if a, ok := e.agents[k]; ok {
		a.used = true
		return a
	}
	if e.agents == nil {
		e.agents = make(map[agentKey]*agent)
	}
	if len(e.agents) >= maxAgents {
		e.evictAgent()
	}
	a := &agent{obs: reg.lookup(k.addr, k.sub)}
	e.agents[k] = a
	e.aclock = append(e.aclock, k)
	return a
}

func (e *exporter) evictAgent() {
	for range 2*len(e.aclock) + 1 {
		if e.ahand >= len(e.aclock) {
			e.ahand = 0
		}
		k := e.aclock[e.ahand]
		if a := e.agents[k]; a.used {
			a.used = false
			e.ahand++
			continue
		}
		delete(e.agents, k)
		e.aclock = append(e.aclock[:e.ahand], e.aclock[e.ahand+1:]...)
		return
	}
}

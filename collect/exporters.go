package collect

import (
	"net/netip"

	"github.com/flowdedup/flowdedup/collect/internal/seqnum"
	"github.com/flowdedup/flowdedup/collect/netflow"
)

// exporter is what a source keeps of one transport session (RFC 7011
// section 3.2: templates and sequence numbers are scoped to it): of a
// UDP source address and port, or of a TCP connection. It holds a
// NetFlow/IPFIX session (templates, domains) and the sFlow agents whose
// datagrams come from its address (sFlow keeps no per-session state: its
// sessions are per address, port 0). The observers its domains are
// counted under (the router's identity, for deduplication) are of the
// address and domain alone: a router that restarts comes from another
// port, and is the same observer.
type exporter struct {
	addr   netip.Addr
	port   uint16           // UDP source port; 0 for sFlow and TCP
	nf     *netflow.Session // nil until its first NetFlow or IPFIX datagram
	agents map[agentKey]*agent
	aclock []agentKey
	ahand  int
	used   bool  // sent something since the CLOCK last passed
	seen   int64 // its last datagram, Unix ns
}

type agentKey struct {
	addr netip.Addr
	sub  uint32
}

// agent is an sFlow agent (and sub-agent) as a source tracks it.
type agent struct {
	tag  // its observer
	seq  seqnum.Counter
	used bool
}

// maxAgents bounds the sFlow agents kept per exporter address: an sFlow
// datagram names its agent, so one address could otherwise claim any
// number of them.
const maxAgents = 64

// maxSessionsPerAddr bounds the transport sessions (source ports) kept
// per address: a new one beyond it takes the place of the address's
// least recently heard, so that one address sending from many ports
// cannot push other exporters out of the table.
const maxSessionsPerAddr = 16

// exporters is a source's table of transport sessions, bounded: a new one
// beyond max evicts one that sent nothing since the CLOCK last passed it
// (its templates are learnt again from its next refresh), and one
// address holds at most maxSessionsPerAddr.
type exporters struct {
	m      map[netip.AddrPort]*exporter
	clock  []netip.AddrPort
	hand   int
	byAddr map[netip.Addr][]*exporter
	max    int
	lim    netflow.Limits
	stats  *sourceStats
}

func newExporters(max int, lim netflow.Limits, stats *sourceStats) exporters {
	return exporters{m: make(map[netip.AddrPort]*exporter), byAddr: make(map[netip.Addr][]*exporter), max: max, lim: lim, stats: stats}
}

// get returns the exporter of the datagram of protocol proto from addr
// and port that came at now, making it if new.
func (t *exporters) get(addr netip.Addr, port uint16, proto Protocol, now int64) *exporter {
	if proto == SFlow {
		port = 0
	}
	k := netip.AddrPortFrom(addr, port)
	if e, ok := t.m[k]; ok {
		e.used, e.seen = true, now
		return e
	}
	if s := t.byAddr[addr]; len(s) >= maxSessionsPerAddr {
		old := s[0]
		for _, e := range s[1:] {
			if e.seen < old.seen {
				old = e
			}
		}
		t.remove(old)
	} else if len(t.m) >= t.max {
		t.evict()
	}
	e := &exporter{addr: addr, port: port, seen: now}
	t.m[k] = e
	t.clock = append(t.clock, k)
	t.byAddr[addr] = append(t.byAddr[addr], e)
	return e
}

func (t *exporters) evict() {
	for range 2*len(t.clock) + 1 {
		if t.hand >= len(t.clock) {
			t.hand = 0
		}
		e := t.m[t.clock[t.hand]]
		if e.used {
			e.used = false
			t.hand++
			continue
		}
		t.remove(e)
		return
	}
}

// remove forgets exporter e, counted, and gives its templates' memory
// back.
func (t *exporters) remove(e *exporter) {
	k := netip.AddrPortFrom(e.addr, e.port)
	delete(t.m, k)
	if i := indexOf(t.clock, k); i >= 0 {
		t.clock = append(t.clock[:i], t.clock[i+1:]...)
		if t.hand > i {
			t.hand--
		}
	}
	s := t.byAddr[e.addr]
	for i, x := range s {
		if x == e {
			s = append(s[:i], s[i+1:]...)
			break
		}
	}
	if len(s) == 0 {
		delete(t.byAddr, e.addr)
	} else {
		t.byAddr[e.addr] = s
	}
	if e.nf != nil {
		if n := e.nf.Release(); n != 0 {
			t.stats.templatesOfEvicted.Add(uint64(n))
		}
	}
	t.stats.exportersEvicted.Add(1)
}

func indexOf(s []netip.AddrPort, k netip.AddrPort) int {
	for i, x := range s {
		if x == k {
			return i
		}
	}
	return -1
}

// session returns e's NetFlow session, making it if new.
func (e *exporter) session(lim netflow.Limits) *netflow.Session {
	if e.nf == nil {
		e.nf = netflow.NewSession(lim)
	}
	return e.nf
}

// agent returns the sFlow agent k of e, making it if new; its observer
// is the caller's to set.
func (e *exporter) agent(k agentKey) *agent {
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
	a := new(agent)
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

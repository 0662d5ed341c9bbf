package collect

import (
	"net/netip"
	"sync"
	"sync/atomic"
)

// Observer numbers (capture.Packet.Observer, pipeline.Record.Observer).
const (
	// OtherObserver numbers every exporter that came after the registry
	// was full (Config.MaxObservers): their keys are deduplicated
	// together, under the name OtherName.
	OtherObserver = 1
	// OtherName is the name of OtherObserver.
	OtherName     = "other"
	firstObserver = 2
)

// observerKey identifies an observer: an exporter's address and domain.
type observerKey struct {
	addr   netip.Addr
	domain uint32
}

// observer is one exporter's observation domain as the collector counts
// it. Its counters are written by the source goroutine that decodes its
// datagrams (one, unless an exporter's datagrams reach several sockets)
// and read by Stats.
type observer struct {
	id     uint32
	name   string
	addr   netip.Addr
	domain uint32

	version   atomic.Uint32 // 5, 9, 10 (IPFIX) or versionSFlow: the last datagram's
	datagrams atomic.Uint64
	records   atomic.Uint64 // flow records and flow samples decoded
	lost      atomic.Uint64 // in the unit of version's sequence numbers (LostUnit)
	sampling  atomic.Uint32 // the last sampling rate said, 0 never
}

// versionSFlow is observer.version for sFlow.
const versionSFlow = 0x5f

// registry numbers the observers of a Collector, shared by its sources.
// It is bounded: past max observers, new exporters all become
// OtherObserver, so that neither memory nor the label cardinality of the
// metrics grows with whatever sends datagrams (or spoofs their source).
// The registry only grows: an observer keeps its number for the
// collector's life, so a record's number always names its exporter.
type registry struct {
	mu       sync.Mutex
	ids      map[observerKey]*observer
	list     atomic.Pointer[[]*observer] // by id; index 0 unused; copy on write
	max      int
	overflow atomic.Uint64 // lookups of new exporters past max
}

func newRegistry(max int) *registry {
	r := &registry{ids: make(map[observerKey]*observer), max: max}
	other := &observer{id: OtherObserver, name: OtherName}
	list := []*observer{nil, other}
	r.list.Store(&list)
	return r
}

// lookup returns the observer of (addr, domain), numbering it if new.
// Sources call it once per new exporter domain and keep the result.
func (r *registry) lookup(addr netip.Addr, domain uint32) *observer {
	addr = addr.Unmap()
	k := observerKey{addr, domain}
	r.mu.Lock()
	defer r.mu.Unlock()
	if o, ok := r.ids[k]; ok {
		return o
	}
	list := *r.list.Load()
	if len(r.ids) >= r.max {
		r.overflow.Add(1)
		return list[OtherObserver]
	}
	o := &observer{id: uint32(len(list)), name: Name(addr, domain), addr: addr, domain: domain}
	r.ids[k] = o
	next := append(list[:len(list):len(list)], o)
	r.list.Store(&next)
	return o
}

// observers returns every observer, by number (index 0 is nil).
func (r *registry) observers() []*observer { return *r.list.Load() }

// name returns the name of observer id, or "" for 0 and unknown numbers.
func (r *registry) name(id uint32) string {
	list := r.observers()
	if id == 0 || int(id) >= len(list) {
		return ""
	}
	return list[id].name
}

package collect

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Observer numbers (capture.Packet.ObserverID, record.Record.ObserverID).
const (
	// OtherObserver numbers every exporter that came after the registry
	// was full (Config.MaxObservers): their keys are deduplicated
	// together, under the name OtherName.
	OtherObserver = 1
	// OtherName is the name of OtherObserver.
	OtherName     = "other"
	firstObserver = 2
)

// Defaults of the registry's Config fields.
const (
	// DefaultObserversPerAddress is the share of the registry one source
	// address may take (its domains, or the sFlow agents its datagrams
	// name); its observers past it are one, named ADDR#other.
	DefaultObserversPerAddress = 64
	// DefaultObserverIdle is how long an observer may send nothing before
	// it leaves the registry (Stats.ObserversEvicted).
	DefaultObserverIdle = time.Hour
)

// ShareName is the name of the observer of the exporters of source
// address addr past its share of the registry (Config.ObserversPerAddress).
func ShareName(addr netip.Addr) string { return addr.String() + "#" + OtherName }

// observerKey identifies an observer: an exporter's address and domain;
// share: the observer of the address's domains past its share.
type observerKey struct {
	addr   netip.Addr
	domain uint32
	share  bool
}

// observer is one exporter's observation domain as the collector counts
// it. Its counters are written by the source goroutine that decodes its
// datagrams and read by Stats.
type observer struct {
	id     uint32
	name   string
	addr   netip.Addr
	domain uint32
	key    observerKey
	src    netip.Addr // the source address whose share it is of

	live      atomic.Bool  // in the registry; false: retired (its name and number kept)
	seen      atomic.Int64 // its last datagram, Unix ns
	retiredAt int64        // under the registry's lock

	version   atomic.Uint32 // 5, 9, 10 (IPFIX) or versionSFlow: the last datagram's
	datagrams atomic.Uint64
	records   atomic.Uint64 // flow records and flow samples decoded
	lost      atomic.Uint64 // in the unit of version's sequence numbers (LostUnit)
	sampling  atomic.Uint32 // the last sampling rate said, 0 never
}

// versionSFlow is observer.version for sFlow.
const versionSFlow = 0x5f

// registry numbers the observers of a Collector, shared by its sources.
// It is bounded, so that neither memory nor the label cardinality of the
// metrics grows with whatever sends datagrams (or spoofs their source):
// one source address takes at most perAddr observers (the rest of its
// domains share one, ShareName), all at most max (the rest: OtherObserver).
// An observer that sent nothing for idle leaves it (evicted, counted) to
// make room; it keeps its number and name among the retired (at most max
// of them, the oldest forgotten first), so that the records it left in
// open windows are still named, and if it comes back it has its number
// again and its keys are deduplicated with those it sent before.
// Numbers are never given to another exporter.
type registry struct {
	mu      sync.RWMutex
	ids     map[observerKey]*observer // live
	byID    map[uint32]*observer      // live and retired
	retired map[observerKey]*observer
	rlist   []retiredObserver // retired, oldest first
	shares  map[netip.Addr]int
	other   *observer
	next    uint32
	max     int
	perAddr int
	idle    int64 // ns
	swept   int64 // the last sweep, Unix ns

	overflow      atomic.Uint64 // lookups of new exporters past max
	shareOverflow atomic.Uint64 // lookups of new exporters past their address's share
	evicted       atomic.Uint64 // observers retired for idleness
}

type retiredObserver struct {
	o  *observer
	at int64
}

func newRegistry(max, perAddr int, idle time.Duration) *registry {
	r := &registry{
		ids: make(map[observerKey]*observer), byID: make(map[uint32]*observer),
		retired: make(map[observerKey]*observer), shares: make(map[netip.Addr]int),
		next: firstObserver, max: max, perAddr: perAddr, idle: int64(idle),
	}
	r.other = &observer{id: OtherObserver, name: OtherName}
	r.other.live.Store(true)
	r.byID[OtherObserver] = r.other
	return r
}

// lookup returns the observer of (addr, domain), whose datagrams came
// from source address src, at time now (Unix ns): numbering it if new,
// bringing it back if retired, or the share's or OtherObserver when
// there is no room. Sources call it once a datagram of a domain they do
// not know decoded a record, and keep the result while it is live.
func (r *registry) lookup(src, addr netip.Addr, domain uint32, now int64) *observer {
	addr, src = addr.Unmap(), src.Unmap()
	k := observerKey{addr: addr, domain: domain}
	r.mu.Lock()
	defer r.mu.Unlock()
	if o, ok := r.ids[k]; ok {
		o.seen.Store(now)
		return o
	}
	o := r.retired[k]
	if o != nil {
		src = o.src
	}
	if r.shares[src] >= r.perAddr {
		r.sweep(now, false)
	}
	if r.shares[src] >= r.perAddr {
		r.shareOverflow.Add(1)
		return r.share(src, now)
	}
	if !r.room(now) {
		return r.other
	}
	if o != nil {
		delete(r.retired, k)
	} else {
		o = &observer{id: r.next, name: Name(addr, domain), addr: addr, domain: domain, key: k, src: src}
		r.next++
		r.byID[o.id] = o
	}
	r.enter(o, now)
	r.shares[src]++
	return o
}

// share returns the observer of src's domains past its share, making it
// if new (OtherObserver when the registry is full).
func (r *registry) share(src netip.Addr, now int64) *observer {
	k := observerKey{addr: src, share: true}
	if o, ok := r.ids[k]; ok {
		o.seen.Store(now)
		return o
	}
	if !r.room(now) {
		return r.other
	}
	o := r.retired[k]
	if o != nil {
		delete(r.retired, k)
	} else {
		o = &observer{id: r.next, name: ShareName(src), addr: src, key: k, src: src}
		r.next++
		r.byID[o.id] = o
	}
	r.enter(o, now)
	return o
}

// room reports whether the registry has room for one more observer,
// retiring the idle ones if it has not; counted as overflow if not.
func (r *registry) room(now int64) bool {
	if len(r.ids) >= r.max {
		r.sweep(now, false)
	}
	if len(r.ids) >= r.max {
		r.overflow.Add(1)
		return false
	}
	return true
}

func (r *registry) enter(o *observer, now int64) {
	o.seen.Store(now)
	o.live.Store(true)
	r.ids[o.key] = o
}

// sweepEvery is the least time between two sweeps for room: a flood of
// new exporters does not make every datagram walk the registry.
const sweepEvery = int64(time.Second)

// sweep retires the observers that sent nothing for r.idle, at most once
// per sweepEvery unless force; then forgets the retired past max.
func (r *registry) sweep(now int64, force bool) {
	if !force && now-r.swept < min(sweepEvery, r.idle) {
		return
	}
	r.swept = now
	for k, o := range r.ids {
		if now-o.seen.Load() <= r.idle {
			continue
		}
		delete(r.ids, k)
		o.live.Store(false)
		o.retiredAt = now
		r.retired[k] = o
		r.rlist = append(r.rlist, retiredObserver{o, now})
		if !k.share {
			if r.shares[o.src]--; r.shares[o.src] <= 0 {
				delete(r.shares, o.src)
			}
		}
		r.evicted.Add(1)
	}
	// Forget the oldest retired past max; entries of observers that came
	// back (or retired again later) are stale and dropped on the way.
	stale := func(e retiredObserver) bool { return e.o.live.Load() || e.o.retiredAt != e.at }
	for len(r.retired) > r.max && len(r.rlist) > 0 {
		e := r.rlist[0]
		r.rlist = r.rlist[1:]
		if !stale(e) {
			delete(r.retired, e.o.key)
			delete(r.byID, e.o.id)
		}
	}
	if len(r.rlist) > 2*r.max+16 {
		r.rlist = slices.DeleteFunc(r.rlist, stale)
	}
}

// observers sweeps (so that the registry shrinks when nothing new comes)
// and returns the live observers by number, OtherObserver first.
func (r *registry) observers(now int64) []*observer {
	r.mu.Lock()
	r.sweep(now, false)
	list := make([]*observer, 0, len(r.ids)+1)
	list = append(list, r.other)
	for _, o := range r.ids {
		list = append(list, o)
	}
	r.mu.Unlock()
	slices.SortFunc(list[1:], func(a, b *observer) int { return cmp.Compare(a.id, b.id) })
	return list
}

// name returns the name of observer id, live or retired, or "" for 0 and
// unknown numbers.
func (r *registry) name(id uint32) string {
	r.mu.RLock()
	o := r.byID[id]
	r.mu.RUnlock()
	if o == nil {
		return ""
	}
	return o.name
}

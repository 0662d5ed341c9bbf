package collect

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/collect/collecttest"
	"github.com/flowdedup/flowdedup/collect/netflow"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil/testframe"
)

// routers are the two routers of the registry tests, each from a
// loopback address of its own.
var routers = []struct{ from, agent string }{{"127.0.0.2", "192.0.2.1"}, {"127.0.0.3", "192.0.2.2"}}

// sflowFrame is the packet header the routers' sFlow samples carry.
var sflowFrame = testframe.UDP4Frame(netip.MustParseAddr("10.1.1.1"), netip.MustParseAddr("10.2.2.2"), 1, 2, 46)

// checkRouters sends each router's datagrams (n sFlow datagrams of one
// sample, or v5 messages of n records) and checks that the records are
// counted under their own names with their own counts, and that the
// keys of their packets are named after them.
func checkRouters(t *testing.T, c *Collector, sflow bool, n int, taken0 uint64) {
	t.Helper()
	want := []int{n, n} // records of each router
	var datagrams uint64
	for i, r := range routers {
		conn := exporterConn(t, r.from, c.Addrs()[0])
		if sflow {
			a := &collecttest.SFlow{Agent: netip.MustParseAddr(r.agent)}
			for range n {
				write(t, conn, a.Datagram([]collecttest.SFlowSample{{Header: sflowFrame, Protocol: 1, FrameLength: 60, SamplingRate: 10}}, false))
			}
		} else {
			e := collecttest.Exporter{Version: 5, Boot: exportTime.Add(-time.Hour), Domain: uint32(i)}
			flows := collecttest.Flows(n, uint64(i+1), exportTime)
			want[i] = 0
			for _, f := range flows {
				if f.Src.Is4() {
					want[i]++ // v5 carries IPv4 flows alone
				}
			}
			msgs := e.Encode(exportTime, flows, 30)
			write(t, conn, msgs...)
			datagrams += uint64(len(msgs))
		}
	}
	if sflow {
		datagrams = uint64(2 * n)
	}
	got := pump(t, c, taken(taken0+datagrams))
	byName := map[string]int{}
	for _, p := range got {
		byName[c.ObserverName(p.observer)]++
	}
	st := c.Stats()
	found := 0
	for i, r := range routers {
		name := fmt.Sprintf("%s#%d", r.agent, 0)
		if !sflow {
			name = fmt.Sprintf("%s#%d", r.from, i)
		}
		for _, o := range st.Observers {
			if o.Name != name {
				continue
			}
			found++
			if o.Records != uint64(want[i]) || (sflow && o.Datagrams != uint64(n)) {
				t.Errorf("%s: %d datagrams, %d records; want %d records", name, o.Datagrams, o.Records, want[i])
			}
		}
		if byName[name] != want[i] {
			t.Errorf("%s: %d packets, want %d (by name: %v)", name, byName[name], want[i], byName)
		}
	}
	if found != 2 {
		t.Errorf("%d of the two routers in the registry: %+v", found, st.Observers)
	}
	if st.ObserverOverflow != 0 {
		t.Errorf("observer overflow %d: the routers were lumped together", st.ObserverOverflow)
	}
}

// TestRegistryTruncatedFlood: 1100 truncated sFlow datagrams from one
// address, each naming another agent (issue 25, item 3), are counted as
// truncated and register nothing; two routers after them keep their own
// names and counts.
func TestRegistryTruncatedFlood(t *testing.T) {
	c := open(t, SFlow, flow.KeySrc, nil)
	flood := exporterConn(t, "127.0.0.1", c.Addrs()[0])
	const n = 1100
	for i := range n {
		a := &collecttest.SFlow{Agent: netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)})}
		d := a.Datagram([]collecttest.SFlowSample{{Header: sflowFrame, Protocol: 1, FrameLength: 60, SamplingRate: 10}}, false)
		write(t, flood, d[:len(d)-20]) // the sample cut short
		if i%100 == 99 {
			pump(t, c, taken(uint64(i+1))) // the socket buffer holds them all, but need not
		}
	}
	pump(t, c, taken(n))
	st := c.Stats()
	if st.Errors["truncated"] != n || len(st.Observers) != 1 || st.KernelDrops != 0 {
		t.Fatalf("truncated %d (want %d), %d observers (want other alone), kernel drops %d", st.Errors["truncated"], n, len(st.Observers), st.KernelDrops)
	}
	checkRouters(t, c, true, 20, n)
}

// TestRegistryAgentFlood: 1100 valid sFlow datagrams from one address,
// each naming another agent: the address takes its share of the registry
// (64), the rest of its agents are one observer, ADDR#other, counted; two
// routers after them keep their own names and counts.
func TestRegistryAgentFlood(t *testing.T) {
	c := open(t, SFlow, flow.KeySrc, nil)
	flood := exporterConn(t, "127.0.0.1", c.Addrs()[0])
	const n = 1100
	var got []packet
	for i := range n {
		a := &collecttest.SFlow{Agent: netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)})}
		write(t, flood, a.Datagram([]collecttest.SFlowSample{{Header: sflowFrame, Protocol: 1, FrameLength: 60, SamplingRate: 10}}, false))
		if i%100 == 99 {
			got = append(got, pump(t, c, taken(uint64(i+1)))...)
		}
	}
	got = append(got, pump(t, c, taken(n))...)
	share := 0
	for _, p := range got {
		if c.ObserverName(p.observer) == "127.0.0.1#other" {
			share++
		}
	}
	st := c.Stats()
	if len(st.Observers) != 1+DefaultObserversPerAddress+1 || st.ObserverShareOverflow != n-DefaultObserversPerAddress || share != n-DefaultObserversPerAddress {
		t.Fatalf("%d observers (want other, %d agents and 127.0.0.1#other), share overflow %d, %d samples as 127.0.0.1#other; want %d",
			len(st.Observers), DefaultObserversPerAddress, st.ObserverShareOverflow, share, n-DefaultObserversPerAddress)
	}
	checkRouters(t, c, true, 20, n)
}

// TestRegistryDomainFlood: from one address, 1100 NetFlow v9 messages of
// random observation domains without a record, then 1100 v5 messages of
// random engine IDs with one each: the first register nothing, the
// second take the address's share; two routers after them keep their
// own names and counts.
func TestRegistryDomainFlood(t *testing.T) {
	c := open(t, NetFlow, flow.KeySrc, nil)
	flood := exporterConn(t, "127.0.0.1", c.Addrs()[0])
	const n = 1100
	rng := uint32(12345)
	random := func() uint32 { rng = rng*1664525 + 1013904223; return rng }
	for i := range n {
		h := make([]byte, 20)
		binary.BigEndian.PutUint16(h, 9)
		binary.BigEndian.PutUint32(h[8:], uint32(exportTime.Unix()))
		binary.BigEndian.PutUint32(h[16:], random())
		write(t, flood, h)
		if i%100 == 99 {
			pump(t, c, taken(uint64(i+1)))
		}
	}
	pump(t, c, taken(n))
	if st := c.Stats(); len(st.Observers) != 1 {
		t.Fatalf("%d observers after messages without records, want other alone", len(st.Observers))
	}
	domains := map[uint32]bool{}
	sent := uint64(n)
	flows := collecttest.Flows(2*n, 1, exportTime)
	for i := range n {
		e := collecttest.Exporter{Version: 5, Boot: exportTime.Add(-time.Hour), Domain: random() & 0xffff}
		msgs := e.Encode(exportTime, flows[i:i+1], 1) // none for an IPv6 flow
		if len(msgs) != 0 {
			domains[e.Domain] = true
		}
		write(t, flood, msgs...)
		sent += uint64(len(msgs))
		if i%100 == 99 {
			pump(t, c, taken(sent))
		}
	}
	pump(t, c, taken(sent))
	st := c.Stats()
	if len(domains) < 2*DefaultObserversPerAddress {
		t.Fatalf("%d domains: not a flood", len(domains))
	}
	if len(st.Observers) != 1+DefaultObserversPerAddress+1 || st.ObserverShareOverflow == 0 {
		t.Fatalf("%d observers (want other, %d domains and 127.0.0.1#other), share overflow %d", len(st.Observers), DefaultObserversPerAddress, st.ObserverShareOverflow)
	}
	checkRouters(t, c, false, 60, sent)
}

// TestRegistryIdle: observers idle past the idle time leave the registry
// (counted) to make room; a retired one keeps its name, and its number if
// it comes back; the retired past the bound are forgotten.
func TestRegistryIdle(t *testing.T) {
	const minute = int64(time.Minute)
	r := newRegistry(4, 3, time.Hour)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	var ids []uint32
	for d := range uint32(3) {
		ids = append(ids, r.lookup(a, a, d, 0).id)
	}
	if o := r.lookup(a, a, 3, 0); o.name != "192.0.2.1#other" || r.shareOverflow.Load() != 1 {
		t.Errorf("a's fourth domain: %q, share overflow %d; want 192.0.2.1#other, 1", o.name, r.shareOverflow.Load())
	}
	if o := r.lookup(b, b, 0, 0); o.id != OtherObserver || r.overflow.Load() != 1 {
		t.Errorf("b while full: %q, overflow %d; want other, 1", o.name, r.overflow.Load())
	}
	r.lookup(a, a, 0, 30*minute).seen.Store(90 * minute) // domain 0 is busy
	ob := r.lookup(b, b, 0, 90*minute)                   // the others idle for 90 minutes
	if ob.id == OtherObserver || r.evicted.Load() != 3 || len(r.ids) != 2 {
		t.Fatalf("b after an hour: %q; %d evicted, %d live; want its own, 3 (a#1, a#2, a#other), 2", ob.name, r.evicted.Load(), len(r.ids))
	}
	if r.name(ids[1]) != "192.0.2.1#1" {
		t.Errorf("a retired observer's name: %q", r.name(ids[1]))
	}
	if o := r.lookup(a, a, 1, 91*minute); o.id != ids[1] || !o.live.Load() {
		t.Errorf("a#1 back: number %d, want %d", o.id, ids[1])
	}
	if n := len(r.observers(91 * minute)); n != 4 {
		t.Errorf("%d observers listed, want other, a#0, a#1, b#0", n)
	}
	// Retire more than max: the oldest are forgotten, nothing else.
	for d := range uint32(20) {
		r.lookup(b, b, 100+d, int64(200+2*d)*minute)
	}
	if len(r.retired) > 4 || len(r.byID) > 1+4+4 {
		t.Errorf("%d retired, %d named: over the bounds", len(r.retired), len(r.byID))
	}
}

// TestLumpedLookedUpAgain: an exporter that came while the registry was
// full counts as other; looked up again (every 10 s) once an idle
// observer has left, it has one of its own.
func TestLumpedLookedUpAgain(t *testing.T) {
	reg := newRegistry(2, DefaultObserversPerAddress, time.Minute)
	st := new(sourceStats)
	d := decoder{kind: flow.KeySrc, reg: reg, stats: st, lim: netflow.Limits{Budget: netflow.NewBudget(1 << 20)}, ahead: int64(DefaultMaxClockAhead)}
	exps := newExporters(16, d.lim, st)
	f := []collecttest.Flow{{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 6, SrcPort: 1, DstPort: 2,
		Start: exportTime.Add(-time.Minute), End: exportTime}}
	decode := func(from string, now time.Duration) string {
		t.Helper()
		e := exps.get(netip.MustParseAddr(from), 2055, NetFlow, exportTime.Add(now).UnixNano())
		x := collecttest.Exporter{Version: 5, Boot: exportTime.Add(-time.Hour)}
		d.startNetFlow(x.Encode(exportTime, f, 1)[0], e, exportTime.Add(now).UnixNano())
		var p capture.Packet
		name := ""
		for d.next(&p) {
			name = reg.name(p.ObserverID)
		}
		return name
	}
	for _, tc := range []struct {
		from string
		at   time.Duration
		want string
	}{
		{"192.0.2.1", 0, "192.0.2.1#0"},
		{"192.0.2.2", 0, "192.0.2.2#0"},
		{"192.0.2.3", 0, OtherName}, // the registry is full
		{"192.0.2.2", time.Minute, "192.0.2.2#0"},
		{"192.0.2.3", 5 * time.Second, OtherName},     // not looked up again yet
		{"192.0.2.3", 2 * time.Minute, "192.0.2.3#0"}, // 192.0.2.1 idle for 2 minutes: it left
		{"192.0.2.3", 3 * time.Minute, "192.0.2.3#0"},
	} {
		if got := decode(tc.from, tc.at); got != tc.want {
			t.Errorf("%s at +%v: observer %q, want %q", tc.from, tc.at, got, tc.want)
		}
	}
	if reg.evicted.Load() != 1 {
		t.Errorf("%d observers evicted, want 1", reg.evicted.Load())
	}
}

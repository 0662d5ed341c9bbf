package collect

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/collect/collecttest"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil/testframe"
)

var exportTime = time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)

// open opens a Collector on one loopback listener of protocol p (port 0).
func open(t *testing.T, p Protocol, kind flow.KeyKind, mod func(*Config)) *Collector {
	t.Helper()
	cfg := Config{Listeners: []Listener{{Protocol: p, Addr: "127.0.0.1:0"}}, Key: kind, PollInterval: 20 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// send sends datagrams from a UDP socket of its own to addr.
func send(t *testing.T, addr string, msgs [][]byte) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, m := range msgs {
		if _, err := c.Write(m); err != nil {
			t.Fatal(err)
		}
	}
}

// packet is what a test keeps of a capture.Packet.
type packet struct {
	key      flow.Key
	data     string
	link     flow.LinkType
	t        int64
	observer uint32
}

// read reads packets from src until it has n or it times out twice in a
// row with nothing new (loopback has queued every datagram by the time
// send returns, so an idle poll means there is no more).
func read(t *testing.T, c *Collector, sent int) []packet {
	t.Helper()
	var out []packet
	var p capture.Packet
	// A datagram (a TCP message) is counted when Next takes it, and Next
	// decodes all it took before it times out: the first timeout after
	// the last was counted ends the read. The deadline only bounds a
	// test that would otherwise hang; no loaded machine comes near it.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := c.Source().Next(&p)
		switch {
		case errors.Is(err, capture.ErrTimeout):
			st := c.Stats()
			if st.Datagrams+st.KernelDrops >= uint64(sent) {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d datagrams came in 2 minutes", st.Datagrams, sent)
			}
			continue
		case err != nil:
			t.Fatal(err)
		}
		out = append(out, packet{p.Key, string(p.Data), p.LinkType, p.TimeNs, p.ObserverID})
	}
}

// TestNetFlow sends v5, v9 and IPFIX datagrams of two exporters' domains
// to one netflow:// listener and checks every key, time and observer.
func TestNetFlow(t *testing.T) {
	flows := collecttest.Flows(100, 1, exportTime)
	boot := exportTime.Add(-time.Hour)
	for _, e := range []collecttest.Exporter{
		{Version: 5, Boot: boot, Domain: 3},
		{Version: 9, Boot: boot, Domain: 3},
		{Version: 10, Boot: boot, Domain: 3},
		{Version: 10, Boot: boot, Domain: 3, Absolute: true},
	} {
		t.Run("v"+string(rune('0'+e.Version%10)), func(t *testing.T) {
			c := open(t, NetFlow, flow.Key5Tuple, nil)
			e2 := e
			e2.Domain = 4
			msgs := append(e.Encode(exportTime, flows, 30), e2.Encode(exportTime, flows, 30)...)
			send(t, c.Addrs()[0], msgs)
			got := read(t, c, len(msgs))
			want := map[packet]int{}
			for i := range flows {
				f := &flows[i]
				if e.Version == 5 && f.Src.Is6() {
					continue
				}
				for _, obs := range []uint32{firstObserver, firstObserver + 1} {
					want[packet{key: flow.MakeKey(flow.Key5Tuple, f.Src, f.Dst, f.Proto, f.SrcPort, f.DstPort), t: f.Start.UnixNano(), observer: obs}]++
				}
			}
			for _, p := range got {
				want[p]--
			}
			for p, n := range want {
				if n != 0 {
					t.Fatalf("%+v: %d more than sent (%d packets read)", p, -n, len(got))
				}
			}
			if name := c.ObserverName(firstObserver); name != "127.0.0.1#3" {
				t.Errorf("observer %d is %q", firstObserver, name)
			}
			st := c.Stats()
			if st.Datagrams != uint64(len(msgs)) || st.Records != uint64(len(got)) {
				t.Errorf("stats %+v: want %d datagrams, %d records", st, len(msgs), len(got))
			}
			for r, n := range st.Errors {
				if n != 0 {
					t.Errorf("%s: %d", r, n)
				}
			}
			if len(st.Observers) != 3 || st.Observers[1].Name != "127.0.0.1#3" || st.Observers[1].Datagrams != uint64(len(msgs)/2) {
				t.Errorf("observers %+v", st.Observers)
			}
		})
	}
}

// TestMissingField: records of flowdedup's own export of source keys
// carry no destination: collected with --key pair, each is counted as
// missing_field.
func TestMissingField(t *testing.T) {
	c := open(t, NetFlow, flow.KeyPair, nil)
	e := collecttest.Exporter{Version: 5, Boot: exportTime.Add(-time.Hour)}
	flows := collecttest.Flows(10, 2, exportTime)
	for i := range flows {
		flows[i].Src, flows[i].Dst = netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	}
	msgs := e.Encode(exportTime, flows, 30)
	send(t, c.Addrs()[0], msgs)
	if got := read(t, c, len(msgs)); len(got) != 10 {
		t.Fatalf("%d packets", len(got))
	}
	// IPFIX records of a template without a destination address.
	c2 := open(t, NetFlow, flow.KeyPair, nil)
	msg := ipfixSrcOnly(t, 5)
	send(t, c2.Addrs()[0], [][]byte{msg})
	got := read(t, c2, 1)
	if st := c2.Stats(); len(got) != 0 || st.Errors[MissingField] != 5 {
		t.Errorf("%d packets, missing_field %d, want 0 and 5", len(got), st.Errors[MissingField])
	}
}

// ipfixSrcOnly returns an IPFIX message whose template has a source
// address only, with n records.
func ipfixSrcOnly(t *testing.T, n int) []byte {
	t.Helper()
	b := []byte{0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	b = append(b, 0, 2, 0, 12, 1, 0, 0, 1, 0, 8, 0, 4)
	b = append(b, 1, 0, 0, byte(4+4*n))
	for i := range n {
		b = append(b, 10, 0, 0, byte(i))
	}
	b[3] = byte(len(b))
	return b
}

// TestSFlow: the raw headers of flow samples come out as frames, stamped
// with their arrival, observer the agent and sub-agent.
func TestSFlow(t *testing.T) {
	c := open(t, SFlow, flow.KeySrc, nil)
	frame := testframe.UDP4Frame(netip.MustParseAddr("10.1.1.1"), netip.MustParseAddr("10.2.2.2"), 1, 2, 46)
	a := &collecttest.SFlow{Agent: netip.MustParseAddr("192.0.2.9"), SubAgent: 2}
	samples := []collecttest.SFlowSample{{Header: frame, Protocol: 1, FrameLength: uint32(len(frame)), SamplingRate: 64}}
	before := time.Now().UnixNano()
	send(t, c.Addrs()[0], [][]byte{a.Datagram(samples, true), a.Datagram(samples, false)})
	got := read(t, c, 2)
	if len(got) != 2 {
		t.Fatalf("%d packets", len(got))
	}
	for _, p := range got {
		if p.data != string(frame) || p.link != flow.LinkEthernet || p.t < before || p.t > time.Now().UnixNano() || c.ObserverName(p.observer) != "192.0.2.9#2" {
			t.Errorf("packet %+v (observer %q)", p, c.ObserverName(p.observer))
		}
	}
	st := c.Stats()
	if st.CounterSamples != 1 || len(st.Observers) != 2 || st.Observers[1].SamplingRate != 64 || st.Observers[1].Protocol != "sflow" {
		t.Errorf("stats %+v", st)
	}
}

// TestAllow: datagrams from exporters --allow does not take are counted
// and dropped.
func TestAllow(t *testing.T) {
	c := open(t, NetFlow, flow.KeySrc, func(cfg *Config) { cfg.Allow = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")} })
	e := collecttest.Exporter{Version: 5, Boot: exportTime.Add(-time.Hour)}
	msgs := e.Encode(exportTime, collecttest.Flows(60, 3, exportTime), 30)
	send(t, c.Addrs()[0], msgs)
	if got := read(t, c, len(msgs)); len(got) != 0 {
		t.Errorf("%d packets from a rejected exporter", len(got))
	}
	if st := c.Stats(); st.Errors[RejectedExporter] != uint64(len(msgs)) || len(st.Observers) != 1 {
		t.Errorf("stats %+v, want %d rejected", st, len(msgs))
	}
}

// TestSequenceLoss: a relay that drops every 10th datagram; the loss is
// counted from the sequence numbers, per observer, in the protocol's unit.
func TestSequenceLoss(t *testing.T) {
	for _, v := range []int{9, 10} {
		c := open(t, NetFlow, flow.KeySrc, nil)
		// Absolute times: no options record (clock, sampling) in the
		// messages, whose data records IPFIX would number too.
		e := collecttest.Exporter{Version: v, Boot: exportTime.Add(-time.Hour), TemplateEvery: 1, Absolute: true}
		msgs := e.Encode(exportTime, collecttest.Flows(3000, 4, exportTime), 30)
		var kept [][]byte
		lostRecords := 0
		for i, m := range msgs {
			if i%10 == 9 && i != len(msgs)-1 {
				lostRecords += 30
				continue
			}
			kept = append(kept, m)
		}
		send(t, c.Addrs()[0], kept)
		read(t, c, len(kept))
		want, unit := uint64(len(msgs)-len(kept)), "datagrams"
		if v == 10 {
			want, unit = uint64(lostRecords), "records"
		}
		if o := c.Stats().Observers[1]; o.Lost != want || o.LostUnit != unit {
			t.Errorf("v%d: lost %d %s, want %d %s", v, o.Lost, o.LostUnit, want, unit)
		}
	}
}

// TestObserverOverflow: exporters past MaxObservers share OtherObserver.
func TestObserverOverflow(t *testing.T) {
	c := open(t, NetFlow, flow.KeySrc, func(cfg *Config) { cfg.MaxObservers = 2 })
	var msgs [][]byte
	for d := range uint32(5) {
		e := collecttest.Exporter{Version: 9, Boot: exportTime.Add(-time.Hour), Domain: d}
		msgs = append(msgs, e.Encode(exportTime, collecttest.Flows(1, 5, exportTime), 1)...)
	}
	send(t, c.Addrs()[0], msgs)
	got := read(t, c, len(msgs))
	obs := map[uint32]int{}
	for _, p := range got {
		obs[p.observer]++
	}
	if len(got) != 5 || obs[firstObserver] != 1 || obs[firstObserver+1] != 1 || obs[OtherObserver] != 3 {
		t.Errorf("packets by observer %v", obs)
	}
	if st := c.Stats(); st.ObserverOverflow != 3 || len(st.Observers) != 3 {
		t.Errorf("stats %+v", st)
	}
}

// TestTCP: IPFIX over TCP, two connections, each its own session.
func TestTCP(t *testing.T) {
	c := open(t, IPFIXTCP, flow.KeySrc, nil)
	flows := collecttest.Flows(200, 6, exportTime)
	total, sent := 0, 0
	for range 2 {
		e := collecttest.Exporter{Version: 10, Boot: exportTime.Add(-time.Hour), Absolute: true}
		conn, err := net.Dial("tcp", c.Addrs()[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range e.Encode(exportTime, flows, 30) {
			sent++
			if _, err := conn.Write(m); err != nil {
				t.Fatal(err)
			}
		}
		conn.Close()
		total += len(flows)
	}
	got := read(t, c, sent) // to the idle end: a message is accounted for when read to its end
	if len(got) != total {
		t.Fatalf("%d packets, want %d", len(got), total)
	}
	if st := c.Stats(); st.Connections != 2 || st.Records != uint64(total) {
		t.Errorf("stats %+v", st)
	}
}

// TestNoAllocPerRecord: reading the records of queued datagrams allocates
// nothing once the exporter is known.
func TestNoAllocPerRecord(t *testing.T) {
	c := open(t, NetFlow, flow.KeySrc, func(cfg *Config) { cfg.PollInterval = time.Second })
	// send dials a socket of its own per call, a transport session of its
	// own: the templates come with every message (a refresh identical to
	// the template held allocates nothing).
	e := collecttest.Exporter{Version: 10, Boot: exportTime.Add(-time.Hour), Absolute: true, TemplateEvery: 1}
	flows := collecttest.Flows(30, 7, exportTime)
	msgs := e.Encode(exportTime, flows, 30)
	msgs = append(msgs, e.Encode(exportTime, flows, 30)...)
	send(t, c.Addrs()[0], msgs[:1])
	src := c.Source()
	read(t, c, 1)
	const rounds = 20
	for range rounds + 1 {
		msgs = append(msgs, e.Encode(exportTime, flows, 30)...)
	}
	send(t, c.Addrs()[0], msgs[1:])
	var p capture.Packet
	allocs := testing.AllocsPerRun(rounds, func() {
		for range 30 {
			if err := src.Next(&p); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per 30 records", allocs)
	}
}

func TestParseListener(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Listener
		ok   bool
	}{
		{"netflow://0.0.0.0:2055", Listener{NetFlow, "0.0.0.0:2055"}, true},
		{"ipfix://:4739", Listener{NetFlow, ":4739"}, true},
		{"ipfix+tcp://[::1]:4739", Listener{IPFIXTCP, "[::1]:4739"}, true},
		{"sflow://127.0.0.1:6343", Listener{SFlow, "127.0.0.1:6343"}, true},
		{"netflow://127.0.0.1", Listener{}, false},
		{"netflow://127.0.0.1:0", Listener{NetFlow, "127.0.0.1:0"}, true},
		{"netflow://127.0.0.1:70000", Listener{}, false},
		{"udp://127.0.0.1:2055", Listener{}, false},
		{"netflow://127.0.0.1:2055/x", Listener{}, false},
	} {
		got, err := ParseListener(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseListener(%q) = %+v, %v", tc.in, got, err)
		}
		if err != nil && !errors.Is(err, ErrListen) {
			t.Errorf("ParseListener(%q): %v does not wrap ErrListen", tc.in, err)
		}
	}
}

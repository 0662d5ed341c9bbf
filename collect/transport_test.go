package collect

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// exporterConn is a UDP socket of an exporter of the tests: from a
// loopback address of its own (127.0.0.0/8 is all loopback), one source
// port for its life, as a router's.
func exporterConn(t *testing.T, from, to string) *net.UDPConn {
	t.Helper()
	raddr, err := net.ResolveUDPAddr("udp", to)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(from)}, raddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func write(t *testing.T, c net.Conn, msgs ...[]byte) {
	t.Helper()
	for _, m := range msgs {
		if _, err := c.Write(m); err != nil {
			t.Fatal(err)
		}
	}
}

// pump reads packets from c's source until, the source idle (every
// datagram taken read to its end and accounted for), done says so, and
// returns them. A generous bound, for a machine however loaded, stops a
// test whose condition never holds.
func pump(t *testing.T, c *Collector, done func(Stats) bool) []packet {
	t.Helper()
	var out []packet
	var p capture.Packet
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Source().Next(&p)
		switch {
		case errors.Is(err, capture.ErrTimeout):
			if done(c.Stats()) {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("still waiting after a minute: stats %+v", c.Stats())
			}
			continue
		case err != nil:
			t.Fatal(err)
		}
		out = append(out, packet{p.Key, string(p.Data), p.LinkType, p.TimeNs, p.ObserverID})
	}
}

// taken: the collector has taken n datagrams (or TCP messages).
func taken(n uint64) func(Stats) bool { return func(s Stats) bool { return s.Datagrams >= n } }

// ipfixMsg returns an IPFIX message of domain dom, sequence seq, holding
// sets (ipfixSet).
func ipfixMsg(dom, seq uint32, sets ...[]byte) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint16(b, 10)
	binary.BigEndian.PutUint32(b[4:], uint32(exportTime.Unix()))
	binary.BigEndian.PutUint32(b[8:], seq)
	binary.BigEndian.PutUint32(b[12:], dom)
	for _, s := range sets {
		b = append(b, s...)
	}
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	return b
}

func ipfixSet(id uint16, body []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, id)
	b = binary.BigEndian.AppendUint16(b, uint16(4+len(body)))
	return append(b, body...)
}

// layout is a template of IPv4 5-tuples in some order of fields (IANA
// element IDs, their lengths).
type layout [][2]uint16

// Two layouts of one template ID: A as softflowd orders the fields, B
// the destination first and the ports swapped, with an octet count
// between: read with the other's layout, its records give other keys.
var (
	layoutA = layout{{8, 4}, {12, 4}, {4, 1}, {7, 2}, {11, 2}, {152, 8}}
	layoutB = layout{{12, 4}, {11, 2}, {1, 4}, {8, 4}, {7, 2}, {4, 1}, {152, 8}}
)

// template returns a template set of l defining template id.
func (l layout) template(id uint16) []byte { return l.templates(id) }

// templates returns a template set of l defining the templates ids.
func (l layout) templates(ids ...uint16) []byte {
	var body []byte
	for _, id := range ids {
		body = binary.BigEndian.AppendUint16(body, id)
		body = binary.BigEndian.AppendUint16(body, uint16(len(l)))
		for _, f := range l {
			body = binary.BigEndian.AppendUint16(body, f[0])
			body = binary.BigEndian.AppendUint16(body, f[1])
		}
	}
	return ipfixSet(2, body)
}

// unreadFields returns a layout of n fields of 4 bytes with element IDs from
// first on, which no decoder reads: a template that only costs memory.
func unreadFields(n int, first uint16) layout {
	l := make(layout, n)
	for f := range l {
		l[f] = [2]uint16{first + uint16(f), 4}
	}
	return l
}

// records returns a data set of template id of l holding flows i0 to
// i0+n-1 (src 10.s.0.i, dst 192.0.2.i, TCP, ports 1000+i and 443,
// starting at exportTime).
func (l layout) records(id uint16, s byte, i0, n int) []byte {
	var b []byte
	for i := i0; i < i0+n; i++ {
		for _, f := range l {
			switch f[0] {
			case 8:
				b = append(b, 10, s, 0, byte(i))
			case 12:
				b = append(b, 192, 0, 2, byte(i))
			case 4:
				b = append(b, 6)
			case 7:
				b = binary.BigEndian.AppendUint16(b, uint16(1000+i))
			case 11:
				b = binary.BigEndian.AppendUint16(b, 443)
			case 1:
				b = binary.BigEndian.AppendUint32(b, 1500)
			case 152:
				b = binary.BigEndian.AppendUint64(b, uint64(exportTime.UnixMilli()))
			}
		}
	}
	return ipfixSet(id, b)
}

func flowKey(s byte, i int) flow.Key {
	return flow.MakeKey(flow.Key5Tuple, netip.AddrFrom4([4]byte{10, s, 0, byte(i)}), netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), 6, uint16(1000+i), 443)
}

// TestTransportSessions: two exporters on one address (two processes,
// two source ports) with the same observation domain define template 256
// in two layouts (issue 25, item 7). Templates and sequence numbers are
// of the transport session (RFC 7011 section 3.2): every key is right,
// nothing is counted lost, and both are the one observer of the address
// and domain.
func TestTransportSessions(t *testing.T) {
	c := open(t, NetFlow, flow.Key5Tuple, nil)
	a := exporterConn(t, "127.0.0.1", c.Addrs()[0])
	b := exporterConn(t, "127.0.0.1", c.Addrs()[0])
	const perMsg, msgs = 10, 10
	for m := range msgs {
		ma := [][]byte{layoutA.records(256, 1, m*perMsg, perMsg)}
		mb := [][]byte{layoutB.records(256, 2, m*perMsg, perMsg)}
		if m%3 == 0 { // templates, refreshed
			ma = append([][]byte{layoutA.template(256)}, ma...)
			mb = append([][]byte{layoutB.template(256)}, mb...)
		}
		write(t, a, ipfixMsg(5, uint32(m*perMsg), ma...))
		write(t, b, ipfixMsg(5, uint32(m*perMsg), mb...))
	}
	got := pump(t, c, taken(2*msgs))
	want := map[flow.Key]bool{}
	for i := range perMsg * msgs {
		want[flowKey(1, i)], want[flowKey(2, i)] = true, true
	}
	wrong := 0
	for _, p := range got {
		if !want[p.key] {
			wrong++
		}
		delete(want, p.key)
		if p.observer != firstObserver || p.t != exportTime.UnixMilli()*1e6 {
			t.Errorf("packet %+v: want observer %d, time %d", p, firstObserver, exportTime.UnixMilli()*1e6)
		}
	}
	if wrong != 0 || len(want) != 0 {
		t.Errorf("%d records of wrong keys, %d keys missing (of %d packets)", wrong, len(want), len(got))
	}
	st := c.Stats()
	for r, n := range st.Errors {
		if n != 0 {
			t.Errorf("%s: %d", r, n)
		}
	}
	if len(st.Observers) != 2 || st.Observers[1].Name != "127.0.0.1#5" || st.Observers[1].Lost != 0 ||
		st.Observers[1].Datagrams != 2*msgs || st.Observers[1].Records != 2*perMsg*msgs {
		t.Errorf("observers %+v: want one, 127.0.0.1#5, %d datagrams, %d records, none lost", st.Observers, 2*msgs, 2*perMsg*msgs)
	}
}

// TestExporterRestart: a router that restarts comes from another source
// port, its sequence numbers from 0: a new transport session, so no
// loss is counted, and the same observer, so its keys are deduplicated
// with those it sent before.
func TestExporterRestart(t *testing.T) {
	c := open(t, NetFlow, flow.Key5Tuple, nil)
	before := exporterConn(t, "127.0.0.1", c.Addrs()[0])
	write(t, before, ipfixMsg(5, 1000, layoutA.template(256), layoutA.records(256, 1, 0, 10)))
	got := pump(t, c, taken(1))
	before.Close()
	after := exporterConn(t, "127.0.0.1", c.Addrs()[0])
	write(t, after, ipfixMsg(5, 0, layoutB.template(256), layoutB.records(256, 1, 0, 10)))
	got = append(got, pump(t, c, taken(2))...)
	keys := map[flow.Key]int{}
	for _, p := range got {
		if p.observer != firstObserver {
			t.Errorf("packet %+v: observer %d, want %d", p, p.observer, firstObserver)
		}
		keys[p.key]++
	}
	for i := range 10 {
		if keys[flowKey(1, i)] != 2 {
			t.Errorf("key %d: %d records, want 2 (before and after the restart)", i, keys[flowKey(1, i)])
		}
	}
	if o := c.Stats().Observers; len(o) != 2 || o[1].Lost != 0 || o[1].Records != 20 {
		t.Errorf("observers %+v: want one, 20 records, none lost", o)
	}
}

// TestTCPSessions: over TCP each connection is a transport session:
// two connections from one address, one domain, template 256 in two
// layouts.
func TestTCPSessions(t *testing.T) {
	c := open(t, IPFIXTCP, flow.Key5Tuple, nil)
	var conns []net.Conn
	for range 2 {
		conn, err := net.Dial("tcp", c.Addrs()[0])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conns = append(conns, conn)
	}
	for m := range 5 {
		write(t, conns[0], ipfixMsg(5, uint32(m*10), layoutA.template(256), layoutA.records(256, 1, m*10, 10)))
		write(t, conns[1], ipfixMsg(5, uint32(m*10), layoutB.template(256), layoutB.records(256, 2, m*10, 10)))
	}
	got := pump(t, c, taken(10))
	want := map[flow.Key]bool{}
	for i := range 50 {
		want[flowKey(1, i)], want[flowKey(2, i)] = true, true
	}
	for _, p := range got {
		if !want[p.key] {
			t.Errorf("a record of a key not sent: %v", p.key)
		}
		delete(want, p.key)
	}
	if len(want) != 0 {
		t.Errorf("%d keys missing", len(want))
	}
	if o := c.Stats().Observers; len(o) != 2 || o[1].Lost != 0 {
		t.Errorf("observers %+v: want one, none lost", o)
	}
}

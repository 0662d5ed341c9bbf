package ipfix_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/export/ipfix"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/record"
	"github.com/netsampler/goflow2/v2/decoders/netflow"
)

// The tests check the exporter's messages with goflow2's IPFIX decoder, a
// decoder that is not ours: it frames the TCP stream by the message
// lengths, keeps the templates and splits the data sets into records and
// fields by them. What it hands back is checked field by field against the
// records given to the exporter.

// wireFlow is a flow record as the wire carries it, comparable with ==.
type wireFlow struct {
	Src, Dst         netip.Addr // invalid when not sent
	SrcBits, DstBits int        // the prefix length elements of networks; -1 when not sent
	Proto            uint8
	Ports            bool // sourceTransportPort and destinationTransportPort were sent
	SrcPort, DstPort uint16
	Ms               uint64 // flowStartMilliseconds
	EndMs            uint64 // flowEndMilliseconds
	Seg              uint64 // layer2SegmentId; 0 when not sent (a segment's is never 0: its type byte is 0x01)
}

// want is what the wire must carry for r: the fields of its key kind, and
// the record's time truncated to the millisecond (dateTimeMilliseconds,
// RFC 7011 section 6.1.9).
func want(r *record.Record) wireFlow {
	k := r.Key
	f := wireFlow{
		Src: k.Src(), Dst: k.Dst(), SrcBits: -1, DstBits: -1, Proto: k.Proto(),
		Ports: k.HasPorts(), SrcPort: k.SrcPort(), DstPort: k.DstPort(),
		Ms:    uint64(r.TimeNs / int64(time.Millisecond)),
		EndMs: uint64(r.TimeNs / int64(time.Millisecond)), // a record ends where it starts
	}
	if vni, ok := k.Segment(); ok {
		// IANA's layer2SegmentId: the top byte the encapsulation type,
		// 0x01 VxLAN; the VNI in the three lowest bytes.
		f.Seg = 0x01<<56 | uint64(vni)
	}
	if bits := k.Bits(); bits >= 0 { // a network key: each address with its length
		if f.Src.IsValid() {
			f.SrcBits = bits
		}
		if f.Dst.IsValid() {
			f.DstBits = bits
		}
	}
	return f
}

func wantAll(recs []record.Record) []wireFlow {
	out := make([]wireFlow, len(recs))
	for i := range recs {
		out[i] = want(&recs[i])
	}
	return out
}

func sortFlows(fs []wireFlow) {
	slices.SortFunc(fs, func(a, b wireFlow) int {
		if c := a.Src.Compare(b.Src); c != 0 {
			return c
		}
		if c := a.Dst.Compare(b.Dst); c != 0 {
			return c
		}
		for _, d := range [...]int{a.SrcBits - b.SrcBits, a.DstBits - b.DstBits, int(a.Proto) - int(b.Proto), int(a.SrcPort) - int(b.SrcPort), int(a.DstPort) - int(b.DstPort)} {
			if d != 0 {
				return d
			}
		}
		if a.Ports != b.Ports {
			if a.Ports {
				return 1
			}
			return -1
		}
		if a.Seg != b.Seg {
			if a.Seg < b.Seg {
				return -1
			}
			return 1
		}
		return int(a.Ms) - int(b.Ms)
	})
}

// sameFlows compares two multisets of flows.
func sameFlows(t *testing.T, what string, got, want []wireFlow) {
	t.Helper()
	got, want = slices.Clone(got), slices.Clone(want)
	sortFlows(got)
	sortFlows(want)
	if slices.Equal(got, want) {
		return
	}
	t.Errorf("%s: got %d flows, want %d", what, len(got), len(want))
	for i := 0; i < max(len(got), len(want)); i++ {
		var g, w wireFlow
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("first difference at %d (sorted):\n got  %+v\n want %+v", i, g, w)
			return
		}
	}
}

// ieSpec is an Information Element of a template: IANA ID and length.
type ieSpec struct{ id, length uint16 }

// wantFields lists the template fields for a flow, from
// docs/architecture.md#export and the IANA registry (sourceIPv4Address 8,
// destinationIPv4Address 12, sourceIPv6Address 27, destinationIPv6Address
// 28, protocolIdentifier 4, sourceTransportPort 7, destinationTransportPort
// 11, flowStartMilliseconds 152, flowEndMilliseconds 153; for networks
// sourceIPv4PrefixLength 9, destinationIPv4PrefixLength 13,
// sourceIPv6PrefixLength 29, destinationIPv6PrefixLength 30), in a canonical
// order (sorted by ID) since the order of a template's fields is the
// exporter's choice. A key with a segment has layer2SegmentId (351, 8
// bytes) too.
func wantFields(f wireFlow) []ieSpec {
	var fs []ieSpec
	v6 := f.Src.Is6() || f.Dst.Is6()
	if f.Src.IsValid() {
		fs = append(fs, map[bool]ieSpec{false: {8, 4}, true: {27, 16}}[v6])
	}
	if f.Dst.IsValid() {
		fs = append(fs, map[bool]ieSpec{false: {12, 4}, true: {28, 16}}[v6])
	}
	if f.SrcBits >= 0 {
		fs = append(fs, map[bool]ieSpec{false: {9, 1}, true: {29, 1}}[v6])
	}
	if f.DstBits >= 0 {
		fs = append(fs, map[bool]ieSpec{false: {13, 1}, true: {30, 1}}[v6])
	}
	if f.Proto != 0 {
		fs = append(fs, ieSpec{4, 1})
	}
	if f.Ports {
		fs = append(fs, ieSpec{7, 2}, ieSpec{11, 2})
	}
	fs = append(fs, ieSpec{152, 8}, ieSpec{153, 8})
	if f.Seg != 0 {
		fs = append(fs, ieSpec{351, 8})
	}
	slices.SortFunc(fs, func(a, b ieSpec) int { return int(a.id) - int(b.id) })
	return fs
}

// decodedMessage is one IPFIX message as goflow2 decoded it.
type decodedMessage struct {
	Length       int
	ExportTime   uint32
	Seq          uint32
	Domain       uint32
	Templates    []uint16 // IDs of the templates the message defines
	Flows        []wireFlow
	FlowTemplate []uint16 // the template of each flow
}

// decodeStream decodes back-to-back IPFIX messages (a TCP stream, or one
// UDP datagram) with goflow2, keeping templates in ts. Every field of every
// data record is checked against the elements docs/architecture.md names.
func decodeStream(t *testing.T, data []byte, ts netflow.NetFlowTemplateSystem) []decodedMessage {
	t.Helper()
	var msgs []decodedMessage
	buf := bytes.NewBuffer(data)
	for buf.Len() > 0 {
		var p netflow.IPFIXPacket
		var v9 netflow.NFv9Packet
		before := buf.Len()
		if err := netflow.DecodeMessageVersion(buf, ts, &v9, &p); err != nil {
			t.Fatalf("goflow2 cannot decode message %d: %v", len(msgs), err)
		}
		if p.Version != 10 {
			t.Fatalf("message %d: version %d, want 10 (IPFIX)", len(msgs), p.Version)
		}
		if int(p.Length) != before-buf.Len() {
			t.Fatalf("message %d: length field %d, but its sets took %d bytes", len(msgs), p.Length, before-buf.Len())
		}
		m := decodedMessage{Length: int(p.Length), ExportTime: p.ExportTime, Seq: p.SequenceNumber, Domain: p.ObservationDomainId}
		for _, fs := range p.FlowSets {
			switch fs := fs.(type) {
			case netflow.TemplateFlowSet:
				for _, tr := range fs.Records {
					m.Templates = append(m.Templates, tr.TemplateId)
				}
			case netflow.DataFlowSet:
				for _, rec := range fs.Records {
					m.Flows = append(m.Flows, flowOf(t, rec))
					m.FlowTemplate = append(m.FlowTemplate, fs.Id)
				}
			default:
				t.Fatalf("message %d: unexpected set %T", len(msgs), fs)
			}
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// flowOf reads a data record's fields, and checks they are exactly the
// fields a flow of its kind has.
func flowOf(t *testing.T, rec netflow.DataRecord) wireFlow {
	t.Helper()
	f := wireFlow{SrcBits: -1, DstBits: -1}
	var got []ieSpec
	for _, v := range rec.Values {
		b, ok := v.Value.([]byte)
		if !ok || v.PenProvided {
			t.Fatalf("field %d: value %T, enterprise %v", v.Type, v.Value, v.PenProvided)
		}
		got = append(got, ieSpec{v.Type, uint16(len(b))})
		switch v.Type {
		case 8, 12, 27, 28:
			a, ok := netip.AddrFromSlice(b)
			if !ok {
				t.Fatalf("field %d: %d-byte address", v.Type, len(b))
			}
			if v.Type == 8 || v.Type == 27 {
				f.Src = a
			} else {
				f.Dst = a
			}
		case 9, 29:
			f.SrcBits = int(b[0])
		case 13, 30:
			f.DstBits = int(b[0])
		case 4:
			f.Proto = b[0]
		case 7:
			f.Ports, f.SrcPort = true, uint16(b[0])<<8|uint16(b[1])
		case 11:
			f.Ports, f.DstPort = true, uint16(b[0])<<8|uint16(b[1])
		case 152:
			for _, c := range b {
				f.Ms = f.Ms<<8 | uint64(c)
			}
		case 153:
			for _, c := range b {
				f.EndMs = f.EndMs<<8 | uint64(c)
			}
		case 351:
			for _, c := range b {
				f.Seg = f.Seg<<8 | uint64(c)
			}
		default:
			t.Fatalf("unexpected field %d", v.Type)
		}
	}
	slices.SortFunc(got, func(a, b ieSpec) int { return int(a.id) - int(b.id) })
	if w := wantFields(f); !slices.Equal(got, w) {
		t.Fatalf("record %+v has fields %v, want %v", f, got, w)
	}
	return f
}

// checkSession checks the messages of one transport session: sequence
// numbers count the data records sent before each message (RFC 7011
// section 3.1), every data set's template was defined before or in its
// message, and the observation domain is domain.
func checkSession(t *testing.T, msgs []decodedMessage, domain uint32) {
	t.Helper()
	var records uint32
	defined := map[uint16]bool{}
	for i, m := range msgs {
		if m.Seq != records {
			t.Errorf("message %d: sequence number %d, want %d (data records before it)", i, m.Seq, records)
		}
		if m.Domain != domain {
			t.Errorf("message %d: observation domain %d, want %d", i, m.Domain, domain)
		}
		for _, id := range m.Templates {
			defined[id] = true
		}
		for _, id := range m.FlowTemplate {
			if !defined[id] {
				t.Errorf("message %d: data set of template %d, not defined before", i, id)
			}
		}
		records += uint32(len(m.Flows))
	}
}

func allFlows(msgs []decodedMessage) []wireFlow {
	var fs []wireFlow
	for _, m := range msgs {
		fs = append(fs, m.Flows...)
	}
	return fs
}

// udpCollector receives datagrams on a loopback port.
type udpCollector struct {
	conn *net.UDPConn
	mu   sync.Mutex
	data [][]byte
	more chan struct{} // signalled on each datagram
}

func newUDPCollector(t *testing.T, network, addr string) *udpCollector {
	t.Helper()
	ua, err := net.ResolveUDPAddr(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenUDP(network, ua)
	if err != nil {
		t.Fatalf("listen %s %s: %v", network, addr, err)
	}
	c.SetReadBuffer(8 << 20) // the tests send bursts: keep them all
	u := &udpCollector{conn: c, more: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			u.mu.Lock()
			u.data = append(u.data, bytes.Clone(buf[:n]))
			u.mu.Unlock()
			select {
			case u.more <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return u
}

func (u *udpCollector) addr() string { return u.conn.LocalAddr().String() }

// waitDatagrams waits until n datagrams have come, and returns them all.
func (u *udpCollector) waitDatagrams(t *testing.T, n int) [][]byte {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		u.mu.Lock()
		got := slices.Clone(u.data)
		u.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-u.more:
		case <-deadline:
			t.Fatalf("got %d datagrams in 10 s, want %d", len(got), n)
		}
	}
}

// decodeDatagrams decodes each datagram as one message.
func decodeDatagrams(t *testing.T, dgrams [][]byte) []decodedMessage {
	t.Helper()
	ts := netflow.CreateTemplateSystem()
	var msgs []decodedMessage
	for i, d := range dgrams {
		ms := decodeStream(t, d, ts)
		if len(ms) != 1 {
			t.Fatalf("datagram %d holds %d messages, want 1", i, len(ms))
		}
		msgs = append(msgs, ms...)
	}
	return msgs
}

// tcpCollector accepts connections on a loopback port and keeps each one's
// stream.
type tcpCollector struct {
	ln      net.Listener
	mu      sync.Mutex
	streams [][]byte // by connection, in accept order
	conns   []net.Conn
	ended   []bool // the exporter closed its end
	more    chan struct{}
	// closeAfter, when > 0, closes each connection once it has read that
	// many bytes.
	closeAfter int
}

func newTCPCollector(t *testing.T, addr string) *tcpCollector {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen tcp %s: %v", addr, err)
	}
	c := &tcpCollector{ln: ln, more: make(chan struct{}, 1)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.mu.Lock()
			i := len(c.streams)
			c.streams = append(c.streams, nil)
			c.conns = append(c.conns, conn)
			c.ended = append(c.ended, false)
			limit := c.closeAfter
			c.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.read(conn, i, limit)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		c.mu.Lock()
		for _, conn := range c.conns {
			conn.Close()
		}
		c.mu.Unlock()
		wg.Wait()
	})
	return c
}

func (c *tcpCollector) read(conn net.Conn, i, limit int) {
	buf := make([]byte, 65536)
	total := 0
	for {
		want := len(buf)
		if limit > 0 {
			want = min(want, limit-total)
		}
		n, err := conn.Read(buf[:want])
		total += n
		c.mu.Lock()
		c.streams[i] = append(c.streams[i], buf[:n]...)
		if errors.Is(err, io.EOF) {
			c.ended[i] = true
		}
		c.mu.Unlock()
		select {
		case c.more <- struct{}{}:
		default:
		}
		if limit > 0 && total >= limit {
			conn.Close()
			return
		}
		if err != nil {
			return
		}
	}
}

func (c *tcpCollector) addr() string { return c.ln.Addr().String() }

// waitStreams waits until cond holds of the streams, and returns them.
func (c *tcpCollector) waitStreams(t *testing.T, what string, cond func(streams [][]byte, ended []bool) bool) [][]byte {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		c.mu.Lock()
		streams := make([][]byte, len(c.streams))
		for i, s := range c.streams {
			streams[i] = slices.Clone(s)
		}
		ended := slices.Clone(c.ended)
		c.mu.Unlock()
		if cond(streams, ended) {
			return streams
		}
		select {
		case <-c.more:
		case <-deadline:
			lens := make([]int, len(streams))
			for i, s := range streams {
				lens[i] = len(s)
			}
			t.Fatalf("waiting 10 s for %s; stream lengths %v, ended %v", what, lens, ended)
		}
	}
}

func netipAddrPort(s string) (netip.AddrPort, error) { return netip.ParseAddrPort(s) }

// tcpStateIs reports whether the IPv4 TCP socket bound to local is in state
// (the hex st column of /proc/net/tcp: "01" established, "08" close wait).
func tcpStateIs(local netip.AddrPort, state string) bool {
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false
	}
	a := local.Addr().As4()
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", a[3], a[2], a[1], a[0], local.Port())
	for _, line := range strings.Split(string(data), "\n") {
		fs := strings.Fields(line)
		if len(fs) > 3 && fs[1] == want && fs[3] == state {
			return true
		}
	}
	return false
}

// exportBoth exports recs of kind with observation domain domain over UDP
// and over TCP, each to a collector of its own, and checks what each
// received: one session of domain (checkSession), the extra checks of
// check when not nil, and every record read back as it was sent, by
// goflow2 (UDP and TCP) and by libfixbuf's ipfixDump (UDP; the test fails
// where it is missing under FLOWDEDUP_REQUIRE_PRIVILEGED, else skips that
// part).
func exportBoth(t *testing.T, rng *rand.Rand, kind flow.KeyKind, domain uint32, recs []record.Record, check func(*testing.T, []decodedMessage)) {
	t.Helper()
	udp := newUDPCollector(t, "udp4", "127.0.0.1:0")
	e := newDestination(t, ipfix.Config{Network: "udp", Address: udp.addr(), Kind: kind, ObservationDomain: domain, MessageSize: 1400})
	sendBatches(t, e, rng, recs, nil)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	dgrams := udp.waitDatagrams(t, int(e.Stats().Messages))
	msgs := decodeDatagrams(t, dgrams)
	checkSession(t, msgs, domain)
	if check != nil {
		check(t, msgs)
	}
	sameFlows(t, "goflow2, UDP", allFlows(msgs), wantAll(recs))

	if bin, err := exec.LookPath("ipfixDump"); err != nil {
		testutil.SkipOrFail(t, "ipfixDump is not installed (Debian package libfixbuf-tools): %v", err)
	} else {
		path := filepath.Join(t.TempDir(), "export.ipfix")
		if err := os.WriteFile(path, bytes.Join(dgrams, nil), 0o644); err != nil {
			t.Fatal(err)
		}
		var flows []wireFlow
		for _, m := range ipfixDump(t, bin, path) {
			flows = append(flows, m.Flows...)
		}
		sameFlows(t, "ipfixDump", flows, wantAll(recs))
	}

	tcp := newTCPCollector(t, "127.0.0.1:0")
	e = newDestination(t, ipfix.Config{Network: "tcp", Address: tcp.addr(), Kind: kind, ObservationDomain: domain})
	sendBatches(t, e, rng, recs, nil)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	stream := tcp.waitStreams(t, "the exporter to close", func(s [][]byte, ended []bool) bool {
		return len(ended) == 1 && ended[0]
	})[0]
	msgs = decodeStream(t, stream, netflow.CreateTemplateSystem())
	checkSession(t, msgs, domain)
	if check != nil {
		check(t, msgs)
	}
	sameFlows(t, "goflow2, TCP", allFlows(msgs), wantAll(recs))
}

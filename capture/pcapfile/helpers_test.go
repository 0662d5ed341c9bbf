package pcapfile

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// testPkt is a packet as a test writes it and expects it back.
type testPkt struct {
	data    []byte
	timeNs  int64
	wireLen int
	link    flow.LinkType
	iface   int // pcapng: index of the interface written
}

// testFrames returns n packets of assorted lengths (odd ones, empty
// ones, one of MaxCaptureLength when big is set), some cut short of their
// wire length, with timestamps that are not whole microseconds.
func testFrames(n int, seed uint64, big bool) []testPkt {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	pkts := make([]testPkt, n)
	t := int64(1_700_000_000_123_456_789)
	for i := range pkts {
		var size int
		switch i % 7 {
		case 0:
			size = 0
		case 1:
			size = 1 + rng.IntN(3)
		case 2:
			size = 1514
		case 3:
			size = 9000 + rng.IntN(17)
		default:
			size = 14 + rng.IntN(200)
		}
		if big && i == n/2 {
			size = MaxCaptureLength
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		wire := size
		if i%3 == 0 {
			wire += rng.IntN(5000)
		}
		t += 1 + rng.Int64N(3_000_000_000)
		pkts[i] = testPkt{data: data, timeNs: t, wireLen: wire, link: flow.LinkEthernet}
	}
	return pkts
}

// writePcap writes pkts as a little-endian pcap file with pcapgo.
func writePcap(t testing.TB, pkts []testPkt, link flow.LinkType, nanos bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	if nanos {
		w = pcapgo.NewWriterNanos(&buf)
	}
	if err := w.WriteFileHeader(65535, layers.LinkType(link)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pkts {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, p.timeNs), CaptureLength: len(p.data), Length: p.wireLen}
		if err := w.WritePacket(ci, p.data); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// writePcapBE writes pkts as a big-endian pcap file (pcapgo writes
// little-endian only).
func writePcapBE(pkts []testPkt, link flow.LinkType, nanos bool) []byte {
	be := binary.BigEndian
	magic, div := uint32(pcapMicroBE), int64(1000)
	if nanos {
		magic, div = pcapNanoBE, 1
	}
	b := be.AppendUint32(nil, magic)
	b = be.AppendUint16(b, 2)
	b = be.AppendUint16(b, 4)
	b = be.AppendUint32(b, 0) // thiszone
	b = be.AppendUint32(b, 0) // sigfigs
	b = be.AppendUint32(b, 65535)
	b = be.AppendUint32(b, uint32(link))
	for _, p := range pkts {
		b = be.AppendUint32(b, uint32(p.timeNs/1e9))
		b = be.AppendUint32(b, uint32(p.timeNs%1e9/div))
		b = be.AppendUint32(b, uint32(len(p.data)))
		b = be.AppendUint32(b, uint32(p.wireLen))
		b = append(b, p.data...)
	}
	return b
}

// writeNg writes pkts as pcapng with pcapgo, one interface per entry
// of links; a packet goes out on its iface.
func writeNg(t testing.TB, pkts []testPkt, links ...flow.LinkType) []byte {
	t.Helper()
	var buf bytes.Buffer
	intf := pcapgo.DefaultNgInterface
	intf.LinkType = layers.LinkType(links[0])
	w, err := pcapgo.NewNgWriterInterface(&buf, intf, pcapgo.DefaultNgWriterOptions)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links[1:] {
		intf.LinkType = layers.LinkType(l)
		if _, err := w.AddInterface(intf); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pkts {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, p.timeNs), CaptureLength: len(p.data), Length: p.wireLen, InterfaceIndex: p.iface}
		if err := w.WritePacket(ci, p.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ngWriter builds pcapng files block by block, in either byte order, for
// what pcapgo's writer cannot produce.
type ngWriter struct {
	b     []byte
	order binary.AppendByteOrder
}

// block appends a block of type typ around body (padded to 4 bytes); total
// overrides the length fields when not 0.
func (w *ngWriter) block(typ uint32, body []byte, total uint32) {
	pad := (4 - len(body)%4) % 4
	if total == 0 {
		total = uint32(12 + len(body) + pad)
	}
	w.b = w.order.AppendUint32(w.b, typ)
	w.b = w.order.AppendUint32(w.b, total)
	w.b = append(w.b, body...)
	w.b = append(w.b, make([]byte, pad)...)
	w.b = w.order.AppendUint32(w.b, total)
}

func (w *ngWriter) shb() {
	body := w.order.AppendUint32(nil, byteOrderMagic)
	body = w.order.AppendUint16(body, 1)
	body = w.order.AppendUint16(body, 0)
	body = w.order.AppendUint64(body, ^uint64(0)) // section length unknown
	w.block(blockSectionHeader, body, 0)
}

func (w *ngWriter) opt(code uint16, val []byte) []byte {
	b := w.order.AppendUint16(nil, code)
	b = w.order.AppendUint16(b, uint16(len(val)))
	b = append(b, val...)
	return append(b, make([]byte, (4-len(val)%4)%4)...)
}

func (w *ngWriter) idb(link flow.LinkType, snap uint32, opts ...[]byte) {
	body := w.order.AppendUint16(nil, uint16(link))
	body = w.order.AppendUint16(body, 0)
	body = w.order.AppendUint32(body, snap)
	for _, o := range opts {
		body = append(body, o...)
	}
	if len(opts) > 0 {
		body = append(body, 0, 0, 0, 0) // opt_endofopt
	}
	w.block(blockInterface, body, 0)
}

func (w *ngWriter) epb(iface uint32, ts uint64, data []byte, wire uint32, opts ...[]byte) {
	body := w.order.AppendUint32(nil, iface)
	body = w.order.AppendUint32(body, uint32(ts>>32))
	body = w.order.AppendUint32(body, uint32(ts))
	body = w.order.AppendUint32(body, uint32(len(data)))
	body = w.order.AppendUint32(body, wire)
	body = append(body, data...)
	body = append(body, make([]byte, (4-len(data)%4)%4)...)
	for _, o := range opts {
		body = append(body, o...)
	}
	w.block(blockEnhancedPacket, body, 0)
}

func (w *ngWriter) pb(iface uint16, ts uint64, data []byte, wire uint32) {
	body := w.order.AppendUint16(nil, iface)
	body = w.order.AppendUint16(body, 0) // drops
	body = w.order.AppendUint32(body, uint32(ts>>32))
	body = w.order.AppendUint32(body, uint32(ts))
	body = w.order.AppendUint32(body, uint32(len(data)))
	body = w.order.AppendUint32(body, wire)
	body = append(body, data...)
	w.block(blockPacketObsolete, body, 0)
}

func (w *ngWriter) spb(data []byte, wire uint32) {
	w.block(blockSimplePacket, append(w.order.AppendUint32(nil, wire), data...), 0)
}

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeTemp(t testing.TB, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// readAll reads s to its first error, copying every packet.
func readAll(s *Reader) ([]testPkt, error) {
	var out []testPkt
	var p capture.Packet
	for {
		if err := s.Next(&p); err != nil {
			return out, err
		}
		out = append(out, testPkt{data: bytes.Clone(p.Data), timeNs: p.TimeNs, wireLen: p.WireLen, link: p.LinkType})
	}
}

// compare checks got against want, packet by packet; micro truncates
// the expected timestamps to microseconds.
func compare(t *testing.T, got, want []testPkt, micro bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d packets, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		ts := w.timeNs
		if micro {
			ts -= ts % 1000
		}
		if !bytes.Equal(g.data, w.data) || g.timeNs != ts || g.wireLen != w.wireLen || g.link != w.link {
			t.Fatalf("packet %d: got len %d time %d wire %d link %v, want len %d time %d wire %d link %v (data equal: %v)",
				i, len(g.data), g.timeNs, g.wireLen, g.link, len(w.data), ts, w.wireLen, w.link, bytes.Equal(g.data, w.data))
		}
	}
}

func withLink(pkts []testPkt, link flow.LinkType) []testPkt {
	out := append([]testPkt(nil), pkts...)
	for i := range out {
		out[i].link = link
	}
	return out
}

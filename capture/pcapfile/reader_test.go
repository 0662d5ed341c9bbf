package pcapfile

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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

func TestFormats(t *testing.T) {
	base := testFrames(60, 1, true)
	links := []flow.LinkType{flow.LinkEthernet, flow.LinkRaw, flow.LinkLinuxSLL, flow.LinkLinuxSLL2, 147 /* USER0: not parsed by flow */}
	for _, link := range links {
		pkts := withLink(base, link)
		formats := []struct {
			name  string
			data  []byte
			micro bool
		}{
			{"pcap", writePcap(t, pkts, link, false), true},
			{"pcap-nsec", writePcap(t, pkts, link, true), false},
			{"pcap-be", writePcapBE(pkts, link, false), true},
			{"pcap-nsec-be", writePcapBE(pkts, link, true), false},
			{"pcapng", writeNg(t, pkts, link), false},
		}
		for _, f := range formats {
			for _, gz := range []bool{false, true} {
				name, data := f.name, f.data
				if gz {
					name, data = name+".gz", gzipBytes(t, data)
				}
				t.Run(link.String()+"/"+name, func(t *testing.T) {
					// A misleading name: the format comes from the magic.
					path := writeTemp(t, "capture.txt", data)
					s, err := Open(path)
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					got, err := readAll(s)
					if err != io.EOF {
						t.Fatalf("read ended with %v, want io.EOF", err)
					}
					compare(t, got, pkts, f.micro)
					st := s.Files()[0]
					if st.Packets != int64(len(pkts)) || !st.Done || st.Err != nil || st.Compressed != gz || st.LinkType != link {
						t.Errorf("Files() = %+v", st)
					}
				})
			}
		}
	}
}

// TestFileUnsupportedLink: frames of a link type flow does not parse are
// returned, and flow.Parse is what says so.
func TestUnsupportedLink(t *testing.T) {
	pkts := withLink(testFrames(3, 2, false), 147)
	s, err := Open(writeTemp(t, "user0.pcap", writePcap(t, pkts, 147, false)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var p capture.Packet
	if err := s.Next(&p); err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Parse(p.Data, p.LinkType, flow.KeySrc); !errors.Is(err, flow.ErrUnsupportedLink) {
		t.Errorf("flow.Parse on link type %v: %v, want ErrUnsupportedLink", p.LinkType, err)
	}
}

func TestNgInterfaces(t *testing.T) {
	links := []flow.LinkType{flow.LinkEthernet, flow.LinkRaw, flow.LinkLinuxSLL}
	pkts := testFrames(30, 3, false)
	for i := range pkts {
		pkts[i].iface = i * 7 % len(links)
		pkts[i].link = links[pkts[i].iface]
	}
	data := writeNg(t, pkts, links...)
	s, err := Open(writeTemp(t, "multi.pcapng", data))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := readAll(s)
	if err != io.EOF {
		t.Fatal(err)
	}
	compare(t, got, pkts, false)
}

// TestFileNgBlocks covers what pcapgo's writer does not write: big-endian
// sections, default, decimal and binary timestamp resolutions, if_tsoffset,
// simple and obsolete packet blocks, blocks to skip, a second section that
// changes byte order and drops the first section's interfaces, and a packet
// block whose options do not fit the read buffer.
func TestNgBlocks(t *testing.T) {
	payload := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*31 + n)
		}
		return b
	}
	var want []testPkt
	w := &ngWriter{order: binary.BigEndian}
	w.shb()
	w.idb(flow.LinkEthernet, 0)                                                                // 0: microseconds
	w.idb(flow.LinkRaw, 0, w.opt(optTsResol, []byte{3}))                                       // 1: milliseconds
	w.idb(flow.LinkLinuxSLL, 0, w.opt(optTsResol, []byte{0x80 | 20}))                          // 2: 2^-20 s
	w.idb(flow.LinkLinuxSLL2, 8, w.opt(optTsOffset, binary.BigEndian.AppendUint64(nil, 1000))) // 3: +1000 s, snap 8
	w.block(0x0bad, []byte("custom block, skipped"), 0)
	w.epb(0, 1_700_000_000_123_456, payload(5), 60)
	want = append(want, testPkt{payload(5), 1_700_000_000_123_456_000, 60, flow.LinkEthernet, 0})
	w.epb(1, 1_700_000_000_123, payload(64), 64, w.opt(1, []byte("comment")))
	want = append(want, testPkt{payload(64), 1_700_000_000_123_000_000, 64, flow.LinkRaw, 0})
	w.epb(2, 3<<20|1<<19, payload(3), 3) // 3.5 s
	want = append(want, testPkt{payload(3), 3_500_000_000, 3, flow.LinkLinuxSLL, 0})
	w.block(5, make([]byte, 20), 0) // interface statistics, skipped
	w.epb(3, 7_000_001, payload(8), 100)
	want = append(want, testPkt{payload(8), 1_007_000_001_000, 100, flow.LinkLinuxSLL2, 0})
	w.spb(payload(20), 20) // interface 0 has no snap length: all 20 bytes
	want = append(want, testPkt{payload(20), 1_007_000_001_000, 20, flow.LinkEthernet, 0})
	w.pb(1, 42, payload(7), 9)
	want = append(want, testPkt{payload(7), 42_000_000, 9, flow.LinkRaw, 0})

	// A second, little-endian section with one nanosecond interface.
	w.order = binary.LittleEndian
	w.shb()
	w.idb(flow.LinkIPv4, 0, w.opt(optTsResol, []byte{9}))
	w.epb(0, 123_456_789_012, payload(1500), 1500)
	want = append(want, testPkt{payload(1500), 123_456_789_012, 1500, flow.LinkIPv4, 0})
	big := make([]byte, bufSize+4096) // an option bigger than the read buffer
	w.epb(0, 5, payload(33), 33, w.opt(1, big[:60000]), w.opt(1, big[:60000]), bytes.Repeat(w.opt(1, big[:65000]), 17))
	want = append(want, testPkt{payload(33), 5, 33, flow.LinkIPv4, 0})
	w.epb(0, 6, payload(2), 2)
	want = append(want, testPkt{payload(2), 6, 2, flow.LinkIPv4, 0})
	w.block(0x0bad, big, 0) // a skipped block bigger than the read buffer
	w.spb(payload(9), 9)
	want = append(want, testPkt{payload(9), 6, 9, flow.LinkIPv4, 0})

	for _, gz := range []bool{false, true} {
		data := w.b
		if gz {
			data = gzipBytes(t, data)
		}
		s, err := open(bytes.NewReader(data), "-")
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(s)
		if err != io.EOF {
			t.Fatalf("gzip %v: %v", gz, err)
		}
		compare(t, got, want, false)
	}

	// The second section dropped the first section's interfaces.
	w.epb(3, 0, nil, 0)
	s, err := open(bytes.NewReader(w.b), "-")
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(s)
	if !errors.Is(err, capture.ErrCorrupt) || len(got) != len(want) || !strings.Contains(err.Error(), "interface 3") {
		t.Errorf("packet on an interface of the previous section: %d packets, %v", len(got), err)
	}
}

// TestFileSimplePacketSnap: a simple packet block carries the wire length;
// the captured length is the interface's snap length when that is smaller.
func TestSimplePacketSnap(t *testing.T) {
	w := &ngWriter{order: binary.LittleEndian}
	w.shb()
	w.idb(flow.LinkEthernet, 4)
	w.spb([]byte{1, 2, 3, 4}, 1000)
	s, err := open(bytes.NewReader(w.b), "-")
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(s)
	if err != io.EOF || len(got) != 1 || !bytes.Equal(got[0].data, []byte{1, 2, 3, 4}) || got[0].wireLen != 1000 {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestSeveral(t *testing.T) {
	a := testFrames(5, 10, false)
	b := withLink(testFrames(7, 11, false), flow.LinkRaw)
	c := withLink(testFrames(3, 12, false), flow.LinkLinuxSLL)
	paths := []string{
		writeTemp(t, "a.pcap", writePcap(t, a, flow.LinkEthernet, true)),
		writeTemp(t, "empty.pcap", writePcap(t, nil, flow.LinkEthernet, true)),
		writeTemp(t, "b.pcapng.gz", gzipBytes(t, writeNg(t, b, flow.LinkRaw))),
		writeTemp(t, "empty.pcapng", writeNg(t, nil, flow.LinkEthernet)),
		writeTemp(t, "c.pcap", writePcapBE(c, flow.LinkLinuxSLL, true)),
	}
	s, err := Open(paths...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Current() != "" {
		t.Errorf("Current() before reading = %q", s.Current())
	}
	var p capture.Packet
	for i, want := range [][]testPkt{a, b, c} {
		wantPath := paths[[]int{0, 2, 4}[i]]
		for j, w := range want {
			if err := s.Next(&p); err != nil {
				t.Fatalf("file %d packet %d: %v", i, j, err)
			}
			if !bytes.Equal(p.Data, w.data) || p.TimeNs != w.timeNs || p.LinkType != w.link {
				t.Fatalf("file %d packet %d differs", i, j)
			}
			if s.Current() != wantPath {
				t.Fatalf("Current() = %q, want %q", s.Current(), wantPath)
			}
		}
	}
	for range 2 {
		if err := s.Next(&p); err != io.EOF {
			t.Fatalf("after the last file: %v, want io.EOF", err)
		}
	}
	stats := s.Files()
	for i, n := range []int64{5, 0, 7, 0, 3} {
		if st := stats[i]; st.Path != paths[i] || st.Packets != n || !st.Done || st.Err != nil {
			t.Errorf("Files()[%d] = %+v, want %d packets", i, st, n)
		}
	}
	if stats[2].Format != "pcapng" || !stats[2].Compressed || stats[0].Format != "pcap-nsec" {
		t.Errorf("formats: %+v", stats)
	}
}

// TestFileMovesOn: after damage in one file, the next Next reads the next
// file; io.EOF comes only after the last.
func TestMovesOn(t *testing.T) {
	a := testFrames(4, 20, false)
	good := writePcap(t, a, flow.LinkEthernet, true)
	cut := writeNg(t, a, flow.LinkEthernet)
	cut = cut[:len(cut)-10]
	paths := []string{
		writeTemp(t, "a.pcap", good),
		writeTemp(t, "cut.pcapng", cut),
		writeTemp(t, "cut.pcap", good[:len(good)-1]),
		writeTemp(t, "b.pcap", good),
	}
	s, err := Open(paths...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var errs []error
	var n int
	for {
		var p capture.Packet
		err := s.Next(&p)
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, err)
			if len(errs) > 10 {
				t.Fatal("no io.EOF")
			}
			continue
		}
		n++
	}
	if n != 4+3+3+4 || len(errs) != 2 {
		t.Fatalf("read %d packets and errors %v", n, errs)
	}
	for i, err := range errs {
		var fe *Error
		if !errors.Is(err, capture.ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) || !errors.As(err, &fe) || fe.Path != paths[i+1] || fe.Record != 4 {
			t.Errorf("error %d: %v", i, err)
		}
		if !strings.Contains(err.Error(), paths[i+1]) || !strings.Contains(err.Error(), "record 4") {
			t.Errorf("error %q does not name the file and record", err)
		}
	}
	if st := s.Files()[1]; st.Packets != 3 || !errors.Is(st.Err, capture.ErrCorrupt) {
		t.Errorf("Files()[1] = %+v", st)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	good := writeTemp(t, "good.pcap", writePcap(t, testFrames(2, 30, false), flow.LinkEthernet, false))
	missing := filepath.Join(dir, "missing.pcap")
	text := writeTemp(t, "notes.pcap", []byte("these are not packets\n"))
	empty := writeTemp(t, "empty.pcap", nil)
	gzText := writeTemp(t, "notes.gz", gzipBytes(t, []byte("not packets either")))
	shortHdr := writeTemp(t, "short.pcap", writePcap(t, nil, flow.LinkEthernet, false)[:20])
	badVersion := writePcap(t, nil, flow.LinkEthernet, false)
	badVersion[4] = 3
	badVer := writeTemp(t, "v3.pcap", badVersion)
	ng := writeNg(t, nil, flow.LinkEthernet)
	ng[8] ^= 0xff // byte-order magic
	badNg := writeTemp(t, "bom.pcapng", ng)

	_, err := Open(good, missing, text, dir, empty, gzText, shortHdr, badVer, badNg)
	if err == nil {
		t.Fatal("no error")
	}
	t.Log(err)
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, ErrNotCapture) || errors.Is(err, capture.ErrCorrupt) {
		t.Errorf("errors.Is: %v", err)
	}
	for _, p := range []string{missing, text, dir, gzText, badVer, badNg} {
		if !strings.Contains(err.Error(), p+":") {
			t.Errorf("error does not name %s", p)
		}
	}
	// A file cut inside its header is a truncated capture, which Next
	// reports in its turn (TestCutHeader), not a file of another kind.
	for _, p := range []string{good, empty, shortHdr} {
		if strings.Contains(err.Error(), p) {
			t.Errorf("error names %s", p)
		}
	}
	if _, err := Open(); err == nil {
		t.Error("Open() with no path: no error")
	}
	if _, err := open(bytes.NewReader(nil), "-", good, "-"); err == nil {
		t.Error("standard input twice: no error")
	}
}

func TestStdin(t *testing.T) {
	pkts := testFrames(9, 40, false)
	data := gzipBytes(t, writePcap(t, pkts, flow.LinkEthernet, true))
	for _, chunked := range []bool{false, true} {
		var r io.Reader = bytes.NewReader(data)
		if chunked { // a pipe delivers a few bytes at a time
			r = &oneByteReader{r}
		}
		s, err := open(r, "-")
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(s)
		if err != io.EOF {
			t.Fatal(err)
		}
		compare(t, got, pkts, false)
	}
	if _, err := open(strings.NewReader("hello"), "-"); !errors.Is(err, ErrNotCapture) {
		t.Errorf("text on standard input: %v", err)
	}
	if _, err := open(strings.NewReader("\x1f\x8c"), "-"); !errors.Is(err, ErrNotCapture) {
		t.Errorf("two bytes no capture begins with on standard input: %v", err)
	}
	// Nothing, or a header cut short, is a truncated capture: found when
	// read, as from a file.
	for _, in := range [][]byte{nil, {0xd4}, writePcap(t, nil, flow.LinkEthernet, false)[:10]} {
		s, err := open(bytes.NewReader(in), "-")
		if err != nil {
			t.Fatalf("%d bytes: %v", len(in), err)
		}
		var p capture.Packet
		if err := s.Next(&p); !errors.Is(err, capture.ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrNotCapture) {
			t.Errorf("%d bytes on standard input: %v", len(in), err)
		}
		if err := s.Next(&p); err != io.EOF {
			t.Errorf("%d bytes on standard input, then: %v, want io.EOF", len(in), err)
		}
	}
}

type oneByteReader struct{ r io.Reader }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

func TestClose(t *testing.T) {
	path := writeTemp(t, "a.pcap", writePcap(t, testFrames(3, 50, false), flow.LinkEthernet, false))
	s, err := Open(path, path)
	if err != nil {
		t.Fatal(err)
	}
	var p capture.Packet
	if err := s.Next(&p); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Next(&p); err != capture.ErrClosed {
		t.Errorf("Next after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// recordEnds returns the offsets at which pcap records end, the first
// being the end of the file header.
func recordEnds(b []byte) []int {
	ends := []int{24}
	for off := 24; off+16 <= len(b); {
		off += 16 + int(binary.LittleEndian.Uint32(b[off+8:]))
		ends = append(ends, off)
	}
	return ends
}

// ngBlockEnds returns the offsets at which the blocks of a
// little-endian pcapng file end, and whether each is a packet block.
func ngBlockEnds(b []byte) (ends []int, packet []bool) {
	for off := 0; off+8 <= len(b); {
		typ := binary.LittleEndian.Uint32(b[off:])
		off += int(binary.LittleEndian.Uint32(b[off+4:]))
		ends = append(ends, off)
		packet = append(packet, typ == blockEnhancedPacket)
	}
	return ends, packet
}

// TestFileTruncated cuts files at every byte. A cut at a record boundary is
// a clean io.EOF after the records before it; any other cut returns those
// records intact and then an error that wraps capture.ErrCorrupt and names the
// record the file ends in.
func TestTruncated(t *testing.T) {
	pkts := testFrames(12, 60, false)
	for i := range pkts { // keep the sweep short
		pkts[i].data = pkts[i].data[:min(len(pkts[i].data), 40)]
		pkts[i].wireLen = max(pkts[i].wireLen, len(pkts[i].data))
	}
	check := func(t *testing.T, data []byte, cut int, ends []int, packetEnd func(i int) bool, headerEnd int) {
		s, err := open(bytes.NewReader(data[:cut]), "-")
		if err != nil {
			t.Fatalf("cut %d: open: %v", cut, err)
		}
		got, err := readAll(s)
		if cut < headerEnd {
			var fe *Error
			if !errors.Is(err, capture.ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) || !errors.As(err, &fe) || fe.Record != 0 || len(got) != 0 {
				t.Fatalf("cut %d inside the header: %d packets, %v", cut, len(got), err)
			}
			return
		}
		whole, boundary := 0, false
		for i, e := range ends {
			if e <= cut && packetEnd(i) {
				whole++
			}
			boundary = boundary || e == cut
		}
		compare(t, got, pkts[:whole], false)
		if boundary {
			if err != io.EOF {
				t.Fatalf("cut %d at a boundary: %v, want io.EOF", cut, err)
			}
			return
		}
		var fe *Error
		if !errors.Is(err, capture.ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) || !errors.As(err, &fe) || fe.Record != int64(whole+1) {
			t.Fatalf("cut %d after %d records: %v", cut, whole, err)
		}
	}
	t.Run("pcap", func(t *testing.T) {
		data := writePcap(t, pkts, flow.LinkEthernet, true)
		ends := recordEnds(data)
		for cut := range len(data) + 1 {
			check(t, data, cut, ends, func(i int) bool { return i > 0 }, 24)
		}
	})
	t.Run("pcapng", func(t *testing.T) {
		data := writeNg(t, pkts, flow.LinkEthernet)
		ends, packet := ngBlockEnds(data)
		for cut := range len(data) + 1 {
			check(t, data, cut, ends, func(i int) bool { return packet[i] }, ends[0])
		}
	})
	t.Run("gzip", func(t *testing.T) {
		for _, plain := range [][]byte{writePcap(t, pkts, flow.LinkEthernet, true), writeNg(t, pkts, flow.LinkEthernet)} {
			data := gzipBytes(t, plain)
			for cut := range len(data) {
				s, err := open(bytes.NewReader(data[:cut]), "-")
				if err != nil {
					continue
				}
				got, err := readAll(s)
				if !errors.Is(err, capture.ErrCorrupt) || len(got) > len(pkts) {
					t.Fatalf("gzip cut %d of %d: %d packets, %v", cut, len(data), len(got), err)
				}
				compare(t, got, pkts[:len(got)], false)
			}
		}
	})
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestFileDamage feeds records with lengths that cannot be right. Each is
// reported as corruption of the right record, before anything is allocated
// according to the length.
func TestDamage(t *testing.T) {
	pkts := testFrames(3, 70, false)
	pcap := func(edit func(b []byte) []byte) []byte {
		return edit(writePcap(t, pkts, flow.LinkEthernet, false))
	}
	second := 24 + 16 + len(pkts[0].data) // offset of record 2
	ng := func(edit func(w *ngWriter)) []byte {
		w := &ngWriter{order: binary.LittleEndian}
		w.shb()
		w.idb(flow.LinkEthernet, 0)
		w.epb(0, 1, []byte{1, 2, 3}, 3)
		edit(w)
		w.epb(0, 2, []byte{4}, 1)
		return w.b
	}
	ngBody := func(iface, caplen uint32) []byte {
		b := binary.LittleEndian.AppendUint32(nil, iface)
		b = append(b, make([]byte, 8)...)
		b = binary.LittleEndian.AppendUint32(b, caplen)
		b = binary.LittleEndian.AppendUint32(b, caplen)
		return append(b, make([]byte, 16)...)
	}
	cases := []struct {
		name  string
		data  []byte
		whole int    // records read before the damage
		msg   string // in the error
	}{
		{"pcap caplen 4 GiB", pcap(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[second+8:], 0xfffffff0)
			return b
		}), 1, "captured length 4294967280 exceeds 262144"},
		{"pcap caplen just above the limit", pcap(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[second+8:], MaxCaptureLength+1)
			return append(b, make([]byte, MaxCaptureLength)...)
		}), 1, "exceeds 262144"},
		{"pcap garbage header", pcap(func(b []byte) []byte {
			return append(b, bytes.Repeat([]byte{0xff}, 40)...)
		}), 3, "record 4"},
		{"pcapng caplen beyond block", ng(func(w *ngWriter) { w.block(blockEnhancedPacket, ngBody(0, 1<<30), 0) }), 1, "overruns"},
		{"pcapng block length 2 GiB", ng(func(w *ngWriter) { w.block(blockEnhancedPacket, ngBody(0, 0), 0x7ffffff0) }), 1, "invalid length"},
		{"pcapng block length not a multiple of 4", ng(func(w *ngWriter) { w.block(0x0bad, nil, 14) }), 1, "invalid length"},
		{"pcapng block length below the minimum", ng(func(w *ngWriter) { w.block(blockEnhancedPacket, nil, 12) }), 1, "invalid length"},
		// The file holds 48 bytes of it: its own 12 and the 36 of the
		// packet block after it.
		{"pcapng 32 MiB block cut short", ng(func(w *ngWriter) { w.block(0x0bad, nil, 32<<20) }), 1, "file ends inside a block of type 0xbad after 48 of its 33554432 bytes"},
		{"pcapng trailer", ng(func(w *ngWriter) {
			w.block(0x0bad, make([]byte, 8), 0)
			w.b[len(w.b)-1] = 0x80
		}), 1, "trailing length"},
		{"pcapng unknown interface", ng(func(w *ngWriter) { w.block(blockEnhancedPacket, ngBody(7, 0), 0) }), 1, "interface 7"},
		{"pcapng timestamp resolution", ng(func(w *ngWriter) { w.idb(flow.LinkRaw, 0, w.opt(optTsResol, []byte{20})) }), 1, "resolution"},
		{"pcapng option overrun", ng(func(w *ngWriter) {
			body := binary.LittleEndian.AppendUint32(nil, 1)
			body = binary.LittleEndian.AppendUint32(body, 0)
			body = binary.LittleEndian.AppendUint16(body, 2)
			body = binary.LittleEndian.AppendUint16(body, 200)
			w.block(blockInterface, body, 0)
		}), 1, "overruns"},
		{"pcapng section version", ng(func(w *ngWriter) {
			w.shb()
			binary.LittleEndian.PutUint16(w.b[len(w.b)-28+12:], 2)
		}), 1, "version 2.0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeTemp(t, "damaged", c.data)
			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got []testPkt
			alloc := allocated(func() { got, err = readAll(s) })
			var fe *Error
			if !errors.Is(err, capture.ErrCorrupt) || !errors.As(err, &fe) || len(got) != c.whole || fe.Record != int64(c.whole+1) {
				t.Fatalf("%d packets, %v; want %d packets then capture.ErrCorrupt", len(got), err, c.whole)
			}
			if !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q: want the path and %q", err, c.msg)
			}
			if alloc > 64<<10 {
				t.Errorf("allocated %d bytes", alloc)
			}
		})
	}
}

// TestFileLongerThanSnap: records above the declared snap length, within
// MaxCaptureLength, are read as tcpdump and Wireshark read them; a wire
// length below the captured length is raised to it.
func TestLongerThanSnap(t *testing.T) {
	b := writePcap(t, nil, flow.LinkEthernet, false) // snap length 65535
	data := make([]byte, 100000)
	le := binary.LittleEndian
	b = le.AppendUint32(b, 1)
	b = le.AppendUint32(b, 2)
	b = le.AppendUint32(b, uint32(len(data)))
	b = le.AppendUint32(b, 10) // wire length below the captured length
	b = append(b, data...)
	s, err := open(bytes.NewReader(b), "-")
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(s)
	if err != io.EOF || len(got) != 1 || len(got[0].data) != len(data) || got[0].wireLen != len(data) || got[0].timeNs != 1_000_002_000 {
		t.Fatalf("%d packets, %v", len(got), err)
	}
}

// bigCapture writes n small packets in the given format to a file.
func bigCapture(t testing.TB, n int, format string) string {
	pkts := make([]testPkt, n)
	frame := make([]byte, 1514)
	for i := range frame {
		frame[i] = byte(i)
	}
	for i := range pkts {
		size := 60 + i%7*40
		pkts[i] = testPkt{data: frame[:size], timeNs: int64(i) * 1000, wireLen: size}
	}
	var data []byte
	switch format {
	case "pcap":
		data = writePcap(t, pkts, flow.LinkEthernet, true)
	case "pcapng":
		data = writeNg(t, pkts, flow.LinkEthernet)
	case "pcap.gz":
		data = gzipBytes(t, writePcap(t, pkts, flow.LinkEthernet, true))
	}
	return writeTemp(t, "big."+format, data)
}

// TestFileNoAllocs proves that reading a record allocates nothing, and that
// reading a file of 200k packets takes a fixed amount of memory.
func TestNoAllocs(t *testing.T) {
	const n = 200_000
	for _, format := range []string{"pcap", "pcapng", "pcap.gz"} {
		t.Run(format, func(t *testing.T) {
			path := bigCapture(t, n, format)
			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var p capture.Packet
			if avg := testing.AllocsPerRun(n/2, func() {
				if err := s.Next(&p); err != nil {
					t.Fatal(err)
				}
			}); avg != 0 {
				t.Errorf("%v allocations per Next", avg)
			}

			var read int
			alloc := allocated(func() {
				s, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				for s.Next(&p) == nil {
					read++
				}
				s.Close()
			})
			info, _ := os.Stat(path)
			t.Logf("%d packets, %d-byte file: %d bytes allocated", read, info.Size(), alloc)
			if read != n || alloc > 2*bufSize {
				t.Errorf("read %d packets allocating %d bytes", read, alloc)
			}
		})
	}
}

// BenchmarkReaderNext reads a 100k-packet capture from the page cache;
// one op is one packet.
func BenchmarkReaderNext(b *testing.B) {
	for _, format := range []string{"pcap", "pcapng", "pcap.gz"} {
		b.Run(format, func(b *testing.B) {
			path := bigCapture(b, 100_000, format)
			s, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			var p capture.Packet
			var bytesRead int64
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Next(&p); err != nil {
					if err != io.EOF {
						b.Fatal(err)
					}
					s.Close()
					if s, err = Open(path); err != nil {
						b.Fatal(err)
					}
					continue
				}
				bytesRead += int64(len(p.Data))
			}
			s.Close()
			b.SetBytes(bytesRead / int64(b.N))
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "packets/s")
		})
	}
}

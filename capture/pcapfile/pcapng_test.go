package pcapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

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

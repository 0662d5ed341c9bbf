package pcapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

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

package pcapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// cutWant is what reading a capture cut short must give: the packets
// before the cut, then (unless the cut falls on a record boundary of a
// whole file) one error naming the record and offset it falls in, with how
// many of that record's bytes the file holds.
type cutWant struct {
	whole  int    // packets read before the error
	eof    bool   // no error: the cut is at a boundary
	record int64  // Error.Record
	offset int64  // Error.Offset
	msg    string // Error.Err's message
}

// block is one record of a capture as a test lays it out: a pcap record or
// a pcapng block.
type block struct {
	start, total int
	name         string // pcapng: the block's name in errors; pcap: ""
	packet       bool
}

// pcapBlocks lays out the records of a little-endian pcap file.
func pcapBlocks(b []byte) []block {
	var out []block
	for off := 24; off+16 <= len(b); {
		n := 16 + int(binary.LittleEndian.Uint32(b[off+8:]))
		out = append(out, block{start: off, total: n, packet: true})
		off += n
	}
	return out
}

// ngBlocks lays out the blocks of a little-endian pcapng file, the
// section header block first.
func ngBlocks(b []byte) []block {
	names := map[uint32]string{
		blockSectionHeader:  "the section header block",
		blockInterface:      "an interface description block",
		blockEnhancedPacket: "an enhanced packet block",
	}
	var out []block
	for off := 0; off+8 <= len(b); {
		typ := binary.LittleEndian.Uint32(b[off:])
		n := int(binary.LittleEndian.Uint32(b[off+4:]))
		out = append(out, block{start: off, total: n, name: names[typ], packet: typ == blockEnhancedPacket})
		off += n
	}
	return out
}

// wantCut computes, from the layout of the whole file alone, what reading
// its first n bytes must give. subject begins the message of a cut inside
// a record: "file ends", "gzip data ends" or "gzip stream cut short";
// atEnd tells whether the input really ends there (for gzip: the stream
// is whole), so that a cut at a boundary is a clean end.
func wantCut(plain []byte, ng bool, n int, subject string, atEnd bool) cutWant {
	hdr := 24
	var blocks []block
	if ng {
		blocks = ngBlocks(plain)
		hdr = blocks[0].total
		blocks = blocks[1:]
	} else {
		blocks = pcapBlocks(plain)
	}
	header := func(msg string) cutWant { return cutWant{msg: msg} }
	switch {
	case n == 0 && atEnd:
		if subject == "file ends" {
			return header("empty file")
		}
		return header("empty gzip data")
	case n < 4:
		return header(fmt.Sprintf("%s inside the magic number after %d of its 4 bytes", subject, n))
	case n < hdr && !ng:
		return header(fmt.Sprintf("%s inside the pcap file header after %d of its 24 bytes", subject, n))
	case n < 16 && ng:
		return header(fmt.Sprintf("%s inside the section header block after %d bytes", subject, n))
	case n < hdr:
		return header(fmt.Sprintf("%s inside the section header block after %d of its %d bytes", subject, n, hdr))
	}
	w := cutWant{}
	for _, b := range blocks {
		if b.start >= n {
			break // n is at a boundary
		}
		if b.start+b.total <= n {
			if b.packet {
				w.whole++
			}
			continue
		}
		w.record, w.offset = int64(w.whole+1), int64(b.start)
		rel := n - b.start
		switch {
		case !ng && rel < 16:
			w.msg = fmt.Sprintf("%s inside the record header after %d of its 16 bytes", subject, rel)
		case !ng:
			w.msg = fmt.Sprintf("%s inside the record data after %d of its %d bytes", subject, rel-16, b.total-16)
		case rel < 8:
			w.msg = fmt.Sprintf("%s inside a block header after %d of its 8 bytes", subject, rel)
		default:
			w.msg = fmt.Sprintf("%s inside %s after %d of its %d bytes", subject, b.name, rel, b.total)
		}
		return w
	}
	// n is at a boundary: the end of the input, unless the gzip stream
	// was cut there.
	if atEnd {
		w.eof = true
		return w
	}
	w.record, w.offset = int64(w.whole+1), int64(n)
	if ng {
		w.msg = fmt.Sprintf("%s inside a block header after 0 of its 8 bytes", subject)
	} else {
		w.msg = fmt.Sprintf("%s inside the record header after 0 of its 16 bytes", subject)
	}
	return w
}

// checkCut reads path and checks it against w: the packets before the
// cut, then exactly one error, then io.EOF.
func checkCut(t *testing.T, path string, pkts []testPkt, w cutWant, compressed bool) {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	got, err := readAll(s)
	compare(t, got, pkts[:min(len(got), len(pkts))], false)
	if len(got) != w.whole {
		t.Fatalf("%d packets before the error %v, want %d", len(got), err, w.whole)
	}
	if w.eof {
		if err != io.EOF {
			t.Fatalf("cut at a boundary: %v, want io.EOF", err)
		}
		return
	}
	var fe *Error
	if !errors.As(err, &fe) || !errors.Is(err, capture.ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrNotCapture) {
		t.Fatalf("error %v: want an *Error wrapping capture.ErrCorrupt and io.ErrUnexpectedEOF", err)
	}
	if fe.Path != path || fe.Record != w.record || fe.Offset != w.offset || fe.Err.Error() != w.msg {
		t.Fatalf("error %q: want record %d at offset %d: %q", err, w.record, w.offset, w.msg)
	}
	where := fmt.Sprintf("record %d at offset %d", w.record, w.offset)
	if w.record == 0 {
		where = fmt.Sprintf("file header at offset %d", w.offset)
	}
	if compressed && (strings.Contains(w.msg, "gzip data") || strings.Contains(w.msg, "gzip stream")) {
		where += " of the decompressed data"
	}
	if want := "capture: " + path + ": " + where + ": " + w.msg; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	if err := s.Next(new(capture.Packet)); err != io.EOF {
		t.Fatalf("after the error: %v, want io.EOF (one error per file)", err)
	}
	if st := s.Files()[0]; st.Err != fe || st.Packets != int64(w.whole) || !st.Done {
		t.Fatalf("Files()[0] = %+v", st)
	}
}

// cutPkts is a dozen short packets, so that a sweep over every byte of a
// file stays short.
func cutPkts() []testPkt {
	pkts := testFrames(12, 61, false)
	for i := range pkts {
		pkts[i].data = pkts[i].data[:min(len(pkts[i].data), 40)]
		pkts[i].wireLen = max(pkts[i].wireLen, len(pkts[i].data))
	}
	return pkts
}

// TestCutEverywhere cuts a pcap and a pcapng file after every byte and
// reads each cut as a file: the packets before the cut, then one error
// that names the file, the record and offset the cut falls in, and how
// many of the record's bytes the file holds, all computed from the layout
// of the whole file. An empty file and one cut inside its header are
// truncated captures too (record 0), not files of another kind.
func TestCutEverywhere(t *testing.T) {
	pkts := cutPkts()
	for _, ng := range []bool{false, true} {
		name := map[bool]string{false: "pcap", true: "pcapng"}[ng]
		t.Run(name, func(t *testing.T) {
			var plain []byte
			if ng {
				plain = writeNg(t, pkts, flow.LinkEthernet)
			} else {
				plain = writePcap(t, pkts, flow.LinkEthernet, true)
			}
			dir := t.TempDir()
			for n := range len(plain) + 1 {
				path := fmt.Sprintf("%s/cut%d.%s", dir, n, name)
				writeBytes(t, path, plain[:n])
				checkCut(t, path, pkts, wantCut(plain, ng, n, "file ends", true), false)
			}
		})
	}
}

// TestCutGzipEverywhere cuts gzip files of a pcap and a pcapng capture
// after every compressed byte. A cut inside the 10-byte gzip header is
// reported as such; after it, the decompressed bytes the stream still
// gives (counted by compress/gzip, which is not under test) are read as in
// TestCutEverywhere, the message saying that the gzip stream was cut. A
// whole gzip of a cut capture says that its data ends.
func TestCutGzipEverywhere(t *testing.T) {
	pkts := cutPkts()
	for _, ng := range []bool{false, true} {
		name := map[bool]string{false: "pcap.gz", true: "pcapng.gz"}[ng]
		t.Run(name, func(t *testing.T) {
			var plain []byte
			if ng {
				plain = writeNg(t, pkts, flow.LinkEthernet)
			} else {
				plain = writePcap(t, pkts, flow.LinkEthernet, true)
			}
			gz := gzipBytes(t, plain)
			dir := t.TempDir()
			for n := range len(gz) + 1 {
				path := fmt.Sprintf("%s/cut%d.%s", dir, n, name)
				writeBytes(t, path, gz[:n])
				var w cutWant
				switch {
				case n == 0:
					w = cutWant{msg: "empty file"}
				case n == 1:
					w = cutWant{msg: "file ends inside the magic number after 1 of its 4 bytes"}
				case n < 10:
					w = cutWant{msg: fmt.Sprintf("file ends inside the gzip header after %d of its 10 bytes", n)}
				default:
					got := gunzipPrefix(t, gz[:n])
					if !bytes.Equal(got, plain[:len(got)]) {
						t.Fatalf("cut %d: compress/gzip gives other bytes", n)
					}
					subject := "gzip stream cut short"
					if n == len(gz) {
						subject = "gzip data ends"
					}
					w = wantCut(plain, ng, len(got), subject, n == len(gz))
				}
				if n == 1 { // 0x1f begins the gzip magic, no capture's
					w.msg = "file ends inside the gzip header after 1 of its 10 bytes"
				}
				checkCut(t, path, pkts, w, n >= 10)
			}
			// A whole gzip stream of a capture cut inside a record.
			for _, n := range []int{0, 3, 20, len(plain) - 5} {
				path := fmt.Sprintf("%s/whole%d.%s", dir, n, name)
				writeBytes(t, path, gzipBytes(t, plain[:n]))
				checkCut(t, path, pkts, wantCut(plain, ng, n, "gzip data ends", true), true)
			}
		})
	}
}

// gunzipPrefix returns the bytes the reader's gzip library
// (klauspost/compress) decompresses from b before it fails.
func gunzipPrefix(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%d bytes of gzip: %v", len(b), err)
	}
	out, _ := io.ReadAll(zr)
	return out
}

// TestCutFilesInARow: Open accepts files cut inside their header along
// with good ones (a missing or foreign file still fails it), and Next
// reports each damaged file once, in its turn, and reads the good files
// after it in full. The error of an empty file, and of no other, wraps
// capture.ErrEmpty.
func TestCutFilesInARow(t *testing.T) {
	pkts := cutPkts()
	good := writePcap(t, pkts, flow.LinkEthernet, false)
	ng := writeNg(t, pkts, flow.LinkEthernet)
	files := []struct {
		name string
		data []byte
		msg  string // "" for a good file
	}{
		{"empty.pcap", nil, "file header at offset 0: empty file"},
		{"good1.pcap", good, ""},
		{"one.pcap", good[:1], "file header at offset 0: file ends inside the magic number after 1 of its 4 bytes"},
		{"short.pcap", good[:20], "file header at offset 0: file ends inside the pcap file header after 20 of its 24 bytes"},
		{"short.pcapng", ng[:20], "file header at offset 0: file ends inside the section header block after 20 of its"},
		{"empty.pcap.gz", gzipBytes(t, nil), "file header at offset 0 of the decompressed data: empty gzip data"},
		{"cut.pcap.gz", gzipBytes(t, good)[:5], "file header at offset 0: file ends inside the gzip header after 5 of its 10 bytes"},
		{"cutdata.pcap", good[:len(good)-1], "record 12 at offset "},
		{"good2.pcapng", ng, ""},
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, writeTemp(t, f.name, f.data))
	}
	s, err := Open(paths...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	packets := map[string]int{}
	errs := map[string][]error{}
	var p capture.Packet
	for range 1000 {
		err := s.Next(&p)
		if err == io.EOF {
			break
		}
		if err != nil {
			errs[s.Current()] = append(errs[s.Current()], err)
			continue
		}
		packets[s.Current()]++
	}
	for i, f := range files {
		path := paths[i]
		want := 0
		switch f.name {
		case "good1.pcap", "good2.pcapng":
			want = len(pkts)
		case "cutdata.pcap":
			want = len(pkts) - 1
		}
		if packets[path] != want {
			t.Errorf("%s: %d packets, want %d", f.name, packets[path], want)
		}
		if f.msg == "" {
			if len(errs[path]) != 0 {
				t.Errorf("good file %s: errors %v", f.name, errs[path])
			}
			continue
		}
		if len(errs[path]) != 1 {
			t.Fatalf("%s: errors %v, want one", f.name, errs[path])
		}
		err := errs[path][0]
		var fe *Error
		if !errors.As(err, &fe) || !errors.Is(err, capture.ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) ||
			!strings.HasPrefix(err.Error(), "capture: "+path+": "+f.msg) {
			t.Errorf("%s: error %q, want it to begin %q", f.name, err, "capture: "+path+": "+f.msg)
		}
		// Only a file with no data at all is empty: it cost no record.
		if empty := strings.HasPrefix(f.name, "empty."); errors.Is(err, capture.ErrEmpty) != empty {
			t.Errorf("%s: errors.Is(%q, capture.ErrEmpty) is %v, want %v", f.name, err, !empty, empty)
		}
	}
}

func writeBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

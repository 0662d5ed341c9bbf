package pcapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

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

// TestDamagedByReason: Damaged counts each damaged file once, under the
// reason its end gives (an empty file, one cut inside a record, one whose
// record header claims more than any capture holds), and good files not
// at all; it can be read while another goroutine reads the files (run
// with -race).
func TestDamagedByReason(t *testing.T) {
	pkts := testFrames(6, 40, false)
	good := writePcap(t, pkts, flow.LinkEthernet, false)
	bad := bytes.Clone(good)
	binary.LittleEndian.PutUint32(bad[24+8:], 0xfffffff0) // first record's captured length
	paths := []string{
		writeTemp(t, "good.pcap", good),
		writeTemp(t, "empty.pcap", nil),
		writeTemp(t, "cut.pcap", good[:len(good)-5]),
		writeTemp(t, "bad.pcap", bad),
		writeTemp(t, "cut2.pcap", good[:len(good)-1]),
		writeTemp(t, "good2.pcap", good),
	}
	s, err := Open(paths...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if d := s.Damaged(); len(d) != 0 {
		t.Errorf("Damaged() before reading = %v", d)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var p capture.Packet
		for range 100 { // 6+5+5+6 packets and 4 errors: bounded
			if err := s.Next(&p); err == io.EOF {
				return
			}
		}
		t.Error("no io.EOF after 100 calls")
	}()
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
			if n := s.Damaged()["truncated"]; n > 2 {
				t.Errorf("truncated %d while reading, more than there are", n)
			}
		}
	}
	want := map[string]uint64{"empty": 1, "truncated": 2, "damaged": 1}
	if got := s.Damaged(); !maps.Equal(got, want) {
		t.Errorf("Damaged() = %v, want %v", got, want)
	}
}

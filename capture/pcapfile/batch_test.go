package pcapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// readBatches reads s with NextBatch to io.EOF, keeping up to lag batches
// unreleased while it reads on (lag < 0: all of them), and returns every
// packet (copied once the whole input is read, so that a buffer the reader
// reused too early shows as wrong data; without a wire length, which
// frames do not carry) and every error but io.EOF.
func readBatches(t *testing.T, s *Reader, lag int) ([]testPkt, []error) {
	t.Helper()
	var out []testPkt
	var errs []error
	var kept []*capture.Batch
	var views [][]capture.Frame // kept batches' frames, checked at the end
	for i := 0; ; i++ {
		if i > 1e6 {
			t.Fatal("NextBatch never ends")
		}
		b := new(capture.Batch)
		err := s.NextBatch(b)
		kept = append(kept, b)
		views = append(views, allFrames(b))
		for _, p := range allFrames(b) {
			out = append(out, testPkt{data: bytes.Clone(p.Data), timeNs: p.TimeNs, link: p.LinkType})
		}
		if lag >= 0 && len(kept) > lag {
			s.ReleaseBatch(kept[0])
			kept, views = kept[1:], views[1:]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	// The batches still held point to bytes the reader must not have
	// overwritten since.
	n := len(out)
	for i := len(views) - 1; i >= 0; i-- {
		for j := len(views[i]) - 1; j >= 0; j-- {
			n--
			if p := views[i][j]; !bytes.Equal(p.Data, out[n].data) {
				t.Fatalf("held packet %d changed after it was handed out", n)
			}
		}
	}
	return out, errs
}

// TestNextBatch: NextBatch hands out the same records and errors as Next,
// for one file and several, pcap, pcapng and gzip, damaged files and
// records longer than the read buffer, whether the batches are given back
// at once, a few batches later or never.
func TestNextBatch(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pkts := testFrames(20000, 7, true)
	pcap := write("a.pcap", writePcap(t, pkts, flow.LinkEthernet, true))
	ng := write("b.pcapng", writeNg(t, pkts[:5000], flow.LinkEthernet, flow.LinkRaw))
	gz := write("c.pcap.gz", gzipBytes(t, writePcap(t, pkts[:7000], flow.LinkEthernet, false)))
	whole := writePcap(t, pkts[:3000], flow.LinkEthernet, false)
	cut := write("d.pcap", whole[:len(whole)-30])
	// A record header that cannot be right, in the middle of a file: the
	// rest of the file is skipped, and the next one read into the buffer.
	bad := bytes.Clone(whole)
	off := 24
	for range 1000 {
		off += 16 + int(binary.LittleEndian.Uint32(bad[off+8:]))
	}
	binary.LittleEndian.PutUint32(bad[off+8:], 0xfffffff0)
	damaged := write("f.pcap", bad)
	// A block longer than the buffer: its packet is spilled.
	w := &ngWriter{order: binary.LittleEndian}
	w.shb()
	w.idb(flow.LinkEthernet, 0)
	w.epb(0, 1, pkts[1].data, uint32(len(pkts[1].data)))
	w.epb(0, 2, pkts[2].data, uint32(len(pkts[2].data)), w.opt(1, make([]byte, 60000)), w.opt(1, make([]byte, 60000)), w.opt(1, make([]byte, 60000)), w.opt(1, make([]byte, 60000)), w.opt(1, make([]byte, 60000)), w.opt(1, make([]byte, 60000)))
	w.epb(0, 3, pkts[3].data, uint32(len(pkts[3].data)))
	long := write("e.pcapng", w.b)

	testdata, _ := filepath.Glob("../../testdata/pcaps/*.pcap*")
	sets := [][]string{{pcap}, {ng}, {gz}, {cut}, {long}, {pcap, cut, ng, gz, long, pcap}, {damaged, pcap, damaged, ng}, testdata}
	for _, paths := range sets {
		want, wantErrs := readAllErrs(t, paths)
		for _, lag := range []int{0, 1, 3, -1} {
			s, err := Open(paths...)
			if err != nil {
				t.Fatal(err)
			}
			got, errs := readBatches(t, s, lag)
			s.Close()
			compare(t, got, noWireLen(want), false)
			if len(errs) != len(wantErrs) {
				t.Fatalf("%v lag %d: errors %v, want %v", paths, lag, errs, wantErrs)
			}
			for i := range errs {
				if errs[i].Error() != wantErrs[i].Error() {
					t.Fatalf("%v lag %d: error %d: %v, want %v", paths, lag, i, errs[i], wantErrs[i])
				}
			}
		}
	}
}

// readAllErrs reads paths with Next to io.EOF: every packet and error.
func readAllErrs(t *testing.T, paths []string) ([]testPkt, []error) {
	t.Helper()
	s, err := Open(paths...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []testPkt
	var errs []error
	for {
		got, err := readAll(s)
		out = append(out, got...)
		if err == io.EOF {
			return out, errs
		}
		if !errors.Is(err, capture.ErrCorrupt) {
			t.Fatal(err)
		}
		errs = append(errs, err)
	}
}

// TestNextBatchPipe: a batch read from a pipe ends when the writer is
// quiet (capture.ErrTimeout after the records that came), and holds its
// records while the reader goes on.
func TestNextBatchPipe(t *testing.T) {
	pkts := testFrames(3000, 3, false)
	data := writePcap(t, pkts, flow.LinkEthernet, true)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	half := len(data) / 2
	quiet := make(chan struct{})
	wrote := make(chan error, 1)
	go func() {
		defer w.Close()
		if _, err := w.Write(data[:half]); err != nil {
			wrote <- err
			return
		}
		<-quiet // the reader saw the pause
		_, err := w.Write(data[half:])
		wrote <- err
	}()
	s, err := open(r, "-")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []testPkt
	var held []*capture.Batch
	timeouts := 0
	for done := false; !done; {
		b := new(capture.Batch)
		err := s.NextBatch(b)
		held = append(held, b)
		for _, p := range allFrames(b) {
			got = append(got, testPkt{data: bytes.Clone(p.Data), timeNs: p.TimeNs, link: p.LinkType})
		}
		switch {
		case err == io.EOF:
			done = true
		case errors.Is(err, capture.ErrTimeout):
			timeouts++
			if timeouts == 1 {
				close(quiet) // the first half is read: send the rest
			}
		case err != nil:
			t.Fatal(err)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if timeouts == 0 {
		t.Error("no capture.ErrTimeout while the writer was quiet")
	}
	compare(t, got, noWireLen(pkts), false)
	n := 0
	for _, b := range held {
		for _, p := range allFrames(b) {
			if !bytes.Equal(p.Data, got[n].data) {
				t.Fatalf("held packet %d changed", n)
			}
			n++
		}
	}
}

// noWireLen returns pkts without their wire lengths, as frames have them.
func noWireLen(pkts []testPkt) []testPkt {
	out := append([]testPkt(nil), pkts...)
	for i := range out {
		out[i].wireLen = 0
	}
	return out
}

// allFrames returns the frames of b in order: Frames, then Records, whose
// records must be back to back and fill their Data.
func allFrames(b *capture.Batch) []capture.Frame {
	out := append([]capture.Frame(nil), b.Frames...)
	off := 0
	for i := range b.Records.Len() {
		if int(b.Records.Offsets[i]) != off {
			panic(fmt.Sprintf("record %d at offset %d, want %d", i, b.Records.Offsets[i], off))
		}
		data, t := b.Records.Record(i)
		if b.Records.Time(i) != t {
			panic(fmt.Sprintf("record %d: Time %d, Record %d", i, b.Records.Time(i), t))
		}
		f := capture.Frame{Data: data, TimeNs: t, LinkType: b.Records.LinkType}
		out = append(out, f)
		off += 16 + len(f.Data)
	}
	if off != len(b.Records.Data) {
		panic(fmt.Sprintf("%d records in %d bytes of Records, %d more", b.Records.Len(), off, len(b.Records.Data)-off))
	}
	return out
}

// TestNextBatchPcapRecords: a little-endian pcap file's records are handed
// out as Records, each batch a buffer's worth, so that the reading
// goroutine writes nothing per record: only the file's first, read as the
// file is opened, comes as a Frame. In microseconds and in nanoseconds.
func TestNextBatchPcapRecords(t *testing.T) {
	pkts := testFrames(20000, 5, true)
	for _, nano := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "a.pcap")
		if err := os.WriteFile(path, writePcap(t, pkts, flow.LinkEthernet, nano), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		batches, records, frames := 0, 0, 0
		for {
			b := new(capture.Batch)
			err := s.NextBatch(b)
			frames += len(b.Frames)
			if n := b.Records.Len(); n > 0 {
				batches++
				records += n
			}
			s.ReleaseBatch(b)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		if frames != 1 || records+frames != len(pkts) {
			t.Fatalf("nano %v: %d records and %d frames, want %d and 1", nano, records, frames, len(pkts)-1)
		}
		if size := len(writePcap(t, pkts, flow.LinkEthernet, nano)); batches < size/bufSize || batches > 2*(size/bufSize+1) {
			t.Errorf("nano %v: %d batches for %d bytes, want about one per %d-byte buffer", nano, batches, size, bufSize)
		}
	}
}

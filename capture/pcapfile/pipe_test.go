package pcapfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// nextResult is what a call of Next returned, with a copy of the packet.
type nextResult struct {
	pkt testPkt
	err error
}

// nextWithin calls s.Next in a goroutine and returns what it returned, or
// fails the test when it has not returned within limit. The test goroutine
// waits for the answer before using s again, so s is used by one
// goroutine at a time.
func nextWithin(t *testing.T, s *Reader, limit time.Duration) nextResult {
	t.Helper()
	done := make(chan nextResult, 1)
	go func() {
		var p capture.Packet
		err := s.Next(&p)
		done <- nextResult{testPkt{data: append([]byte(nil), p.Data...), timeNs: p.TimeNs, wireLen: p.WireLen, link: p.LinkType}, err}
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(limit):
		t.Fatalf("Next has not returned after %v", limit)
		return nextResult{}
	}
}

// pipeLimit bounds how long a Next on a quiet pipe may wait: PollInterval,
// with ample room for a loaded machine.
const pipeLimit = 50 * PollInterval

// On a pipe, Next returns capture.ErrTimeout when the writer is quiet for
// PollInterval, keeps what it read of a record cut by the pause, and goes
// on with the same file when more comes: the caller can hand on the
// packets it has while the traffic is slow. Both formats, on standard
// input and on a named pipe.
func TestPipeQuiet(t *testing.T) {
	pkts := testFrames(6, 70, false)
	for _, format := range []string{"pcap", "pcapng"} {
		var data []byte
		var ends []int // where each record ends; ends[0]: the header (and interface block)
		if format == "pcap" {
			data = writePcap(t, pkts, flow.LinkEthernet, true)
			ends = recordEnds(data)
		} else {
			data = writeNg(t, pkts, flow.LinkEthernet)
			blocks, _ := ngBlockEnds(data)
			ends = blocks[1:] // section header and interface blocks, then one block a packet
		}
		for _, src := range []string{"stdin", "fifo"} {
			t.Run(format+"/"+src, func(t *testing.T) {
				// The header and the first packet, then a pause.
				s, w := openPipe(t, src, data[:ends[1]])
				defer s.Close()
				write := func(b []byte) {
					if _, err := w.Write(b); err != nil {
						t.Fatal(err)
					}
				}
				var got []testPkt
				take := func() {
					t.Helper()
					r := nextWithin(t, s, pipeLimit)
					if r.err != nil {
						t.Fatalf("after %d packets: %v, want a packet", len(got), r.err)
					}
					got = append(got, r.pkt)
				}
				quiet := func() {
					t.Helper()
					if r := nextWithin(t, s, pipeLimit); r.err != capture.ErrTimeout {
						t.Fatalf("after %d packets, on a quiet pipe: %v, want capture.ErrTimeout", len(got), r.err)
					}
				}
				take()
				quiet()
				// Half of the next record header, a pause; the rest of
				// the record and half of the one after, a pause.
				write(data[ends[1] : ends[1]+10])
				quiet()
				mid := (ends[2] + ends[3]) / 2
				write(data[ends[1]+10 : mid])
				take()
				quiet()
				write(data[mid:])
				w.Close()
				for range len(pkts) - 2 {
					take()
				}
				if r := nextWithin(t, s, pipeLimit); r.err != io.EOF {
					t.Fatalf("at the end: %v, want io.EOF", r.err)
				}
				compare(t, got, pkts, false)
				if f := s.Files()[0]; f.Err != nil || f.Packets != int64(len(pkts)) {
					t.Errorf("Files: %+v", f)
				}
			})
		}
	}
}

// openPipe returns a Reader of a pipe, as standard input or as a named
// pipe given by its path, and the pipe's write end, into which first has
// been written (Open reads the magic number of standard input).
func openPipe(t *testing.T, src string, first []byte) (*Reader, *os.File) {
	t.Helper()
	if src == "stdin" {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		if _, err := w.Write(first); err != nil {
			t.Fatal(err)
		}
		s, err := open(r, "-")
		if err != nil {
			t.Fatal(err)
		}
		return s, w
	}
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path) // does not open the pipe: a read of it would take the header
	if err != nil {
		t.Fatal(err)
	}
	// Opening one end of a named pipe waits for the other. An end held
	// open for reading, without blocking (Linux), lets the write end open
	// now; the Reader opens its own read end in its first Next, and finds
	// the writer there.
	hold, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); hold.Close() })
	if _, err := w.Write(first); err != nil {
		t.Fatal(err)
	}
	return s, w
}

// A gzip stream on a pipe is read without timeouts (gzip would keep the
// error of a read that timed out and fail for good): a pause of the writer
// neither ends nor damages it.
func TestPipeGzipPause(t *testing.T) {
	pkts := testFrames(5, 71, false)
	data := gzipBytes(t, writePcap(t, pkts, flow.LinkEthernet, false))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		defer w.Close()
		w.Write(data[:len(data)/2])
		// The pause starts once the reader has taken all of the first
		// half (the pipe is empty), so that it falls while the reader
		// waits for more, however late the reader got there.
		testutil.WaitUntil(time.Minute, func() bool { return pipeEmpty(r) })
		// What is tested: a writer quiet for longer than the poll
		// interval a timed-out read would have waited.
		time.Sleep(3 * PollInterval)
		w.Write(data[len(data)/2:])
	}()
	s, err := open(r, "-")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []testPkt
	for {
		res := nextWithin(t, s, pipeLimit)
		if res.err == io.EOF {
			break
		}
		if res.err != nil {
			t.Fatalf("after %d packets: %v", len(got), res.err)
		}
		got = append(got, res.pkt)
	}
	compare(t, got, pkts, true)
}

// A regular file never times out, however it is read: ErrTimeout is for
// pipes.
func TestFileNoPoll(t *testing.T) {
	s, err := Open(writeTemp(t, "a.pcap", writePcap(t, testFrames(3, 72, false), flow.LinkEthernet, false)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := readAll(s)
	if err != io.EOF || len(got) != 3 || errors.Is(err, capture.ErrTimeout) {
		t.Fatalf("read %d packets, then %v", len(got), err)
	}
}

package cli

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/testframe"
)

// pcapRecord is a little-endian pcap record of frame at unix second sec.
func pcapRecord(sec uint32, frame []byte) []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, sec)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, uint32(len(frame)))
	b = le.AppendUint32(b, uint32(len(frame)))
	return append(b, frame...)
}

// pcapFileHeader is a little-endian pcap file header, microseconds,
// Ethernet.
func pcapFileHeader() []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, 0xa1b2c3d4)
	b = le.AppendUint16(b, 2)
	b = le.AppendUint16(b, 4)
	b = le.AppendUint64(b, 0) // thiszone, sigfigs
	b = le.AppendUint32(b, 65535)
	return le.AppendUint32(b, 1)
}

// `tcpdump -U -w - | flowdedup replay -` on a quiet link: each new key's
// record reaches --out a bounded time after its packet, with no more
// traffic to push it out (the keys of a pipe used to wait for a batch of
// 256 of their shard, or the end of the input). flowdedup runs as a
// process whose standard input is a pipe, as a shell makes it.
func TestReplayPipeSlowTraffic(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(flowdedupBinary(t), "flowdedup")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	cmd := exec.Command(bin, "replay", "--key", "src", "--workers", "2", "--out", out, "-")
	cmd.Stdin = r
	replay := testutil.StartProcess(t, cmd, "", 0)
	r.Close() // the child has it

	// Records come within PollInterval (100 ms) plus the time to filter
	// and write them; a minute leaves room for a loaded machine. Without the
	// poll they never come until the input ends.
	const limit = time.Minute
	waitLines := func(n int) {
		t.Helper()
		replay.WaitFor(t, fmt.Sprintf("%d records in --out after the packet that makes them", n), limit, func() bool { return lineCount(out) >= n })
	}
	send := func(b []byte) {
		t.Helper()
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	frame := func(src string) []byte {
		return testframe.UDP4Frame(netip.MustParseAddr(src), netip.MustParseAddr("198.51.100.1"), 1000, 53, 60)
	}
	send(pcapFileHeader())
	sec := uint32(1_700_000_000)
	for i, src := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.1", "192.0.2.3"} {
		send(pcapRecord(sec+uint32(i), frame(src)))
		want := map[int]int{0: 1, 1: 2, 2: 2, 3: 3}[i] // the third packet repeats the first key
		waitLines(want)
		if got := lineCount(out); got != want {
			t.Fatalf("after packet %d: %d records, want %d: %q", i+1, got, want, readFile(out))
		}
	}
	w.Close()
	if err := replay.Wait(t, limit); err != nil {
		t.Fatalf("replay -: %v\n%s", err, replay.Log())
	}
	if n := lineCount(out); n != 3 {
		t.Errorf("%d records at the end, want 3: %q", n, readFile(out))
	}
	for _, src := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
		if !strings.Contains(readFile(out), `"src":"`+src+`"`) {
			t.Errorf("no record of %s: %q", src, readFile(out))
		}
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// lineCount counts the complete lines of path (0 when it does not exist).
func lineCount(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}

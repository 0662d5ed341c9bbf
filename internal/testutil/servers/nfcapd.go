package servers

import (
	"bytes"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// Nfcapd is a running nfcapd, the collector of Debian's nfdump package,
// listening for NetFlow and IPFIX on a loopback UDP port (nfcapd 1.7 does
// not take TCP) and writing what it collects under Dir.
//
// nfcapd writes its flows to a file it renames only when it rotates or
// exits, so read them with Flows, which stops it first.
type Nfcapd struct {
	// Addr is the collector's UDP address, 127.0.0.1:PORT.
	Addr string
	// Dir holds nfcapd's files; nfdump -R Dir reads them.
	Dir string

	port    int
	cmd     *exec.Cmd
	out     bytes.Buffer // stdout and stderr, read only after Wait
	exited  chan struct{}
	waitErr error
	stats   *NfcapdStats
}

// NfcapdStats are the counts nfcapd logs when it exits.
type NfcapdStats struct {
	Flows          uint64
	SequenceErrors uint64 // messages whose sequence number was not the expected one
	BadPackets     uint64 // datagrams nfcapd could not decode
	// Dropped counts datagrams the kernel dropped because nfcapd's socket
	// buffer was full (the drops column of /proc/net/udp), 0 if unknown.
	Dropped uint64
}

// NfdumpFlow is one flow as `nfdump -o json` reads it back from nfcapd's
// files: the fields an IPFIX exporter of flow keys sends. Fields the
// exporter did not send are zero, as nfdump shows them.
type NfdumpFlow struct {
	Src, Dst         netip.Addr // invalid when nfdump shows no address of that side
	SrcMask, DstMask uint8      // the prefix lengths nfdump shows (src_mask, dst_mask): 0 when the exporter sent none
	Proto            uint8
	SrcPort, DstPort uint16
	ICMPType         uint8 // ICMP and ICMPv6 flows: nfdump shows type and code instead of ports
	ICMPCode         uint8
	// First is the flow's start (flowStartMilliseconds), to the
	// millisecond.
	First time.Time
	// Duration is the flow's end (flowEndMilliseconds) less its start, as
	// nfdump shows it: 0 for flowdedup's records, which end where they
	// start; without an end nfdump takes 1970 and shows a huge negative
	// duration.
	Duration time.Duration
}

// StartNfcapd starts nfcapd on a free UDP port of 127.0.0.1 with a
// temporary directory, and stops it when tb ends. It skips tb (see
// SkipOrFail) when nfcapd or nfdump is not installed (Debian: apt-get
// install nfdump).
func StartNfcapd(tb testing.TB) *Nfcapd {
	tb.Helper()
	return startNfcapd(tb, 0)
}

// StartNfcapdAt is StartNfcapd on the given UDP port of 127.0.0.1, for a
// test that exports to the port before the collector is up. It fails tb
// when nfcapd cannot bind the port.
func StartNfcapdAt(tb testing.TB, port int) *Nfcapd {
	tb.Helper()
	return startNfcapd(tb, port)
}

func startNfcapd(tb testing.TB, port int) *Nfcapd {
	tb.Helper()
	bin, err := exec.LookPath("nfcapd")
	if err != nil {
		testutil.SkipOrFail(tb, "nfcapd is not installed (Debian package nfdump): %v", err)
	}
	if _, err := exec.LookPath("nfdump"); err != nil {
		testutil.SkipOrFail(tb, "nfdump is not installed (Debian package nfdump): %v", err)
	}
	// A free port cannot be reserved for another process: take one the
	// kernel hands out, and try again in the rare case another process
	// took it before nfcapd could bind it. A port given is tried once.
	attempts := 5
	if port != 0 {
		attempts = 1
	}
	var lastOut string
	for attempt := 0; attempt < attempts; attempt++ {
		n := &Nfcapd{Dir: tb.TempDir(), exited: make(chan struct{})}
		n.port = port
		if port == 0 {
			n.port = testutil.FreeUDPPort(tb)
		}
		n.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port))
		// -t: rotate once an hour, so that only Stop ends a file; no -D:
		// it stays in the foreground, a child of the test.
		n.cmd = exec.Command(bin, "-b", "127.0.0.1", "-p", strconv.Itoa(n.port), "-w", n.Dir, "-t", "3600")
		n.cmd.Stdout, n.cmd.Stderr = &n.out, &n.out
		if err := n.cmd.Start(); err != nil {
			tb.Fatalf("start nfcapd: %v", err)
		}
		go func() {
			n.waitErr = n.cmd.Wait()
			close(n.exited)
		}()
		if testutil.WaitUDPBound(n.port, n.exited, 10*time.Second) {
			tb.Cleanup(func() { n.kill() })
			return n
		}
		n.kill()
		lastOut = n.out.String()
	}
	tb.Fatalf("nfcapd did not bind a UDP port in %d attempts; its last output:\n%s", attempts, lastOut)
	return nil
}

// WaitRead waits until nfcapd has read every datagram sent to it so far,
// and returns how many datagrams the kernel dropped for want of room in its
// socket buffer. A test that sends more than that buffer holds (about
// 200 KiB: nfcapd's -B cannot raise it above net.core.rmem_max) calls it
// between bursts, since UDP drops what does not fit.
func (n *Nfcapd) WaitRead(tb testing.TB) (dropped uint64) {
	tb.Helper()
	// Loopback delivers a datagram into the socket's queue within the
	// sender's send call; nfcapd has read them all when the queue is empty.
	// The queue is looked at twice in a row, 5 ms apart, so that one
	// momentarily empty between two datagrams of a sender still running
	// does not count (the tests call this after their sender is done).
	deadline := time.Now().Add(10 * time.Second)
	for empty := 0; empty < 2; {
		q, ok := testutil.UDPSocket(n.port)
		if !ok {
			return dropped // exited: Stop says so
		}
		dropped = q.Drops
		if q.RX == 0 {
			empty++
		} else {
			empty = 0
		}
		if time.Now().After(deadline) {
			tb.Fatalf("nfcapd has not read its socket's %d bytes after 10 s", q.RX)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return dropped
}

// Stop waits until nfcapd has read every datagram sent to it so far (see
// WaitRead), stops it (SIGTERM: it writes its file and exits) and returns
// the counts it logged. Later calls return the same counts.
func (n *Nfcapd) Stop(tb testing.TB) NfcapdStats {
	tb.Helper()
	if n.stats != nil {
		return *n.stats
	}
	var st NfcapdStats
	st.Dropped = n.WaitRead(tb)
	select {
	case <-n.exited:
		tb.Fatalf("nfcapd exited before it was stopped (%v):\n%s", n.waitErr, n.out.String())
	default:
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
		n.kill()
		tb.Fatalf("nfcapd did not exit within 10 s of SIGTERM:\n%s", n.out.String())
	}
	out := n.out.String()
	m := nfcapdStatsLine.FindStringSubmatch(out)
	if m == nil {
		tb.Fatalf("nfcapd logged no statistics line on exit (%v):\n%s", n.waitErr, out)
	}
	st.Flows, _ = strconv.ParseUint(m[1], 10, 64)
	st.SequenceErrors, _ = strconv.ParseUint(m[2], 10, 64)
	st.BadPackets, _ = strconv.ParseUint(m[3], 10, 64)
	n.stats = &st
	return st
}

// nfcapdStatsLine matches the line nfcapd 1.7 logs for its flow source when
// it closes a file:
//
//	Ident: 'none' Flows: 5, Packets: 0, Bytes: 0, Sequence Errors: 0, Bad Packets: 0
var nfcapdStatsLine = regexp.MustCompile(`Flows: (\d+), Packets: \d+, Bytes: \d+, Sequence Errors: (\d+), Bad Packets: (\d+)`)

// Output returns what nfcapd printed; complete only after Stop.
func (n *Nfcapd) Output() string {
	select {
	case <-n.exited:
		return n.out.String()
	default:
		return "(nfcapd still running)"
	}
}

func (n *Nfcapd) kill() {
	select {
	case <-n.exited:
		return
	default:
	}
	n.cmd.Process.Kill()
	<-n.exited
}

// Flows stops nfcapd (see Stop) and returns the flows nfdump reads from
// its directory, in the order nfcapd received them.
func (n *Nfcapd) Flows(tb testing.TB) []NfdumpFlow {
	tb.Helper()
	n.Stop(tb)
	return ReadNfdump(tb, n.Dir)
}

// ReadNfdump returns the flows of the nfcapd files in dir, as
// `nfdump -R dir -o json` shows them in UTC.
func ReadNfdump(tb testing.TB, dir string) []NfdumpFlow {
	tb.Helper()
	flows, _ := readNfdump(tb, dir)
	return flows
}

// readNfdump is ReadNfdump, which also returns the SysID of the exporter
// of each flow (see NfdumpExporter).
func readNfdump(tb testing.TB, dir string) (flows []NfdumpFlow, sysIDs []uint32) {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "nfcapd.2*")) // closed files: nfcapd.YYYYMMDDhhmm
	if len(files) == 0 {
		return nil, nil // nfdump says "Empty file list" and prints no JSON
	}
	cmd := exec.Command("nfdump", "-R", dir, "-o", "json")
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("nfdump -R %s: %v\n%s", dir, err, stderr.String())
	}
	if bytes.Contains(out, []byte("No matching flows")) {
		return nil, nil
	}
	var raw []struct {
		Type     string `json:"type"`
		SysID    uint32 `json:"export_sysid"`
		First    string `json:"first"`
		Last     string `json:"last"`
		Proto    uint8  `json:"proto"`
		SrcPort  uint16 `json:"src_port"`
		DstPort  uint16 `json:"dst_port"`
		ICMPType uint8  `json:"icmp_type"`
		ICMPCode uint8  `json:"icmp_code"`
		Src4     string `json:"src4_addr"`
		Dst4     string `json:"dst4_addr"`
		Src6     string `json:"src6_addr"`
		Dst6     string `json:"dst6_addr"`
		SrcMask  uint8  `json:"src_mask"`
		DstMask  uint8  `json:"dst_mask"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		tb.Fatalf("nfdump -R %s -o json: %v\n%s", dir, err, out)
	}
	flows = make([]NfdumpFlow, 0, len(raw))
	for i, r := range raw {
		if r.Type != "FLOW" {
			continue
		}
		f := NfdumpFlow{Proto: r.Proto, SrcPort: r.SrcPort, DstPort: r.DstPort, ICMPType: r.ICMPType, ICMPCode: r.ICMPCode, SrcMask: r.SrcMask, DstMask: r.DstMask}
		var err error
		if f.Src, err = parseOptAddr(r.Src4 + r.Src6); err == nil {
			f.Dst, err = parseOptAddr(r.Dst4 + r.Dst6)
		}
		if err == nil {
			// nfdump prints local time with milliseconds and no zone;
			// TZ=UTC above makes that UTC.
			f.First, err = time.ParseInLocation("2006-01-02T15:04:05.000", r.First, time.UTC)
		}
		var last time.Time
		if err == nil {
			last, err = time.ParseInLocation("2006-01-02T15:04:05.000", r.Last, time.UTC)
			f.Duration = last.Sub(f.First)
		}
		if err != nil {
			tb.Fatalf("nfdump flow %d: %v", i, err)
		}
		flows = append(flows, f)
		sysIDs = append(sysIDs, r.SysID)
	}
	return flows, sysIDs
}

func parseOptAddr(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, nil
	}
	return netip.ParseAddr(s)
}

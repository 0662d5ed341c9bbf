package testexporter

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// Softflowd runs Debian's softflowd (a NetFlow/IPFIX exporter) over a
// capture file: `softflowd -r CAPTURE -n DEST -v VERSION -d`, which reads
// the file, exports every flow of it to DEST (UDP) and exits. version is
// 5, 9 or 10 (IPFIX). It fails tb when softflowd fails, and skips it (see
// SkipOrFail) when softflowd is not installed. It returns softflowd's
// output.
//
// softflowd is deterministic on a file: the same capture gives the same
// flows, so a test can run it once per receiver and compare what they
// decode. It computes flow times from its own clock, not the capture's.
func Softflowd(tb testing.TB, capture, dest string, version int, args ...string) string {
	tb.Helper()
	bin, err := exec.LookPath("softflowd")
	if err != nil {
		testutil.SkipOrFail(tb, "softflowd is not installed (Debian package softflowd): %v", err)
	}
	// -r alone turns off the control socket and the pid file, so that two
	// softflowd processes of tests running at once share nothing. Not
	// -c: given after -r, it turns the control socket back on, and
	// softflowd 1.1.0 reading a file then blocks in accept(2) on it (the
	// poll that would say a client is waiting is skipped for files, and
	// its result read all the same).
	argv := append([]string{"-r", capture, "-n", dest, "-v", strconv.Itoa(version), "-d"}, args...)
	cmd := exec.Command(bin, argv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start softflowd: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		tb.Fatalf("softflowd %v did not exit within 60 s:\n%s", argv, out.String())
	}
	if err != nil {
		tb.Fatalf("softflowd %v: %v\n%s", argv, err, out.String())
	}
	return out.String()
}

var softflowdSent = regexp.MustCompile(`Flows exported: \d+ \(\d+ records\) in (\d+) packets`)

// SoftflowdSent is the number of datagrams softflowd says it sent, from
// the statistics Softflowd returns ("Flows exported: 300 (300 records) in
// 15 packets").
func SoftflowdSent(tb testing.TB, out string) int {
	tb.Helper()
	m := softflowdSent.FindStringSubmatch(out)
	if m == nil {
		tb.Fatalf("softflowd says no count of datagrams sent:\n%s", out)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// CaptureSoftflowd runs Softflowd into a UDP socket of the test's own on
// loopback and returns the datagrams softflowd sent, in order. The socket's
// buffer is made large enough (32 MiB, with CAP_NET_ADMIN) to hold
// everything a capture of the testdata size exports; a datagram the kernel
// dropped anyway fails tb.
func CaptureSoftflowd(tb testing.TB, capture string, version int, args ...string) [][]byte {
	tb.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	setRcvbuf(tb, c, 32<<20)
	out := Softflowd(tb, capture, c.LocalAddr().String(), version, args...)
	// softflowd has exited and says how many datagrams it sent: drainUDP
	// waits for those, then takes any more the queue holds.
	return drainUDP(tb, c, SoftflowdSent(tb, out))
}

// setRcvbuf sets c's receive buffer to n bytes: SO_RCVBUFFORCE where the
// process may (CAP_NET_ADMIN), else SO_RCVBUF within net.core.rmem_max.
func setRcvbuf(tb testing.TB, c *net.UDPConn, n int) {
	tb.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		tb.Fatal(err)
	}
	var serr error
	rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, n)
		if serr != nil {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
		}
	})
	if serr != nil {
		tb.Fatalf("set the receive buffer: %v", os.NewSyscallError("setsockopt", serr))
	}
}

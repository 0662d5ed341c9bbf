package testexporter

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"

	"golang.org/x/sys/unix"
)

// pmacct's daemons fork a process per plugin. The helpers below start
// each in a session of its own (setsid), so that the test can find and
// stop every process of it, and kill the group when the test ends.

// startGroup starts cmd in a new session and arranges for its whole
// process group to be killed when tb ends. It returns a channel closed
// when cmd (the group leader) exits.
func startGroup(tb testing.TB, cmd *exec.Cmd, name string) <-chan struct{} {
	tb.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	pgid := cmd.Process.Pid
	tb.Cleanup(func() {
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	})
	return exited
}

// groupGone reports whether no process of process group pgid is left.
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// lookPmacct finds a pmacct daemon, or skips tb.
func lookPmacct(tb testing.TB, name string) string {
	tb.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		testutil.SkipOrFail(tb, "%s is not installed (Debian package pmacct): %v", name, err)
	}
	return bin
}

// writeConfig writes a pmacct configuration of key: value lines.
func writeConfig(tb testing.TB, dir string, lines ...string) string {
	tb.Helper()
	path := filepath.Join(dir, "pmacct.conf")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Sfprobe runs pmacctd's sfprobe plugin over a capture file: it samples
// every packet of it (sampling_rate: 1) and sends sFlow v5 datagrams to
// dest (UDP), with agent as the datagrams' agent address and subAgent as
// their sub-agent ID, then exits. It skips tb when pmacctd is missing.
func Sfprobe(tb testing.TB, capture, dest string, agent netip.Addr, subAgent uint32) {
	tb.Helper()
	SfprobeTo(tb, capture, []string{dest}, agent, subAgent)
}

// SfprobeTo is Sfprobe with an sfprobe plugin for each of dests, all in
// the one pmacctd: each plugin samples every packet of the one pass over
// the capture, and sends its datagrams to its destination. pmacctd sleeps
// 2 s before it reads a capture file and 2 s after: a test that feeds
// several receivers the same capture waits for that once.
func SfprobeTo(tb testing.TB, capture string, dests []string, agent netip.Addr, subAgent uint32) {
	tb.Helper()
	bin := lookPmacct(tb, "pmacctd")
	abs, err := filepath.Abs(capture)
	if err != nil {
		tb.Fatal(err)
	}
	conf := []string{
		"daemonize: false",
		"pcap_savefile: " + abs,
		"sampling_rate: 1",
		"sfprobe_agentip: " + agent.String(),
		"sfprobe_agentsubid: " + strconv.FormatUint(uint64(subAgent), 10),
	}
	switch len(dests) {
	case 0:
		tb.Fatal("sfprobe: no destination")
	case 1:
		conf = append(conf, "plugins: sfprobe", "sfprobe_receiver: "+dests[0])
	default:
		// A plugin per destination, named d0, d1, ...
		var plugins []string
		for i, d := range dests {
			plugins = append(plugins, fmt.Sprintf("sfprobe[d%d]", i))
			conf = append(conf, fmt.Sprintf("sfprobe_receiver[d%d]: %s", i, d))
		}
		conf = append(conf, "plugins: "+strings.Join(plugins, ", "))
	}
	cmd := exec.Command(bin, "-f", writeConfig(tb, tb.TempDir(), conf...))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	exited := startGroup(tb, cmd, "pmacctd")
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		tb.Fatalf("pmacctd did not finish the capture within 60 s:\n%s", out.String())
	}
	if !cmd.ProcessState.Success() && !sfprobeFinished(cmd.ProcessState.ExitCode(), out.String(), len(dests)) {
		tb.Fatalf("pmacctd: %v\n%s", cmd.ProcessState, out.String())
	}
	// Its plugin processes send the last datagrams: wait for them too.
	deadline := time.Now().Add(10 * time.Second)
	for !groupGone(cmd.Process.Pid) {
		if time.Now().After(deadline) {
			tb.Fatalf("pmacctd's sfprobe plugins did not exit within 10 s of its core:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sfprobeFinished reports whether pmacctd, which exited with code, had read
// the whole capture and stopped its plugins, nplugins of them, although
// it exited 1. At the end of a capture file pmacctd 1.7.7 interrupts its
// plugins (each says "Shutting down on user request") and waits for one of
// them to exit; when its SIGCHLD handler reaps the last one first, the
// handler says "no more plugins active" and exits 1. That is a race in
// pmacctd's shutdown, and the run complete: what the plugins sent the
// caller checks.
func sfprobeFinished(code int, out string, nplugins int) bool {
	return code == 1 && strings.Count(out, "Shutting down on user request.") == nplugins &&
		strings.Contains(out, "no more plugins active. Shutting down.")
}

// CaptureSfprobe runs Sfprobe into a UDP socket of the test's own on
// loopback and returns the datagrams it sent, in order.
func CaptureSfprobe(tb testing.TB, capture string, agent netip.Addr, subAgent uint32) [][]byte {
	tb.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	setRcvbuf(tb, c, 32<<20)
	Sfprobe(tb, capture, c.LocalAddr().String(), agent, subAgent)
	return drainUDP(tb, c, -1)
}

// drainUDP reads the datagrams a sender that has exited sent to c: the
// first want of them waiting for each (up to a minute: on a loaded
// machine the kernel may queue loopback datagrams after the send call
// returned, from ksoftirqd), when want is known (not -1), then every one
// left in the queue, without waiting (MSG_DONTWAIT) until it is empty (a
// short read deadline instead stopped early when the goroutine was held
// off the CPU past the deadline between setting it and reading: 635 of
// about 1,500 datagrams under -race on a loaded machine). A datagram the
// kernel dropped fails tb.
func drainUDP(tb testing.TB, c *net.UDPConn, want int) [][]byte {
	tb.Helper()
	var msgs [][]byte
	buf := make([]byte, 65536)
	if want > 0 {
		c.SetReadDeadline(time.Now().Add(time.Minute))
		for len(msgs) < want {
			n, err := c.Read(buf)
			if err != nil {
				tb.Fatalf("read %d of the %d datagrams sent: %v", len(msgs), want, err)
			}
			msgs = append(msgs, append([]byte(nil), buf[:n]...))
		}
		c.SetReadDeadline(time.Time{})
	}
	rc, err := c.SyscallConn()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
			return true
		}); err != nil {
			tb.Fatal(err)
		}
		if errors.Is(rerr, unix.EAGAIN) {
			break
		}
		if rerr != nil {
			tb.Fatal(rerr)
		}
		msgs = append(msgs, append([]byte(nil), buf[:n]...))
	}
	if q, ok := testutil.UDPSocket(c.LocalAddr().(*net.UDPAddr).Port); ok && q.Drops != 0 {
		tb.Fatalf("the kernel dropped %d datagrams", q.Drops)
	}
	return msgs
}

// Sfacctd is a running sfacctd, pmacct's sFlow collector, with its print
// plugin aggregating by source address (aggregate: src_host).
type Sfacctd struct {
	// Addr is its UDP address, 127.0.0.1:PORT.
	Addr string

	out    string // the print plugin's CSV file
	port   int
	cmd    *exec.Cmd
	log    bytes.Buffer
	exited <-chan struct{}
}

// StartSfacctd starts sfacctd on a free UDP port of 127.0.0.1 in a
// session of its own, and kills its process group when tb ends. It skips
// tb when sfacctd is missing.
func StartSfacctd(tb testing.TB) *Sfacctd {
	tb.Helper()
	bin := lookPmacct(tb, "sfacctd")
	dir := tb.TempDir()
	for attempt := 0; attempt < 5; attempt++ {
		s := &Sfacctd{port: testutil.FreeUDPPort(tb), out: filepath.Join(dir, fmt.Sprintf("sources-%d.csv", attempt))}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		conf := writeConfig(tb, dir,
			"daemonize: false",
			"sfacctd_ip: 127.0.0.1",
			"sfacctd_port: "+strconv.Itoa(s.port),
			"sfacctd_renormalize: false",
			// sfprobe sends a testdata capture's 250 datagrams within
			// 100 ms, about 1 MiB of socket memory, more than the
			// default buffer holds while sfacctd waits for a CPU (other
			// tests run at once): ask for 32 MiB, as collect does; Linux
			// grants up to twice net.core.rmem_max.
			"sfacctd_pipe_size: 33554432",
			"plugins: print",
			"aggregate: src_host",
			"print_output: csv",
			"print_output_file: "+s.out,
			"print_output_file_append: true",
			// No purge but the last, at exit: one file, every source.
			"print_refresh_time: 3600",
		)
		s.cmd = exec.Command(bin, "-f", conf)
		s.cmd.Stdout, s.cmd.Stderr = &s.log, &s.log
		s.exited = startGroup(tb, s.cmd, "sfacctd")
		if testutil.WaitUDPBound(s.port, s.exited, 10*time.Second) {
			return s
		}
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
	tb.Fatalf("sfacctd did not bind a UDP port in 5 attempts")
	return nil
}

// Sources waits until sfacctd has read every datagram sent to it, stops
// it (SIGINT to its core process, which has the print plugin write its
// cache and exit; SIGTERM does not) and returns the source addresses it
// aggregated.
func (s *Sfacctd) Sources(tb testing.TB) []netip.Addr {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for empty := 0; empty < 2; {
		q, ok := testutil.UDPSocket(s.port)
		if !ok {
			tb.Fatalf("sfacctd's socket is gone:\n%s", s.log.String())
		}
		if q.Drops != 0 {
			tb.Fatalf("the kernel dropped %d datagrams of sfacctd's", q.Drops)
		}
		if q.RX == 0 {
			empty++
		} else {
			empty = 0
		}
		if time.Now().After(deadline) {
			tb.Fatalf("sfacctd has not read its socket's %d bytes after 10 s", q.RX)
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.cmd.Process.Signal(syscall.SIGINT)
	deadline = time.Now().Add(20 * time.Second)
	for !groupGone(s.cmd.Process.Pid) {
		if time.Now().After(deadline) {
			tb.Fatalf("sfacctd did not exit within 20 s of SIGINT")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f, err := os.Open(s.out)
	if err != nil {
		tb.Fatalf("sfacctd wrote no sources: %v", err)
	}
	defer f.Close()
	var srcs []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		field, _, _ := strings.Cut(sc.Text(), ",")
		if field == "SRC_IP" || field == "" {
			continue
		}
		a, err := netip.ParseAddr(field)
		if err != nil {
			tb.Fatalf("sfacctd's output %q: %v", sc.Text(), err)
		}
		srcs = append(srcs, a)
	}
	return srcs
}

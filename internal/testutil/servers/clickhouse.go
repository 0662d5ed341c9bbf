package servers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// ClickHouse user of every server StartClickHouse runs, besides the
// password-less "default": a test of HTTP authentication logs in with it.
const (
	ClickHouseUser     = "flowdedup"
	ClickHousePassword = "flowdedup-test"
)

// ClickHouseTimezone is the time zone StartClickHouse gives its servers. It
// is not UTC, and not a whole hour from it, so that a client that lets the
// server read or print a DateTime in the server's zone is caught.
const ClickHouseTimezone = "Asia/Kolkata"

// ClickHouse is a clickhouse-server (Debian's package, 18.16) that a test
// started: an unprivileged process serving the HTTP interface alone on a
// loopback port, with its configuration, data and logs in a temporary
// directory removed when the test ends. Stop and Start stop it and start it
// again on the same port and data, as a server that goes down and comes
// back.
type ClickHouse struct {
	// Addr is the HTTP interface's address, 127.0.0.1:PORT; URL is
	// http://Addr/. Both stay the same across Stop and Start.
	Addr string
	URL  string
	// Dir holds config.xml, users.xml, and the data/, tmp/ and log/
	// directories.
	Dir string

	bin     string
	cred    *syscall.Credential // nil: run as the test process's user
	cmd     *exec.Cmd
	out     bytes.Buffer // stdout and stderr of the current process, read after it exits
	exited  chan struct{}
	waitErr error
}

// StartClickHouse starts clickhouse-server on a free port of 127.0.0.1 and
// stops it when tb ends. It skips tb (see SkipOrFail) when the server is
// not installed (Debian: apt-get install clickhouse-server).
//
// Run as root, the server runs as the user nobody (Credential of
// SysProcAttr), with its directory given to that user: ClickHouse needs no
// privilege, and a server that could write anywhere has no place in a test.
// The directory is made by os.MkdirTemp in the system's temporary directory,
// not by tb.TempDir, whose parent directory only root may enter.
//
// The configuration keeps startup short and the footprint small: no native
// TCP, interserver or HTTPS port, no query, part or text log tables, no
// graphite, dictionaries or remote servers, 64 MiB caches.
func StartClickHouse(tb testing.TB) *ClickHouse {
	tb.Helper()
	bin := ""
	for _, name := range []string{"clickhouse-server", "clickhouse"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		for _, p := range []string{"/usr/sbin/clickhouse-server", "/usr/bin/clickhouse"} {
			if _, err := os.Stat(p); err == nil {
				bin = p
				break
			}
		}
	}
	if bin == "" {
		testutil.SkipOrFail(tb, "clickhouse-server is not installed (Debian package clickhouse-server)")
	}
	dir, err := os.MkdirTemp("", "flowdedup-clickhouse-")
	if err != nil {
		tb.Fatalf("clickhouse: temporary directory: %v", err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	c := &ClickHouse{Dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		uid, gid := uint32(65534), uint32(65534)
		if u, err := user.Lookup("nobody"); err == nil {
			if n, err := strconv.ParseUint(u.Uid, 10, 32); err == nil {
				uid = uint32(n)
			}
			if n, err := strconv.ParseUint(u.Gid, 10, 32); err == nil {
				gid = uint32(n)
			}
		}
		c.cred = &syscall.Credential{Uid: uid, Gid: gid} // and no supplementary groups
	}
	for _, sub := range []string{"data", "tmp", "log", "user_files", "format_schemas"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			tb.Fatalf("clickhouse: %v", err)
		}
	}
	// The server claims its port when it starts, and a free port cannot be
	// reserved for another process: take one the kernel hands out, and try
	// another in the rare case some other process took it first.
	var lastOut string
	for attempt := 0; attempt < 5; attempt++ {
		port := freeTCPPort(tb)
		c.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		c.URL = "http://" + c.Addr + "/"
		c.writeConfig(tb, port)
		err := c.start(30 * time.Second)
		if err == nil {
			tb.Cleanup(c.kill)
			return c
		}
		lastOut = err.Error()
		if !strings.Contains(lastOut, "Address already in use") {
			break
		}
	}
	tb.Fatalf("clickhouse-server did not start:\n%s", lastOut)
	return nil
}

func freeTCPPort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("find a free TCP port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (c *ClickHouse) writeConfig(tb testing.TB, port int) {
	tb.Helper()
	config := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>%[1]s/log/server.log</log>
    <errorlog>%[1]s/log/server.err.log</errorlog>
    <console>0</console>
  </logger>
  <http_port>%[2]d</http_port>
  <listen_host>127.0.0.1</listen_host>
  <path>%[1]s/data/</path>
  <tmp_path>%[1]s/tmp/</tmp_path>
  <user_files_path>%[1]s/user_files/</user_files_path>
  <format_schema_path>%[1]s/format_schemas/</format_schema_path>
  <users_config>%[1]s/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>%[3]s</timezone>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <mlock_executable>false</mlock_executable>
  <max_concurrent_queries>50</max_concurrent_queries>
  <keep_alive_timeout>1</keep_alive_timeout>
</yandex>
`, c.Dir, port, ClickHouseTimezone)
	users := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
  <profiles><default><log_queries>0</log_queries></default></profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
    <%[1]s>
      <password>%[2]s</password>
      <networks><ip>127.0.0.1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </%[1]s>
  </users>
  <quotas><default></default></quotas>
</yandex>
`, ClickHouseUser, ClickHousePassword)
	for name, text := range map[string]string{"config.xml": config, "users.xml": users} {
		if err := os.WriteFile(filepath.Join(c.Dir, name), []byte(text), 0o600); err != nil {
			tb.Fatalf("clickhouse: %v", err)
		}
	}
	if c.cred != nil {
		err := filepath.WalkDir(c.Dir, func(p string, _ os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, int(c.cred.Uid), int(c.cred.Gid))
		})
		if err != nil {
			tb.Fatalf("clickhouse: give %s to uid %d: %v", c.Dir, c.cred.Uid, err)
		}
	}
}

// start runs the server and waits until /ping answers, the process exits,
// or limit passes; on failure the server is stopped and the error holds its
// output and error log.
func (c *ClickHouse) start(limit time.Duration) error {
	c.out.Reset()
	c.exited = make(chan struct{})
	c.cmd = exec.Command(c.bin, "--config-file="+filepath.Join(c.Dir, "config.xml"))
	c.cmd.Dir = c.Dir
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	// No Pdeathsig: it fires when the OS thread that started the child
	// exits, which the Go runtime does to threads a goroutine locked and
	// did not unlock (the netns tests do), and would kill the server in
	// the middle of a test.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if err := c.cmd.Start(); err != nil {
		close(c.exited)
		return fmt.Errorf("start %s: %v", c.bin, err)
	}
	exited := c.exited
	go func() {
		c.waitErr = c.cmd.Wait()
		close(exited)
	}()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(limit)
	for {
		if c.pingOK(client) {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("clickhouse-server exited (%v): %s%s", c.waitErr, c.out.String(), c.errLog())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.kill()
			return fmt.Errorf("clickhouse-server did not answer /ping within %v: %s%s", limit, c.out.String(), c.errLog())
		}
	}
}

func (c *ClickHouse) pingOK(client *http.Client) bool {
	resp, err := client.Get(c.URL + "ping")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
	return resp.StatusCode == http.StatusOK && string(b) == "Ok.\n"
}

// errLog returns the tail of the server's error log.
func (c *ClickHouse) errLog() string {
	b, err := os.ReadFile(filepath.Join(c.Dir, "log", "server.err.log"))
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return "\nerror log:\n" + string(b)
}

// Running reports whether the server process is running.
func (c *ClickHouse) Running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 30 s) and waits until
// it has exited and its port is closed.
func (c *ClickHouse) Stop(tb testing.TB) {
	tb.Helper()
	if !c.Running() {
		tb.Fatalf("clickhouse: Stop of a server that is not running (%v): %s%s", c.waitErr, c.out.String(), c.errLog())
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		c.kill()
		tb.Fatalf("clickhouse-server did not exit within 30 s of SIGTERM")
	}
}

// Start starts the stopped server again, on the same port, configuration
// and data, and waits until it answers.
func (c *ClickHouse) Start(tb testing.TB) {
	tb.Helper()
	if c.Running() {
		tb.Fatalf("clickhouse: Start of a server that is running")
	}
	if err := c.start(30 * time.Second); err != nil {
		tb.Fatalf("clickhouse: start again on %s: %v", c.Addr, err)
	}
}

func (c *ClickHouse) kill() {
	if c.cmd == nil || c.cmd.Process == nil || !c.Running() {
		return
	}
	c.cmd.Process.Kill()
	<-c.exited
}

// Query runs one SQL statement as the default user and returns the
// server's answer; an error answer fails tb. Give SELECTs a FORMAT clause
// (TabSeparated is the default) that suits the comparison.
func (c *ClickHouse) Query(tb testing.TB, sql string) string {
	tb.Helper()
	out, err := c.TryQuery(sql)
	if err != nil {
		tb.Fatalf("clickhouse: %s: %v", sql, err)
	}
	return out
}

// queryClient opens a connection per query: the server's shutdown waits
// for the connections its clients keep open.
var queryClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// TryQuery is Query that returns the error instead of failing a test.
func (c *ClickHouse) TryQuery(sql string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := c.URL + "?" + url.Values{"wait_end_of_query": {"1"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(sql))
	if err != nil {
		return "", err
	}
	resp, err := queryClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return string(b), nil
}

// CPUTime returns the CPU time (user and system) the running server has
// used so far, read from /proc, for benchmarks that say how much of a run's
// cost is the server's.
func (c *ClickHouse) CPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		tb.Fatalf("clickhouse-server CPU time: %v", err)
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14 and stime 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("clickhouse-server CPU time: %q", b)
	}
	const ticks = 100 // USER_HZ, 100 on every Linux architecture Go supports
	return time.Duration(utime+stime) * time.Second / ticks
}

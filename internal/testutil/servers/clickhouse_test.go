package servers

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The server answers, runs unprivileged, keeps its data and port across
// Stop and Start, and is unreachable while stopped.
func TestStartClickHouse(t *testing.T) {
	c := StartClickHouse(t)
	if got := c.Query(t, "SELECT timezone()"); got != ClickHouseTimezone+"\n" {
		t.Errorf("time zone %q, want %s", got, ClickHouseTimezone)
	}
	if os.Geteuid() == 0 {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(status)) {
			if f := strings.Fields(line); len(f) == 5 && f[0] == "Uid:" && (f[1] == "0" || f[2] == "0") {
				t.Errorf("clickhouse-server runs as root: %s", line)
			}
		}
	}
	c.Query(t, "CREATE TABLE default.kept (a UInt8) ENGINE = MergeTree ORDER BY a")
	c.Query(t, "INSERT INTO default.kept VALUES (1), (2)")
	addr := c.Addr
	c.Stop(t)
	if _, err := c.TryQuery("SELECT 1"); err == nil {
		t.Fatal("a stopped server answered")
	}
	c.Start(t)
	if c.Addr != addr {
		t.Errorf("address %s after Start, was %s", c.Addr, addr)
	}
	if got := c.Query(t, "SELECT sum(a) FROM default.kept"); got != "3\n" {
		t.Errorf("after Stop and Start: sum %q, want 3", got)
	}
}

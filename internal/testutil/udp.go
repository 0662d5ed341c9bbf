package testutil

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FreeUDPPort returns a UDP port of 127.0.0.1 that was free a moment ago.
func FreeUDPPort(tb testing.TB) int {
	tb.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatalf("find a free UDP port: %v", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// UDPQueue is a UDP socket's line of /proc/net/udp.
type UDPQueue struct {
	RX    uint64 // bytes waiting to be read
	Drops uint64
}

// UDPSocket finds the socket bound to 127.0.0.1:port in /proc/net/udp.
func UDPSocket(port int) (UDPQueue, bool) {
	f, err := os.Open("/proc/net/udp")
	if err != nil {
		return UDPQueue{}, false
	}
	defer f.Close()
	local := fmt.Sprintf("0100007F:%04X", port)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local rem st tx_queue:rx_queue tr:tm retrnsmt uid timeout inode ref pointer drops
		fs := strings.Fields(sc.Text())
		if len(fs) < 13 || fs[1] != local {
			continue
		}
		_, rx, _ := strings.Cut(fs[4], ":")
		var q UDPQueue
		q.RX, _ = strconv.ParseUint(rx, 16, 64)
		q.Drops, _ = strconv.ParseUint(fs[12], 10, 64)
		return q, true
	}
	return UDPQueue{}, false
}

// WaitUDPBound waits until a socket is bound to 127.0.0.1:port, as WaitFor
// waits, and reports whether one is: false when exited (the process that
// was to bind it) is closed first, or limit passes.
func WaitUDPBound(port int, exited <-chan struct{}, limit time.Duration) bool {
	bound := false
	WaitUntil(limit, func() bool {
		if _, bound = UDPSocket(port); bound {
			return true
		}
		select {
		case <-exited:
			return true
		default:
			return false
		}
	})
	return bound
}

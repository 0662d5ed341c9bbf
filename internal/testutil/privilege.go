package testutil

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// RequirePrivilegedEnv names the environment variable that turns the skips of
// this package into failures.
const RequirePrivilegedEnv = "FLOWDEDUP_REQUIRE_PRIVILEGED"

// Capabilities the privileged tests use, numbered as in linux/capability.h.
const (
	CapNetAdmin = 12
	CapNetRaw   = 13
	CapSysAdmin = 21
)

// SkipOrFail skips tb with the reason, or fails it when
// FLOWDEDUP_REQUIRE_PRIVILEGED is set.
func SkipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	reason := fmt.Sprintf(format, args...)
	if os.Getenv(RequirePrivilegedEnv) != "" {
		tb.Fatalf("%s (and %s is set, so this is a failure, not a skip)", reason, RequirePrivilegedEnv)
	}
	tb.Skip(reason)
}

// RequireRoot skips tb unless the process runs as root with CAP_NET_ADMIN,
// CAP_NET_RAW and CAP_SYS_ADMIN in its effective set (a container may run
// as uid 0 without them).
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(tb, "test needs root (uid %d): it opens AF_PACKET sockets and makes network namespaces", os.Geteuid())
	}
	eff, err := effectiveCaps()
	if err != nil {
		SkipOrFail(tb, "test needs root capabilities, and reading them failed: %v", err)
	}
	for _, c := range []struct {
		bit  uint
		name string
	}{{CapNetAdmin, "CAP_NET_ADMIN"}, {CapNetRaw, "CAP_NET_RAW"}, {CapSysAdmin, "CAP_SYS_ADMIN"}} {
		if eff&(1<<c.bit) == 0 {
			SkipOrFail(tb, "test needs %s, which this root process does not have (CapEff %#x)", c.name, eff)
		}
	}
}

// effectiveCaps reads the effective capability set of the calling thread
// (capabilities are per thread; /proc/self would show the main thread's).
func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/thread-self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no CapEff line in /proc/self/status")
}

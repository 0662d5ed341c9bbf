package cli

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// tsharkAddrs returns the outermost source and destination addresses of
// every frame of file that has an IP header, by tshark's own dissection.
// tshark reads each file once per test binary: its start (loading every
// dissector) costs more than the dissection, and the tests ask for the
// same files again and again.
func tsharkAddrs(t *testing.T, file string) [][2]netip.Addr {
	t.Helper()
	return tsharkAddrCache.get(file, func() [][2]netip.Addr { return runTsharkAddrs(t, file) })
}

var tsharkAddrCache fileCache[[][2]netip.Addr]

func runTsharkAddrs(t *testing.T, file string) [][2]netip.Addr {
	t.Helper()
	out, err := exec.Command("tshark", "-r", file, "-Y", "ip.src or ipv6.src", "-T", "fields",
		"-e", "ip.src", "-e", "ipv6.src", "-e", "ip.dst", "-e", "ipv6.dst").Output()
	if err != nil {
		t.Fatalf("tshark -r %s: %v", file, err)
	}
	var addrs [][2]netip.Addr
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(f) != 4 {
			t.Fatalf("tshark line %q", line)
		}
		// Each column holds the outermost header's value first when a
		// frame has several (tunnels); the generator writes none, but be
		// exact.
		src, err1 := netip.ParseAddr(first(f[0] + f[1]))
		dst, err2 := netip.ParseAddr(first(f[2] + f[3]))
		if err1 != nil || err2 != nil {
			t.Fatalf("tshark line %q: %v, %v", line, err1, err2)
		}
		addrs = append(addrs, [2]netip.Addr{src, dst})
	}
	return addrs
}

// fileCache holds a value computed once per file and test binary (a
// tshark reading), for tests that run in parallel: each file has a lock
// of its own, so that two files are read at once, and a second test
// asking for a file being read waits for that reading. A computation that
// fails its test (t.Fatal) leaves nothing, and the next test computes
// again. The values are shared: callers do not modify them.
type fileCache[V any] struct {
	mu sync.Mutex
	m  map[string]*fileCacheEntry[V]
}

type fileCacheEntry[V any] struct {
	mu   sync.Mutex
	done bool
	v    V
}

func (c *fileCache[V]) get(file string, compute func() V) V {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*fileCacheEntry[V]{}
	}
	e := c.m[file]
	if e == nil {
		e = &fileCacheEntry[V]{}
		c.m[file] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.done {
		e.v = compute()
		e.done = true
	}
	return e.v
}

// networks is the set of networks, of bits4 (IPv4) or bits6 (IPv6) prefix
// length, that addrs fall in: the sources for kind src, the destinations
// for dst, both for pair, in CIDR text. The masking is net/netip's.
func networks(addrs [][2]netip.Addr, kind string, bits4, bits6 int) map[string]bool {
	network := func(a netip.Addr) string {
		bits := bits4
		if a.Is6() {
			bits = bits6
		}
		return netip.PrefixFrom(a, bits).Masked().String()
	}
	nets := map[string]bool{}
	for _, a := range addrs {
		switch kind {
		case "src":
			nets[network(a[0])] = true
		case "dst":
			nets[network(a[1])] = true
		default:
			nets[network(a[0])+" > "+network(a[1])] = true
		}
	}
	return nets
}

type prefixCase struct {
	kind   string
	prefix string
	b4, b6 int
}

// With --prefix, replay reports each network that the packets' addresses
// fall in exactly once, as CIDR text, and the networks are those of the
// addresses tshark finds, for every shipped capture: the common /24 and
// /64, lengths that cut a byte, and the extremes (/0, whole addresses).
func TestReplayPrefixMatchesTshark(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tshark"); err != nil {
		testutil.SkipOrFail(t, "tshark not installed (Debian package tshark; .ci/run installs it)")
	}
	cases := []prefixCase{
		{"src", "24,64", 24, 64},
		{"dst", "20,60", 20, 60},
		{"pair", "16,48", 16, 48},
		{"src", "32", 32, 128},
		{"src", "0,0", 0, 0},
	}
	for _, name := range testPcaps {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testPrefixMatchesTshark(t, pcapPath(name), cases)
		})
	}
}

// testPrefixMatchesTshark is TestReplayPrefixMatchesTshark on one capture.
func testPrefixMatchesTshark(t *testing.T, file string, cases []prefixCase) {
	addrs := tsharkAddrs(t, file)
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%s", c.kind, c.prefix), func(t *testing.T) {
			want := networks(addrs, c.kind, c.b4, c.b6)
			got := map[string]bool{}
			for _, r := range replayRecords(t, "--filter", "exact", "--key", c.kind, "--prefix", c.prefix, "--workers", "2", "--seed", "1", file) {
				src, _ := r["src"].(string)
				dst, _ := r["dst"].(string)
				k := src
				switch c.kind {
				case "dst":
					k = dst
				case "pair":
					k = src + " > " + dst
				}
				if got[k] {
					t.Errorf("network %s reported twice", k)
				}
				got[k] = true
			}
			if d := setDiff(got, want); d != "" {
				t.Errorf("replay --prefix %s and tshark disagree (%d vs %d networks):\n%s", c.prefix, len(got), len(want), d)
			}
		})
	}
}

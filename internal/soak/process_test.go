package soak

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// The soak tests are short by default, so that `go test ./...` and CI run
// them, and long with FLOWDEDUP_SOAK=long (the figures README gives) or
// with the flags below, which win over it:
//
//	FLOWDEDUP_SOAK=long go test -count=1 -timeout 60m -v ./internal/soak/
//	go test -count=1 -v ./internal/soak/ -args -soak.days=7 -soak.live=2m
var (
	flagDays = flag.Int("soak.days", 0, "days of packet time the replay soak streams (default 2; 30 with FLOWDEDUP_SOAK=long)")
	flagKeys = flag.Int("soak.keys", 0, "distinct keys per hour of the replay soak (default 100000)")
	flagGOGC = flag.Int("soak.gogc", 10, "GOGC of the flowdedup the replay soak runs (see TestReplaySoak)")
	flagLive = flag.Duration("soak.live", 0, "run the live soak for this long (at least 5m; 10m with FLOWDEDUP_SOAK=long; default: not run)")
)

// longEnv is the environment variable that selects the long soak.
const longEnv = "FLOWDEDUP_SOAK"

func long() bool { return os.Getenv(longEnv) == "long" }

// pick returns the flag's value when it was given, else the long or the
// short default.
func pick[T comparable](flagValue, short, longValue T) T {
	var zero T
	switch {
	case flagValue != zero:
		return flagValue
	case long():
		return longValue
	}
	return short
}

// buildFlowdedup returns the flowdedup command: the soak runs it as a
// process, as a router would, so its RSS is the process's own.
func buildFlowdedup(t *testing.T) string { return testutil.Flowdedup(t) }

func TestMain(m *testing.M) { testutil.Main(m) }

// procStatus returns a field of /proc/PID/status in bytes (VmRSS, VmHWM:
// the kernel writes them in kB).
func procStatus(pid int, field string) (uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// cpuTicks returns the CPU time process pid has used, user and system, in
// clock ticks (fields 14 and 15 of /proc/PID/stat).
func cpuTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest) // f[0] is field 3
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q %q", pid, f[11], f[12])
	}
	return utime + stime, nil
}

// waitIdle waits until process pid has used no CPU for quiet (it has read
// all its input and waits for more), or fails t after limit.
func waitIdle(t *testing.T, pid int, quiet, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	last, err := cpuTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	for {
		time.Sleep(quiet)
		now, err := cpuTicks(pid)
		if err != nil {
			t.Fatal(err)
		}
		if now == last {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("flowdedup still busy %v after its input paused (%d ticks in the last %v)", limit, now-last, quiet)
		}
		last = now
	}
}

// metrics is one scrape of a Prometheus text endpoint: each metric name's
// value, summed over its label sets.
type metrics map[string]float64

// scrape reads the metrics at url with client.
func scrape(ctx context.Context, client *http.Client, url string) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// scrapeSteady scrapes url n times and returns the first scrape with
// go_goroutines replaced by its least value. A scrape counts goroutines of
// its own: client_golang's Registry.Gather starts a collector worker, then
// a goroutine that waits for the workers, then up to two more workers (one
// per collector: the pipeline's, the Go runtime's and the process's) as
// the scheduler lets them run, and the Go collector reads the count while
// it runs in one of the workers: 1 to 4 goroutines that are the scrape's.
// The least of several scrapes is most often the process's own plus 2.
func scrapeSteady(client *http.Client, url string, n int) (metrics, error) {
	var first metrics
	for i := range n {
		m, err := scrape(context.Background(), client, url)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			first = m
		}
		first["go_goroutines"] = min(first["go_goroutines"], m["go_goroutines"])
	}
	return first, nil
}

// goroutinesFlat reports whether a series of go_goroutines samples
// (scrapeSteady's) is flat: within 3 of each other, the range of the
// scrape's own goroutines (1 to 4). A goroutine left behind per window,
// per connection or per day grows the count past that within a few of
// them; the soaks run hundreds (replay) or tens (live) of windows.
func goroutinesFlat(g []float64) error {
	if len(g) == 0 {
		return fmt.Errorf("no samples")
	}
	if lo, hi := slices.Min(g), slices.Max(g); hi-lo > 3 {
		return fmt.Errorf("from %v to %v: want at most 3 apart (the scrape's own goroutines)", lo, hi)
	}
	return nil
}

// parseMetrics reads the Prometheus text format (version 0.0.4): lines
// "name value" or "name{labels} value", comments after '#'.
func parseMetrics(r io.Reader) (metrics, error) {
	m := metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			return nil, fmt.Errorf("metrics line %q: no value", line)
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %v", line, err)
		}
		name := line[:sp]
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		m[name] += v
	}
	return m, sc.Err()
}

// metricsURL waits for the line in which flowdedup says where its --metrics
// server listens ("flowdedup: metrics on http://ADDR/metrics") and returns
// the URL.
func metricsURL(t *testing.T, p *testutil.Process, limit time.Duration) string {
	t.Helper()
	const said = "flowdedup: metrics on "
	line := p.WaitLine(t, said, limit)
	return line[strings.Index(line, said)+len(said):]
}

// mib formats bytes in MiB, for the logs.
func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

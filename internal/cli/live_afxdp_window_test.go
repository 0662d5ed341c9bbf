//go:build linux && !(mips || mips64 || ppc64 || s390x)

package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// The prefilter of --mode afxdp is on by default, with the run's key and
// window; the default gives way to --decap and --prefix, which the
// prefilter does not do, and --afxdp-prefilter=false turns it off.
func TestAFXDPPrefilterDefault(t *testing.T) {
	mask, err := flow.ParseMask("24")
	if err != nil {
		t.Fatal(err)
	}
	on := afxdpFlags{prefilter: true} // the flag's default, not given
	for _, tc := range []struct {
		name string
		cfg  CaptureConfig
		af   afxdpFlags
		want bool // a prefilter
	}{
		{"default", CaptureConfig{Key: flow.KeyPair}, on, true},
		{"default with --window", CaptureConfig{Key: flow.KeySrc, Window: time.Second}, on, true},
		{"given with --window", CaptureConfig{Key: flow.Key5Tuple, Window: time.Minute}, afxdpFlags{prefilter: true, prefilterSet: true}, true},
		{"default with --decap", CaptureConfig{Key: flow.KeySrc, Decap: flow.Decap{Tunnels: flow.TunnelsAll}}, on, false},
		{"default with --prefix", CaptureConfig{Key: flow.KeySrc, Prefix: mask}, on, false},
		{"=false", CaptureConfig{Key: flow.KeySrc, Window: time.Second}, afxdpFlags{prefilter: false, prefilterSet: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pf, err := afxdpPrefilter(&tc.cfg, tc.af)
			if err != nil {
				t.Fatalf("afxdpPrefilter: %v", err)
			}
			if (pf != nil) != tc.want {
				t.Fatalf("prefilter %+v, want one: %v", pf, tc.want)
			}
			if pf != nil && (pf.Kind != tc.cfg.Key || pf.Window != tc.cfg.Window) {
				t.Errorf("prefilter of key %v, window %v; want %v, %v", pf.Kind, pf.Window, tc.cfg.Key, tc.cfg.Window)
			}
		})
	}
}

// --mode afxdp with its default prefilter and 1-second windows, end to end:
// a testdata capture tcpreplay'd 15 times faster than it was taken, so that
// its 2000 frames spread over 4 seconds, and so over 4 windows or more.
// Every window adds up and has as many records as distinct pairs, none
// dropped or late; the windows together count every frame; each pair of an
// exact replay is reported in some window, and no other; and some frames
// were kept in the kernel. (That each window gets exactly its own frames,
// as a replay of them at the kernel's times does, TestAFXDPPrefilterWindows
// of capture/afxdp checks frame by frame.)
func TestRunLiveAFXDPPrefilterWindows(t *testing.T) {
	ns := liveNamespace(t)
	bin := buildBinary(t)
	for _, name := range []string{"small.pcap", "ipv6.pcap"} {
		t.Run(name, func(t *testing.T) {
			file := pcapPath(name)
			want := map[string]bool{}
			for _, r := range replayRecords(t, "--filter", "exact", "--key", "pair", file) {
				want[r["src"].(string)+" > "+r["dst"].(string)] = true
			}
			lr := startLive(t, ns, bin, "--mode", "afxdp", "--key", "pair", "--filter", "exact", "--workers", "2", "--window", "1s", "--lateness", "1s")
			// --timer=nano: tcpreplay's default timer (gtod) spins on
			// the clock between frames, a core's worth of CPU for the
			// 4 seconds; nanosleep keeps the spread at a few percent
			// of a core, and windows of 1 s need no finer pacing.
			cmd := exec.Command("ip", "netns", "exec", ns.Name, "taskset", "-c", "0", "tcpreplay", "-q", "--timer=nano", "-i", ns.Veth[1], "--multiplier", "15", file)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("tcpreplay: %v\n%s", err, b)
			}
			// The windows close on the wall clock, a lateness after
			// their end: wait until they have counted every frame.
			testutil.WaitFor(t, "summaries of 2000 packets", time.Minute, func() bool {
				var n uint64
				for _, s := range afxdpSummaries(t, lr.summary) {
					n += s.Packets
				}
				return n >= 2000
			})
			lr.stop(t, syscall.SIGINT)
			if !strings.Contains(lr.Log(), "prefilter on") {
				t.Errorf("run does not say its prefilter is on:\n%s", lr.Log())
			}

			records := map[string]int{} // by window
			got := map[string]bool{}
			data, _ := os.ReadFile(lr.out)
			for line := range strings.Lines(string(data)) {
				var r map[string]any
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("record %q: %v", line, err)
				}
				got[r["src"].(string)+" > "+r["dst"].(string)] = true
				records[r["window"].(string)]++
			}
			if d := setDiff(got, want); d != "" || len(got) != len(want) {
				t.Errorf("afxdp with windows and exact replay disagree (%d vs %d pairs):\n%s\n%s", len(got), len(want), d, lr.Log())
			}
			var packets, prefiltered uint64
			windows := 0
			for _, s := range afxdpSummaries(t, lr.summary) {
				packets += s.Packets
				prefiltered += s.Prefiltered
				if s.Packets > 0 {
					windows++
				}
				if s.Packets != s.Malformed+s.Skipped+s.Keys+s.Dropped+s.Late || s.Dropped != 0 || s.Late != 0 ||
					s.Distinct != uint64(records[s.WindowStart]) || s.Prefiltered+s.Distinct > s.Keys {
					t.Errorf("window %s: summary %+v, %d records: want packets = malformed + skipped + keys, none dropped or late, distinct = records, prefiltered + distinct <= keys\n%s",
						s.WindowStart, s, records[s.WindowStart], lr.Log())
				}
			}
			if packets != 2000 || windows < 3 || prefiltered == 0 {
				t.Errorf("%d packets in %d windows, %d prefiltered: want 2000 in 3 windows or more, some prefiltered\n%s", packets, windows, prefiltered, lr.Log())
			}
		})
	}
}

// windowLine is the part of a summary line TestRunLiveAFXDPPrefilterWindows
// checks.
type windowLine struct {
	liveSummary
	WindowStart string `json:"window_start"`
	Late        uint64
}

// afxdpSummaries returns the window summaries written so far.
func afxdpSummaries(t *testing.T, path string) []windowLine {
	t.Helper()
	data, _ := os.ReadFile(path)
	var out []windowLine
	for line := range strings.Lines(string(data)) {
		if !strings.HasSuffix(line, "\n") || strings.HasPrefix(line, `{"run_totals":`) {
			continue // being written, or the totals
		}
		var s windowLine
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("summary %q: %v", line, err)
		}
		out = append(out, s)
	}
	return out
}

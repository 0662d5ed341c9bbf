package cli

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// tunnelCaptures are the good tunnel captures of scripts/mkdecap.py
// (scapy).
var tunnelCaptures = []string{"erspan", "gre", "vxlan", "geneve", "gtpu", "ipip", "nested"}

// mixedTunnelCapture writes one Ethernet capture of every frame of
// tunnelCaptures, then all of them again in reverse order, a second apart:
// each inner host comes twice, so the distinct count is half the frames'
// where the hosts are distinct.
func mixedTunnelCapture(t *testing.T) string {
	t.Helper()
	var frames [][]byte
	for _, name := range tunnelCaptures {
		src, err := pcapfile.Open(decapPcap(name))
		if err != nil {
			t.Fatal(err)
		}
		var p capture.Packet
		for {
			err := src.Next(&p)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			frames = append(frames, append([]byte(nil), p.Data...))
		}
		src.Close()
	}
	rev := slices.Clone(frames)
	slices.Reverse(rev)
	frames = append(frames, rev...)
	path := filepath.Join(t.TempDir(), "tunnels.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for i, fr := range frames {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(1700000000+int64(i), 0), CaptureLength: len(fr), Length: len(fr)}
		if err := w.WritePacket(ci, fr); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// evalDistinct runs eval's exact filter on stream with args and returns
// its JSON result, without the timing (ns_per_op), which differs from run
// to run.
func evalDistinct(t *testing.T, stream string, args ...string) map[string]any {
	t.Helper()
	code, out, errs := run(append([]string{"eval", "--filter", "exact", "--stream", stream, "--seed", "1", "--format", "json"}, args...)...)
	if code != ExitOK {
		t.Fatalf("eval %s %q: exit %d: %s", stream, args, code, errs)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("eval output %q: %v", out, err)
	}
	delete(r, "ns_per_op")
	return r
}

// TestEvalDecap: eval's pcap stream of a capture of tunnels counts, with
// --decap all,novni (or the spec's decap=), as many distinct sources as
// tshark finds innermost; with --decap none, or without it, as many as
// tshark finds outermost, and the same answer as before.
func TestEvalDecap(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tshark"); err != nil {
		testutil.SkipOrFail(t, "tshark not installed (Debian package tshark; .ci/run installs it)")
	}
	file := mixedTunnelCapture(t)
	inner, outer := tsharkSources(t, file)
	if len(inner) <= len(outer) {
		t.Fatalf("tshark: %d innermost sources, %d outermost: the capture shows no hosts inside", len(inner), len(outer))
	}
	stream := "pcap:" + file
	before := evalDistinct(t, stream)
	for _, c := range []struct {
		stream string
		args   []string
		want   int
		name   string
	}{
		{stream, []string{"--decap", "all,novni"}, len(inner), stream + ",key=src,decap=all,novni"},
		{stream + ",decap=all,novni", nil, len(inner), stream + ",key=src,decap=all,novni"},
		{stream + ",decap=all,novni", []string{"--decap", "gre"}, len(inner), stream + ",key=src,decap=all,novni"}, // the spec's own
		{stream, []string{"--decap", "none"}, len(outer), stream + ",key=src"},
		{stream, nil, len(outer), stream + ",key=src"},
	} {
		r := evalDistinct(t, c.stream, c.args...)
		if r["distinct"] != float64(c.want) || r["stream"] != c.name {
			t.Errorf("eval --stream %s %q: distinct %v, stream %v; want %d (tshark), %s", c.stream, c.args, r["distinct"], r["stream"], c.want, c.name)
		}
		if r["elements"] != before["elements"] {
			t.Errorf("eval --stream %s %q: %v elements, want %v: every frame is keyed", c.stream, c.args, r["elements"], before["elements"])
		}
		if c.want == len(outer) && !maps.Equal(r, before) {
			t.Errorf("eval --stream %s %q: %v, want the answer without --decap, %v", c.stream, c.args, r, before)
		}
	}
}

// TestTuneDecap: tune reads the keys of a capture of tunnels through them
// with --decap: the sample's distinct count is tshark's innermost sources
// (with novni, addresses only), and the replay command it prints names the
// --decap; without it, or with none, the outermost ones and the answer of
// before.
func TestTuneDecap(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tshark"); err != nil {
		testutil.SkipOrFail(t, "tshark not installed (Debian package tshark; .ci/run installs it)")
	}
	file := mixedTunnelCapture(t)
	inner, outer := tsharkSources(t, file)
	base := []string{"tune", "--mem", "8KiB", "--window", "0", "--workers", "1", "--seeds", "1", "--budget", "5m", "--format", "json"}
	tuneRun := func(args ...string) (distinct int, decap, text string) {
		t.Helper()
		code, out, errs := run(append(append(slices.Clone(base), args...), file)...)
		if code != ExitOK {
			t.Fatalf("tune %q: exit %d: %s", args, code, errs)
		}
		var r struct {
			Samples []struct{ Distinct int }
			Decap   *string
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Samples) != 1 {
			t.Fatalf("tune %q: output %q: %v", args, out, err)
		}
		if r.Decap != nil {
			decap = *r.Decap
		}
		code, text, errs = run(append(append(slices.Clone(base[:len(base)-2]), args...), file)...)
		if code != ExitOK {
			t.Fatalf("tune %q: exit %d: %s", args, code, errs)
		}
		return r.Samples[0].Distinct, decap, text
	}
	n, decap, text := tuneRun("--decap", "all,novni")
	if n != len(inner) || decap != "all,novni" || !strings.Contains(text, "flowdedup replay --key src --decap all,novni --window 0s") {
		t.Errorf("tune --decap all,novni: %d distinct, decap %q; want %d (tshark's innermost) and all,novni; text:\n%s", n, decap, len(inner), text)
	}
	for _, args := range [][]string{{"--decap", "none"}, nil} {
		n, decap, text := tuneRun(args...)
		if n != len(outer) || decap != "" || strings.Contains(text, "decap") {
			t.Errorf("tune %q: %d distinct, decap %q; want %d (tshark's outermost) and no decap; text:\n%s", args, n, decap, len(outer), text)
		}
	}
}

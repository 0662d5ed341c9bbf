//go:build linux && !(mips || mips64 || ppc64 || s390x)

package xdp

import (
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/netns"
)

// readFrames returns the Ethernet frames of a capture file.
func readFrames(t *testing.T, path string) [][]byte {
	t.Helper()
	src, err := pcapfile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var out [][]byte
	var p capture.Packet
	for {
		err := src.Next(&p)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if p.LinkType != flow.LinkEthernet {
			t.Fatalf("%s: link type %v", path, p.LinkType)
		}
		out = append(out, slices.Clone(p.Data))
	}
}

// Decapsulation in the kernel, fed by tcpreplay: the tunnelled captures of
// flow/testdata/decap (GRE, ERSPAN, VXLAN, Geneve, GTP-U, IP-in-IP, nested
// and bad ones, made with scapy by scripts/mkdecap.py) replayed into a
// veth pair in a namespace the test makes, the program attached to the
// other end with every tunnel decapsulated: the keys the rings carry are
// the inner keys flow.DecodeDecap gives, VNIs included, and every frame it
// does not key is counted under DecodeDecap's reason.
func TestXDPDecapTcpreplay(t *testing.T) {
	if _, err := exec.LookPath("tcpreplay"); err != nil {
		testutil.SkipOrFail(t, "tcpreplay not installed (Debian package tcpreplay)")
	}
	ns := netns.NetNS(t)
	if ns.Name == "" {
		testutil.SkipOrFail(t, "the test namespace has no name, so `ip netns exec` cannot enter it")
	}
	paths, err := filepath.Glob("../../flow/testdata/decap/*.pcap")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no decap captures: %v", err)
	}
	decap, err := flow.ParseDecap("all")
	if err != nil {
		t.Fatal(err)
	}
	x := openXDP(t, ns, Config{Key: flow.KeySrc, Seed: 5, PollTimeout: 50 * time.Millisecond, Decap: decap})

	want := map[flow.Key]bool{}
	wantErrs := map[string]uint64{}
	var frames uint64
	segments := 0
	for _, path := range paths {
		for _, f := range readFrames(t, path) {
			frames++
			k, err := flow.ParseDecapFrame(f, flow.LinkEthernet, flow.KeySrc, &decap)
			if err != nil {
				wantErrs[flow.Reason(err)]++
				continue
			}
			if _, ok := k.Segment(); ok && !want[k] {
				segments++
			}
			want[k] = true
		}
		// One CPU sends, so that each key crosses the prefilter once.
		cmd := exec.Command("ip", "netns", "exec", ns.Name, "taskset", "-c", "0", "tcpreplay", "-q", "-i", ns.Veth[1], "--mbps", "10", path)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("tcpreplay %s: %v\n%s", path, err, b)
		}
	}
	waitProcessed(t, x, frames)
	got := map[flow.Key]bool{}
	for _, p := range readKeys(t, x) {
		got[p.Key] = true
	}
	for k := range want {
		if !got[k] {
			t.Errorf("key %v (flow.DecodeDecap's) never came out of the kernel", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("the kernel keyed %v, which flow.DecodeDecap does not give", k)
		}
	}
	c := total(t, x)
	if c.Packets != frames {
		t.Errorf("the kernel counted %d frames, %d sent", c.Packets, frames)
	}
	for reason, n := range c.Errors {
		if n != wantErrs[reason] {
			t.Errorf("reason %s: kernel %d, flow.DecodeDecap %d", reason, n, wantErrs[reason])
		}
	}
	for reason, n := range wantErrs {
		if _, ok := c.Errors[reason]; !ok {
			t.Errorf("reason %s (%d frames) not counted by the kernel", reason, n)
		}
	}
	if segments == 0 || len(wantErrs) < 3 {
		t.Errorf("the captures gave %d keys with a segment and errors %v: not the tunnels they should hold", segments, wantErrs)
	}
	t.Logf("%d frames of %d captures: %d keys (%d with a segment), errors %v", frames, len(paths), len(want), segments, wantErrs)
}

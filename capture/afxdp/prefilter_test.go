//go:build linux && !(mips || mips64 || ppc64 || s390x)

package afxdp

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/xdp"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/netns"
)

// afxNotIP returns a frame without a flow key: EtherType 0x88b5 (IEEE
// local experimental), i in its payload.
func afxNotIP(i int) []byte {
	f := make([]byte, 60)
	copy(f, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0x88, 0xb5})
	f[14], f[15] = byte(i>>8), byte(i)
	return f
}

// afxHits returns the prefiltered source's kernel counts.
func afxHits(t *testing.T, src capture.Source) capture.KernelCounts {
	t.Helper()
	kc, ok := src.(capture.KernelCounter)
	if !ok {
		t.Fatalf("a prefiltered source (%T) is not a capture.KernelCounter", src)
	}
	var c capture.KernelCounts
	if err := kc.KernelCounts(&c); err != nil {
		t.Fatalf("KernelCounts: %v", err)
	}
	return c
}

// The in-kernel prefilter: a frame whose key the reader has handed on does
// not cross again, and is counted instead; frames of new keys and frames
// without a key cross, unchanged.
func TestAFXDPPrefilter(t *testing.T) {
	for _, mode := range []xdp.AttachMode{xdp.AttachNative, xdp.AttachGeneric} {
		t.Run(string(mode), func(t *testing.T) {
			ns := netns.NetNS(t)
			a := afxOpen(t, ns, Config{Iface: ns.Veth[0], Attach: mode, Prefilter: &Prefilter{Kind: flow.KeySrc, Seed: 7}})
			srcs := a.Sources()
			if len(srcs) != 1 {
				t.Fatalf("%d sources, want 1", len(srcs))
			}
			src := srcs[0]
			snd := afxNewSender(t, ns, ns.Veth[1])
			// Each round sends frames and reads until the source has been
			// idle for a second: what crossed. The frames fit in the
			// UMEM (4096 frames) whatever the reader's pace, so none is
			// dropped.
			round := func(frames [][]byte) [][]byte {
				t.Helper()
				for _, f := range frames {
					snd.send(t, f)
				}
				return afxRead(t, src, len(frames)+1, time.Second)
			}
			check := func(name string, got, want [][]byte) {
				t.Helper()
				if len(got) != len(want) {
					t.Fatalf("%s: %d frames crossed, want %d", name, len(got), len(want))
				}
				for i := range got {
					if !bytes.Equal(got[i], want[i]) {
						t.Fatalf("%s: frame %d:\n got %x\nwant %x", name, i, got[i], want[i])
					}
				}
			}
			const flows, notIP = 300, 5
			var first, again, newer, others [][]byte
			for i := range flows {
				first = append(first, afxFrame(i))
				again = append(again, afxFrame(i), afxFrame(i)) // the same sources
				newer = append(newer, afxFrame(flows+i))
			}
			for i := range notIP {
				others = append(others, afxNotIP(i))
			}

			// Round 1: every key is new, every frame crosses.
			check("new keys", round(append(append([][]byte(nil), first...), others...)), append(append([][]byte(nil), first...), others...))
			if c := afxHits(t, src); c.Packets != 0 || c.Prefiltered != 0 {
				t.Errorf("after new keys: kernel counts %+v, want none", c)
			}
			// Round 2: the keys of round 1 again, twice each, and frames
			// without a key: only these cross.
			check("seen keys", round(append(append([][]byte(nil), again...), others...)), others)
			want := uint64(len(again))
			testutil.WaitFor(t, fmt.Sprintf("%d frames counted as prefiltered", want), time.Minute, func() bool { return afxHits(t, src).Prefiltered >= want })
			if c := afxHits(t, src); c.Packets != want || c.Keyed != want || c.Prefiltered != want || c.RingFull != 0 || len(c.Errors) != 0 {
				t.Errorf("after seen keys: kernel counts %+v, want %d packets, keyed and prefiltered", c, want)
			}
			// Round 3: new keys cross again.
			check("newer keys", round(newer), newer)
			if c := afxHits(t, src); c.Prefiltered != want {
				t.Errorf("after newer keys: %d prefiltered, want %d", c.Prefiltered, want)
			}
			if drops, err := src.(capture.DropCounter).KernelDrops(); err != nil || drops != 0 {
				t.Errorf("KernelDrops() = %d, %v; want 0", drops, err)
			}
		})
	}
}

// A source without the prefilter is no KernelCounter: the pipeline counts
// its frames one by one, as before.
func TestAFXDPNoPrefilterNoKernelCounts(t *testing.T) {
	ns := netns.NetNS(t)
	a := afxOpen(t, ns, Config{Iface: ns.Veth[0]})
	for _, src := range a.Sources() {
		if _, ok := src.(capture.KernelCounter); ok {
			t.Errorf("source %T without a prefilter is a KernelCounter", src)
		}
	}
}

func TestPrefilterConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Prefilter
	}{
		{"no key kind", Prefilter{}},
		{"bytes not a multiple of a row", Prefilter{Kind: flow.KeySrc, Bytes: 100}},
		{"fewer bytes than a row", Prefilter{Kind: flow.KeySrc, Bytes: -32}},
		{"over 1 GiB", Prefilter{Kind: flow.KeySrc, Bytes: 1<<30 + 64}},
		{"negative window", Prefilter{Kind: flow.KeySrc, Window: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			if _, err := (Config{Iface: "lo", Prefilter: &p}).withDefaults(); err == nil {
				t.Errorf("Prefilter %+v accepted", tc.p)
			}
		})
	}
	p := Prefilter{Kind: flow.KeySrc}
	if rows, err := p.rows(); err != nil || rows != 8192 { // 512 KiB of 64-byte rows
		t.Errorf("default prefilter: %d rows, %v; want 8192", rows, err)
	}
}

// learn, on memory that stands for the maps and the UMEM: a key goes to
// the first free bucket of its row, once per window, tagged with the
// window of the frame's time (the bucket's high 32 bits, written out by
// hand here); a bucket of another window is free again; a full row has a
// bucket replaced; metadata of another queue's row, or none, is ignored;
// the metadata is cleared once read, and its time returned.
func TestPrefilterLearn(t *testing.T) {
	const rows, queue, window = 4, 1, 1000
	pf := &prefilterMem{seen: make([]uint64, 2*rows*8), hits: make([]uint64, 2*8), rows: rows, windowNs: window}
	s := &Source{queue: queue, pf: pf, rnd: 1, umem: make([]byte, 4096)}
	const addr = 256 // a frame's data, after the headroom
	put := func(tm uint64, row, fp uint32) {
		t.Helper()
		m := s.umem[addr-16 : addr]
		for i := range 8 {
			m[i] = byte(tm >> (8 * i))
		}
		m[8], m[9], m[10], m[11] = byte(row), byte(row>>8), byte(row>>16), byte(row>>24)
		m[12], m[13], m[14], m[15] = byte(fp), byte(fp>>8), byte(fp>>16), byte(fp>>24)
		if got := s.learn(addr); got != int64(tm) {
			t.Errorf("learn returned time %d, want %d", got, tm)
		}
		if !bytes.Equal(s.umem[addr-16:addr], make([]byte, 16)) {
			t.Errorf("metadata (row %d, fp %#x) not cleared: % x", row, fp, s.umem[addr-16:addr])
		}
	}
	row := func(r int) []uint64 { return pf.seen[r*8 : r*8+8] }
	const w5 = 5 << 32     // window 5 (times 5000 to 5999) in a bucket
	put(5000, rows+2, 0xa) // queue 1's third row
	put(5999, rows+2, 0xa) // again in the window: no second bucket
	put(5500, rows+2, 0xb)
	if got, want := row(rows+2), []uint64{w5 | 0xa, w5 | 0xb, 0, 0, 0, 0, 0, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("row after a, a, b: %x, want %x", got, want)
	}
	// Window 6: a again takes the first bucket of another window.
	put(6000, rows+2, 0xa)
	if got, want := row(rows+2), []uint64{6<<32 | 0xa, w5 | 0xb, 0, 0, 0, 0, 0, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("row after a in window 6: %x, want %x", got, want)
	}
	put(7000, 2, 0xc)      // queue 0's row: not this reader's
	put(7000, 2*rows, 0xd) // beyond the map
	put(7000, rows+1, 0)   // no key
	put(0, rows+1, 0)      // no metadata
	for r := range 2 * rows {
		if r != rows+2 && fmt.Sprint(row(r)) != fmt.Sprint(make([]uint64, 8)) {
			t.Errorf("row %d written: %x", r, row(r))
		}
	}
	// A full row: the ninth key takes one bucket, the others stay.
	for fp := uint64(0x10); fp < 0x18; fp++ {
		put(5001, rows, uint32(fp))
	}
	put(5002, rows, 0x99)
	kept, found := 0, false
	for _, v := range row(rows) {
		if v >= w5|0x10 && v < w5|0x18 {
			kept++
		}
		found = found || v == w5|0x99
	}
	if kept != 7 || !found {
		t.Errorf("full row after a ninth key: %x, want 7 of the 8 keys and the ninth", row(rows))
	}
	// One window: every bucket is tagged 0.
	pf.windowNs = 0
	put(123456789, rows+3, 0x42)
	if got := row(rows + 3)[0]; got != 0x42 {
		t.Errorf("one window: bucket %#x, want 0x42", got)
	}
	if n := testing.AllocsPerRun(100, func() { put(5003, rows+3, 0x42) }); n != 0 {
		t.Errorf("learn allocates %v times", n)
	}
}

// TestSourcePrefiltered checks a prefiltered socket against the contract
// of capture.Source (capturetest), as TestSource does the plain one: its
// frames all have new keys, so all of them cross, in order.
func TestSourcePrefiltered(t *testing.T) {
	runConformance(t, &Prefilter{Kind: flow.KeySrc})
}

// The program learns a key itself when the socket is sure to take its
// frame: from Open on, the frames of a key that follow its first stay in
// the kernel, though the reader reads nothing in between.
func TestAFXDPPrefilterKernelLearns(t *testing.T) {
	ns := netns.NetNS(t)
	a := afxOpen(t, ns, Config{Iface: ns.Veth[0], PollTimeout: 20 * time.Millisecond, Prefilter: &Prefilter{Kind: flow.KeySrc, Seed: 7}})
	src := a.Sources()[0]
	snd := afxNewSender(t, ns, ns.Veth[1])
	for range 3 {
		snd.send(t, afxFrame(1))
		snd.send(t, afxFrame(2))
	}
	testutil.WaitFor(t, "4 frames kept in the kernel", time.Minute, func() bool { return afxHits(t, src).Prefiltered >= 4 })
	got := afxRead(t, src, 3, time.Second)
	if len(got) != 2 || !bytes.Equal(got[0], afxFrame(1)) || !bytes.Equal(got[1], afxFrame(2)) {
		t.Errorf("%d frames crossed, want only the first of keys 1 and 2", len(got))
	}
	if c := afxHits(t, src); c.Prefiltered != 4 {
		t.Errorf("%d frames kept in the kernel, want 4", c.Prefiltered)
	}
}

// A frame the socket drops (no free UMEM frame) leaves its key out, also
// when the program learns keys itself: it learns only while it is sure of
// room. 400 new keys into a 256-frame UMEM that nobody reads, twice, then
// once more read as they come: every key crosses, though frames were
// dropped.
func TestAFXDPPrefilterFullSocketLosesNoKey(t *testing.T) {
	const frames, keys = 256, 400
	ns := netns.NetNS(t)
	a := afxOpen(t, ns, Config{Iface: ns.Veth[0], NumFrames: frames, PollTimeout: 20 * time.Millisecond, Prefilter: &Prefilter{Kind: flow.KeySrc, Seed: 7}})
	src := a.Sources()[0]
	snd := afxNewSender(t, ns, ns.Veth[1])
	for range 2 {
		for k := range keys {
			snd.send(t, afxFrame(k))
		}
	}
	testutil.WaitFor(t, "the socket to drop frames", time.Minute, func() bool {
		n, err := src.(capture.DropCounter).KernelDrops()
		return err == nil && n > 0
	})
	crossed := map[int]bool{}
	note := func(fs [][]byte) {
		for _, f := range fs {
			crossed[int(f[14+12+2])<<8|int(f[14+12+3])] = true
		}
	}
	note(afxRead(t, src, 2*keys, time.Second))
	for k := 0; k < keys; k += 100 { // 100 at a time: room for them all
		for j := k; j < k+100; j++ {
			snd.send(t, afxFrame(j))
		}
		note(afxRead(t, src, 100, 200*time.Millisecond))
	}
	var missing []int
	for k := range keys {
		if !crossed[k] {
			missing = append(missing, k)
		}
	}
	drops, _ := src.(capture.DropCounter).KernelDrops()
	if len(missing) > 0 {
		t.Errorf("%d keys never crossed (%d frames dropped by the socket): %v", len(missing), drops, missing)
	}
	t.Logf("%d frames dropped by the socket, %d kept in the kernel", drops, afxHits(t, src).Prefiltered)
}

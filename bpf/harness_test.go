//go:build linux && !(mips || mips64 || ppc64 || s390x)

package bpf_test

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/flowdedup/flowdedup/bpf"
	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

var kinds = []flow.KeyKind{flow.KeySrc, flow.KeyDst, flow.KeyPair, flow.Key5Tuple}

// xdpPass is the program's only verdict.
const xdpPass = 2

// harness runs a loaded program on frames with BPF_PROG_TEST_RUN and
// collects what it did: the events of every CPU's ring and the change of
// the counters summed over CPUs.
type harness struct {
	tb      testing.TB
	mask    flow.Mask  // the program's Config.Prefix
	decap   flow.Decap // and its Config.Decap
	o       *bpf.Objects
	readers []*ringbuf.Reader
	rec     ringbuf.Record
	last    bpf.Counters // sum over CPUs at the last call of delta
	buf     []bpf.Counters
}

// newHarness loads the program (the test needs root) and closes it when
// the test ends.
func newHarness(tb testing.TB, cfg bpf.Config) *harness {
	tb.Helper()
	testutil.RequireRoot(tb)
	o, err := bpf.Load(cfg)
	if err != nil {
		tb.Fatalf("Load(%+v): %v", cfg, err)
	}
	h := &harness{tb: tb, o: o, mask: cfg.Prefix, decap: cfg.Decap}
	tb.Cleanup(func() {
		for _, r := range h.readers {
			r.Close()
		}
		if err := o.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	for i, m := range o.Rings {
		r, err := ringbuf.NewReader(m)
		if err != nil {
			tb.Fatalf("ringbuf.NewReader(Rings[%d]): %v", i, err)
		}
		h.readers = append(h.readers, r)
	}
	h.last = h.counters()
	return h
}

// counters returns the counters summed over CPUs.
func (h *harness) counters() bpf.Counters {
	h.tb.Helper()
	var err error
	h.buf, err = h.o.Counters(h.buf)
	if err != nil {
		h.tb.Fatal(err)
	}
	return sum(h.buf)
}

func sum(cs []bpf.Counters) bpf.Counters {
	var s bpf.Counters
	for _, c := range cs {
		s.Packets += c.Packets
		s.Keyed += c.Keyed
		s.PrefilterHits += c.PrefilterHits
		s.Emitted += c.Emitted
		s.RingFull += c.RingFull
		for i, e := range c.Errors {
			s.Errors[i] += e
		}
	}
	return s
}

// delta returns how much the counters moved since the last call.
func (h *harness) delta() bpf.Counters {
	h.tb.Helper()
	now := h.counters()
	d := bpf.Counters{
		Packets:       now.Packets - h.last.Packets,
		Keyed:         now.Keyed - h.last.Keyed,
		PrefilterHits: now.PrefilterHits - h.last.PrefilterHits,
		Emitted:       now.Emitted - h.last.Emitted,
		RingFull:      now.RingFull - h.last.RingFull,
	}
	for i := range d.Errors {
		d.Errors[i] = now.Errors[i] - h.last.Errors[i]
	}
	h.last = now
	return d
}

// event is a decoded ring buffer record.
type event struct {
	key    flow.Key
	timeNs int64
	cpu    int
}

// run runs the program once on frame and returns nothing: see drain and
// delta for what it did.
func (h *harness) run(frame []byte) error {
	ret, err := h.o.Program.Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		return err
	}
	if ret != xdpPass {
		h.tb.Fatalf("program returned %d, want XDP_PASS", ret)
	}
	return nil
}

// mustRun is run, failing the test on error.
func (h *harness) mustRun(frame []byte) {
	h.tb.Helper()
	if err := h.run(frame); err != nil {
		h.tb.Fatalf("running the program on %x: %v", frame, err)
	}
}

// drain reads every record waiting in every CPU's ring, without blocking,
// and appends them to dst.
func (h *harness) drain(dst []event) []event {
	h.tb.Helper()
	for cpu, r := range h.readers {
		if r.AvailableBytes() == 0 {
			continue
		}
		r.SetDeadline(time.Unix(1, 0)) // in the past: do not wait
		for {
			err := r.ReadInto(&h.rec)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if err != nil {
				h.tb.Fatalf("reading ring %d: %v", cpu, err)
			}
			k, ts, err := bpf.DecodeEvent(h.rec.RawSample)
			if err != nil {
				h.tb.Fatalf("ring %d: %v (record %x)", cpu, err, h.rec.RawSample)
			}
			dst = append(dst, event{key: k, timeNs: ts, cpu: cpu})
		}
	}
	return dst
}

// checkInvariants checks the equations of struct fd_counters on every CPU.
func checkInvariants(tb testing.TB, o *bpf.Objects) {
	tb.Helper()
	cs, err := o.Counters(nil)
	if err != nil {
		tb.Fatal(err)
	}
	for cpu, c := range cs {
		errs := uint64(0)
		for _, e := range c.Errors {
			errs += e
		}
		if c.Packets != c.Keyed+errs {
			tb.Errorf("CPU %d: packets %d != keyed %d + errors %v", cpu, c.Packets, c.Keyed, c.Errors)
		}
		if c.Keyed != c.PrefilterHits+c.Emitted+c.RingFull {
			tb.Errorf("CPU %d: keyed %d != prefilter hits %d + emitted %d + ring full %d", cpu, c.Keyed, c.PrefilterHits, c.Emitted, c.RingFull)
		}
	}
}

// errIndex returns the index of err in bpf.Errs, or -1.
func errIndex(err error) int {
	return slices.Index(bpf.Errs[:], err)
}

// capFrames is the frames of one capture file.
type capFrames struct {
	name   string
	frames [][]byte
}

// loadCaptures reads every capture of testdata/pcaps. It skips, and counts,
// the frames of other link types than Ethernet.
func loadCaptures(tb testing.TB) (caps []capFrames, skipped int) {
	tb.Helper()
	return loadCapturesOf(tb, "../testdata/pcaps/*.pcap*")
}

// loadCapturesOf is loadCaptures of the files glob names.
func loadCapturesOf(tb testing.TB, glob string) (caps []capFrames, skipped int) {
	tb.Helper()
	paths, err := filepath.Glob(glob)
	if err != nil {
		tb.Fatal(err)
	}
	for _, path := range paths {
		src, err := pcapfile.Open(path)
		if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		c := capFrames{name: filepath.Base(path)}
		var p capture.Packet
		for {
			err := src.Next(&p)
			if err == io.EOF {
				break
			}
			if err != nil {
				tb.Fatalf("%s: %v", path, err)
			}
			if p.LinkType != flow.LinkEthernet {
				skipped++
				continue
			}
			c.frames = append(c.frames, slices.Clone(p.Data))
		}
		src.Close()
		caps = append(caps, c)
	}
	if len(caps) == 0 {
		tb.Fatalf("no capture matches %s", glob)
	}
	return caps, skipped
}

// Frame builders for crafted frames.

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// eth is an Ethernet header of the given EtherType.
func eth(etype uint16) []byte {
	return cat([]byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2}, be16(etype))
}

// vlan is a VLAN tag (after a VLAN EtherType) followed by etype.
func vlan(id, etype uint16) []byte { return cat(be16(id&0x0fff), be16(etype)) }

// mpls is one MPLS label stack entry.
func mpls(label uint32, bottom bool) []byte {
	v := label<<12 | 64 // TTL 64
	if bottom {
		v |= 1 << 8
	}
	return binary.BigEndian.AppendUint32(nil, v)
}

// pppoe is a PPPoE session header with payload length plen and PPP
// protocol proto (written in one byte when it is below 0x100).
func pppoe(plen uint16, proto uint16) []byte {
	b := cat([]byte{0x11, 0x00, 0x00, 0x01}, be16(plen))
	if proto < 0x100 {
		return append(b, byte(proto))
	}
	return append(b, be16(proto)...)
}

var (
	a4  = [4]byte{192, 0, 2, 1}
	b4  = [4]byte{198, 51, 100, 7}
	a6  = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	b6  = [16]byte{0x20, 0x01, 0x0d, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0xee}
	zr6 = [16]byte{}
)

// ip4 is an IPv4 header of protocol proto whose total length counts
// payload more bytes; mods change it afterwards.
func ip4(proto uint8, src, dst [4]byte, payload int, mods ...func(h []byte)) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+payload))
	h[8] = 64
	h[9] = proto
	copy(h[12:], src[:])
	copy(h[16:], dst[:])
	for _, m := range mods {
		m(h)
	}
	return h
}

// ip6 is an IPv6 header with next header next and payload length plen.
func ip6(next uint8, src, dst [16]byte, plen int) []byte {
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(plen))
	h[6] = next
	h[7] = 64
	copy(h[8:], src[:])
	copy(h[24:], dst[:])
	return h
}

// ext6 is an IPv6 hop-by-hop, routing or destination options header of
// (units+1)*8 bytes.
func ext6(next uint8, units uint8) []byte {
	h := make([]byte, (int(units)+1)*8)
	h[0], h[1] = next, units
	return h
}

// frag6 is an IPv6 fragment header.
func frag6(next uint8, offset uint16, more bool) []byte {
	v := offset << 3
	if more {
		v |= 1
	}
	return cat([]byte{next, 0}, be16(v), []byte{0, 0, 0, 42})
}

// ah is an IPsec AH header with the given length field ((l+2)*4 bytes).
func ah(next uint8, l uint8) []byte {
	n := (int(l) + 2) * 4
	if n < 2 {
		n = 2
	}
	h := make([]byte, n)
	h[0], h[1] = next, l
	return h
}

func tcp(sport, dport uint16) []byte {
	h := make([]byte, 20)
	binary.BigEndian.PutUint16(h[0:], sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	h[12] = 5 << 4
	return h
}

func udp(sport, dport uint16, payload int) []byte {
	h := make([]byte, 8+payload)
	binary.BigEndian.PutUint16(h[0:], sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	binary.BigEndian.PutUint16(h[4:], uint16(8+payload))
	return h
}

// IP protocol numbers.
const (
	pHop    = 0
	pICMP   = 1
	pTCP    = 6
	pUDP    = 17
	pRoute  = 43
	pFrag   = 44
	pAH     = 51
	pICMP6  = 58
	pDst    = 60
	pSCTP   = 132
	pUDPLit = 136
)

// EtherTypes.
const (
	etIPv4   = 0x0800
	etIPv6   = 0x86dd
	etARP    = 0x0806
	etVLAN   = 0x8100
	etQinQ   = 0x88a8
	etQinQ91 = 0x9100
	etMPLS   = 0x8847
	etMPLSMC = 0x8848
	etPPPoE  = 0x8864
	etPPPoED = 0x8863
	etLLDP   = 0x88cc
)

// udp4 is an Ethernet/IPv4/UDP frame.
func udp4(src, dst [4]byte, sport, dport uint16) []byte {
	return cat(eth(etIPv4), ip4(pUDP, src, dst, 8+4), udp(sport, dport, 4))
}

// tcp4 is an Ethernet/IPv4/TCP frame.
func tcp4(src, dst [4]byte, sport, dport uint16) []byte {
	return cat(eth(etIPv4), ip4(pTCP, src, dst, 20), tcp(sport, dport))
}

// udp6 is an Ethernet/IPv6/UDP frame.
func udp6(src, dst [16]byte, sport, dport uint16) []byte {
	return cat(eth(etIPv6), ip6(pUDP, src, dst, 8+4), udp(sport, dport, 4))
}

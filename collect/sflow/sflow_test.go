package sflow

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	gfsflow "github.com/netsampler/goflow2/v2/decoders/sflow"

	"github.com/flowdedup/flowdedup/collect/collecttest"
	"github.com/flowdedup/flowdedup/internal/testutil/testexporter"
)

var writeSeeds = flag.Bool("write-seeds", false, "write pmacct's sfprobe datagrams to testdata/fuzz/FuzzDatagrams")

// refSample is what a test compares of a sample.
type refSample struct {
	Header       string // the header bytes
	Protocol     uint32
	SamplingRate uint32
	Src, Dst     netip.Addr
	Proto        uint8
	Sport, Dport uint16
}

func sampleOf(s *Sample) refSample {
	return refSample{string(s.Header), s.Protocol, s.SamplingRate, s.Src, s.Dst, s.Proto, s.SrcPort, s.DstPort}
}

// decode returns the samples of b as this package reads them.
func decode(d *Datagram, b []byte) ([]refSample, error) {
	if err := d.Reset(b); err != nil {
		return nil, err
	}
	var out []refSample
	var s Sample
	for d.Next(&s) {
		out = append(out, sampleOf(&s))
	}
	return out, nil
}

// reference returns the samples of b as goflow2's decoder reads them: per
// flow sample, its first raw header record of a known protocol, else its
// first sampled IPv4/IPv6 record, as Datagram.Next chooses.
func reference(b []byte) ([]refSample, error) {
	var p gfsflow.Packet
	if err := gfsflow.DecodeMessageVersion(bytes.NewBuffer(b), &p); err != nil {
		return nil, err
	}
	var out []refSample
	for _, smp := range p.Samples {
		var recs []gfsflow.FlowRecord
		var rate uint32
		switch s := smp.(type) {
		case gfsflow.FlowSample:
			recs, rate = s.Records, s.SamplingRate
		case gfsflow.ExpandedFlowSample:
			recs, rate = s.Records, s.SamplingRate
		default:
			continue
		}
		var got *refSample
		for _, r := range recs {
			switch d := r.Data.(type) {
			case gfsflow.SampledHeader:
				h := d.HeaderData[:min(int(d.OriginalLength), len(d.HeaderData))]
				if len(h) == 0 || d.Protocol != ProtoEthernet && d.Protocol != ProtoIPv4 && d.Protocol != ProtoIPv6 {
					continue
				}
				got = &refSample{Header: string(h), Protocol: d.Protocol, SamplingRate: rate}
			case gfsflow.SampledIPv4:
				if got == nil {
					got = ipSample(d.SampledIPBase, rate)
				}
				continue
			case gfsflow.SampledIPv6:
				if got == nil {
					got = ipSample(d.SampledIPBase, rate)
				}
				continue
			default:
				continue
			}
			break // a raw header: the sample's key
		}
		if got != nil {
			out = append(out, *got)
		}
	}
	return out, nil
}

func ipSample(b gfsflow.SampledIPBase, rate uint32) *refSample {
	src, _ := netip.AddrFromSlice(b.SrcIP)
	dst, _ := netip.AddrFromSlice(b.DstIP)
	return &refSample{SamplingRate: rate, Src: src, Dst: dst, Proto: uint8(b.Protocol), Sport: uint16(b.SrcPort), Dport: uint16(b.DstPort)}
}

func sameSamples(t *testing.T, got, want []refSample) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d samples, goflow2 %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("sample %d:\n got %+v\nwant %+v (goflow2)", i, got[i], want[i])
		}
	}
}

// TestSfprobe decodes what pmacct's sfprobe sends for testdata captures
// and compares it with goflow2's reading and with the capture's frames.
func TestSfprobe(t *testing.T) {
	agent := netip.MustParseAddr("192.0.2.1")
	for _, capture := range []string{"small.pcap", "vlan.pcap"} {
		t.Run(capture, func(t *testing.T) {
			msgs := testexporter.CaptureSfprobe(t, filepath.Join("..", "..", "testdata", "pcaps", capture), agent, 3)
			if len(msgs) == 0 {
				t.Fatal("sfprobe sent nothing")
			}
			var d Datagram
			n := 0
			for i, m := range msgs {
				got, err := decode(&d, m)
				if err != nil {
					t.Fatalf("datagram %d: %v", i, err)
				}
				want, err := reference(m)
				if err != nil {
					t.Fatalf("goflow2: datagram %d: %v", i, err)
				}
				sameSamples(t, got, want)
				if d.Agent != agent || d.SubAgent != 3 || d.Sequence != uint32(i+1) && d.Sequence != uint32(i) {
					t.Fatalf("datagram %d: agent %v/%d sequence %d", i, d.Agent, d.SubAgent, d.Sequence)
				}
				n += len(got)
			}
			// Not 2000 (every frame, sampled 1 in 1): pmacctd 1.7.7 samples
			// no 802.1ad (QinQ) frame, and does not send the samples of
			// its last, partly filled datagram when the capture ends.
			if n < 1400 {
				t.Errorf("%d samples of a 2000-frame capture sampled 1 in 1", n)
			}
			if d.Stats.Errors != [NumReasons]uint64{} {
				t.Errorf("errors %v", d.Stats.Errors)
			}
			if *writeSeeds {
				writeCorpusFile(t, filepath.Join("testdata", "fuzz", "FuzzDatagrams", "sfprobe-"+capture), msgs[0])
				writeCorpusFile(t, filepath.Join("testdata", "fuzz", "FuzzDatagrams", "sfprobe-"+capture+"-last"), msgs[len(msgs)-1])
			}
		})
	}
}

func writeCorpusFile(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func testAgent() *collecttest.SFlow {
	return &collecttest.SFlow{Agent: netip.MustParseAddr("2001:db8::1"), SubAgent: 7, UptimeMs: 1000}
}

func testSamples() []collecttest.SFlowSample {
	return []collecttest.SFlowSample{
		{Header: []byte{1, 2, 3, 4, 5}, Protocol: ProtoEthernet, FrameLength: 60, SamplingRate: 512},
		{Header: bytes.Repeat([]byte{0x45}, 64), Protocol: ProtoIPv4, FrameLength: 1500, SamplingRate: 512},
		{Header: []byte{0x60, 0, 0, 0}, Protocol: ProtoIPv6, FrameLength: 80, SamplingRate: 1024},
		{Header: []byte{9, 9}, Protocol: 2, FrameLength: 80, SamplingRate: 1024}, // Token Ring: no key
	}
}

// TestEncoded: samples of every header protocol, a counter sample and an
// IPv6 agent.
func TestEncoded(t *testing.T) {
	a := testAgent()
	b := a.Datagram(testSamples(), true)
	var d Datagram
	got, err := decode(&d, b)
	if err != nil {
		t.Fatal(err)
	}
	want, err := reference(b)
	if err != nil {
		t.Fatal(err)
	}
	sameSamples(t, got, want)
	if len(got) != 3 || got[0].Header != "\x01\x02\x03\x04\x05" || got[2].SamplingRate != 1024 {
		t.Errorf("samples %+v", got)
	}
	if d.Agent != a.Agent || d.SubAgent != 7 || d.Stats.Counters != 1 || d.Stats.Errors[NoHeader] != 1 {
		t.Errorf("agent %v/%d, stats %+v", d.Agent, d.SubAgent, d.Stats)
	}
}

// TestBadDatagrams: damage is counted by reason, never a panic, and the
// samples before it are read.
func TestBadDatagrams(t *testing.T) {
	whole := testAgent().Datagram(testSamples()[:2], false)
	overrun := bytes.Clone(whole)
	// The second sample's length (after the 24+16-byte header and the
	// first sample) claims more than is left.
	first := 8 + binary.BigEndian.Uint32(whole[8+16+16+4:])
	binary.BigEndian.PutUint32(overrun[8+16+16+4+first:], 1<<30)
	badAgent := bytes.Clone(whole)
	badAgent[7] = 3
	tests := []struct {
		name    string
		b       []byte
		reason  Reason
		samples int
	}{
		{"empty", nil, Truncated, 0},
		{"version 4", []byte{0, 0, 0, 4, 0, 0, 0, 1, 1, 2, 3, 4}, BadVersion, 0},
		{"agent address type 3", badAgent, BadVersion, 0},
		{"cut in the header", whole[:30], Truncated, 0},
		{"cut in a sample", whole[:len(whole)-10], Truncated, 1},
		{"sample longer than the datagram", overrun, Truncated, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Datagram
			got, _ := decode(&d, tt.b)
			for r := range NumReasons {
				want := uint64(0)
				if r == tt.reason {
					want = 1
				}
				if d.Stats.Errors[r] != want {
					t.Errorf("%v: %d, want %d", r, d.Stats.Errors[r], want)
				}
			}
			if len(got) != tt.samples {
				t.Errorf("%d samples, want %d", len(got), tt.samples)
			}
		})
	}
}

// TestNoAlloc: decoding a datagram allocates nothing.
func TestNoAlloc(t *testing.T) {
	b := testAgent().Datagram(testSamples(), true)
	var d Datagram
	var s Sample
	n := testing.AllocsPerRun(100, func() {
		d.Reset(b)
		for d.Next(&s) {
		}
	})
	if n != 0 {
		t.Errorf("%.1f allocations per datagram", n)
	}
}

// FuzzDatagrams decodes a datagram and checks that nothing panics and
// that, where goflow2's decoder reads it without an error and this
// package counted none, both read the same samples. Seeds: what pmacct's
// sfprobe sends (TestSfprobe -write-seeds) and the test encoder's.
func FuzzDatagrams(f *testing.F) {
	f.Add(testAgent().Datagram(testSamples(), true))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Datagram
		got, err := decode(&d, b)
		if err != nil || d.Stats.Errors != [NumReasons]uint64{} {
			return
		}
		for _, s := range got {
			if len(s.Header) > len(b) {
				t.Fatalf("a header of %d bytes from a datagram of %d", len(s.Header), len(b))
			}
		}
		want, err := reference(b)
		if err != nil {
			return
		}
		sameSamples(t, got, want)
	})
}

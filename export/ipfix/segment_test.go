package ipfix_test

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/export/ipfix"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
	"github.com/flowdedup/flowdedup/record"
)

// segmentRecords returns n records of kind whose keys have a segment
// (flow.Key.Segment, as inside VXLAN or Geneve): VNIs 0, 1, the largest
// (2^24-1) and random ones; a third of them by network too.
func segmentRecords(rng *rand.Rand, kind flow.KeyKind, n int) []record.Record {
	recs := randRecords(rng, kind, n, 2)
	for i := range recs {
		var vni uint32
		switch rng.IntN(4) {
		case 0:
			vni = uint32(rng.IntN(2)) // 0 or 1
		case 1:
			vni = 1<<24 - 1
		default:
			vni = rng.Uint32N(1 << 24)
		}
		if rng.IntN(3) == 0 {
			m, err := flow.MakeMask(rng.IntN(33), rng.IntN(129))
			if err != nil {
				panic(err)
			}
			m.Apply(&recs[i].Key)
		}
		recs[i].Key = recs[i].Key.WithSegment(vni)
		if !recs[i].Key.IsValid() {
			panic("WithSegment refused a 24-bit VNI")
		}
	}
	return recs
}

// checkSegmentTemplates checks that records with a segment use templates
// 276-295 and the others 256-275, as docs/export.md says.
func checkSegmentTemplates(t *testing.T, msgs []decodedMessage) {
	t.Helper()
	for i, m := range msgs {
		for j, f := range m.Flows {
			id := m.FlowTemplate[j]
			if seg := f.Seg != 0; seg && (id < 276 || id > 295) || !seg && (id < 256 || id > 275) {
				t.Fatalf("message %d: flow %+v (segment %v) in template %d", i, f, seg, id)
			}
		}
	}
}

// TestSegmentKeys exports keys with a segment (VXLAN or Geneve VNI) of
// every kind, mixed with keys without one, over UDP and TCP: each carries
// layer2SegmentId (IANA IE 351, unsigned64: type 0x01 VxLAN in the top
// byte, the VNI in the low three), in templates of their own, which
// goflow2 and libfixbuf's ipfixDump both read back field by field, while
// the keys without a segment keep their templates and fields.
func TestSegmentKeys(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(kind), 37))
			recs := append(segmentRecords(rng, kind, 3000), randRecords(rng, kind, 300, 1)...)
			recs = append(recs, networkRecords(rng, kind, 300)...)
			rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })

			exportBoth(t, rng, kind, 11, recs, checkSegmentTemplates)
		})
	}
}

// tenantRecords are two tenants' identical 5-tuples, in VNIs 100 and 200,
// and the same 5-tuple outside any tunnel.
func tenantRecords() []record.Record {
	k := flow.MakeKey(flow.Key5Tuple, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 6, 40000, 443)
	ts := base.Add(1500 * time.Millisecond).UnixNano()
	return []record.Record{
		{Key: k.WithSegment(100), TimeNs: ts},
		{Key: k.WithSegment(200), TimeNs: ts},
		{Key: k, TimeNs: ts},
	}
}

// TestTwoTenantsIPFIXDump: two tenants' identical addresses in VNIs 100
// and 200 arrive at libfixbuf's ipfixDump as two records, whose
// layer2SegmentId it names and shows as 0x0100000000000064 and
// 0x01000000000000c8 (type 0x01 VxLAN, VNI 100 and 200: computed by
// hand), and the same addresses without a segment as a third record
// without the element.
func TestTwoTenantsIPFIXDump(t *testing.T) {
	bin, err := exec.LookPath("ipfixDump")
	if err != nil {
		testutil.SkipOrFail(t, "ipfixDump is not installed (Debian package libfixbuf-tools): %v", err)
	}
	tcp := newTCPCollector(t, "127.0.0.1:0")
	e := newDestination(t, ipfix.Config{Network: "tcp", Address: tcp.addr(), Kind: flow.Key5Tuple, ObservationDomain: 1})
	if err := e.Records(&record.Batch{ID: 1, Records: tenantRecords()}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	stream := tcp.waitStreams(t, "the exporter to close", func(s [][]byte, ended []bool) bool {
		return len(ended) == 1 && ended[0]
	})[0]
	path := filepath.Join(t.TempDir(), "tenants.ipfix")
	if err := os.WriteFile(path, stream, 0o644); err != nil {
		t.Fatal(err)
	}
	var flows []wireFlow
	for _, m := range ipfixDump(t, bin, path) {
		flows = append(flows, m.Flows...)
	}
	segs := map[uint64]int{}
	for _, f := range flows {
		if f.Src != netip.MustParseAddr("10.0.0.1") || f.Dst != netip.MustParseAddr("10.0.0.2") || f.SrcPort != 40000 || f.DstPort != 443 || f.Proto != 6 {
			t.Errorf("ipfixDump shows %+v, not the tenants' 5-tuple", f)
		}
		segs[f.Seg]++
	}
	if want := map[uint64]int{0x0100000000000064: 1, 0x01000000000000c8: 1, 0: 1}; len(flows) != 3 || !equalCounts(segs, want) {
		t.Errorf("ipfixDump shows %d records with layer2SegmentId %v, want %v", len(flows), segs, want)
	}
	out, err := exec.Command(bin, "-i", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(regexp.MustCompile(`\(351\)\s+layer2SegmentId : `).FindAll(out, -1)); n != 2 {
		t.Errorf("ipfixDump names layer2SegmentId %d times, want 2 (the two tenants' records):\n%s", n, out)
	}
}

func equalCounts(a, b map[uint64]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestNfcapdSegments: nfcapd stores, and nfdump reads back, every record
// of an export of keys with a segment, with their addresses, protocol,
// ports and times, and no error (nfdump 1.7 keeps no layer2SegmentId: it
// shows the two tenants' records as two flows of the same addresses; see
// docs/export.md).
func TestNfcapdSegments(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind.String(), func(t *testing.T) {
			col := servers.StartNfcapd(t)
			rng := rand.New(rand.NewPCG(uint64(kind), 41))
			recs := append(segmentRecords(rng, kind, 2000), randRecords(rng, kind, 200, 1)...)
			if kind == flow.Key5Tuple {
				recs = append(recs, tenantRecords()...)
			}
			e := newDestination(t, ipfix.Config{Network: "udp", Address: col.Addr, Kind: kind, ObservationDomain: 6})
			sendBatches(t, e, rng, recs, func() { col.WaitRead(t) })
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			want := make(map[servers.NfdumpFlow]int)
			for i := range recs {
				f := nfdumpView(&recs[i])
				if bits := recs[i].Key.Bits(); bits >= 0 {
					if kind != flow.KeyDst {
						f.SrcMask = uint8(bits)
					}
					if kind != flow.KeySrc {
						f.DstMask = uint8(bits)
					}
				}
				want[f]++
			}
			got := col.Flows(t)
			for i, f := range got {
				if want[f] == 0 {
					t.Fatalf("nfdump shows flow %d, %+v, which was not exported (or more often)", i, f)
				}
				want[f]--
			}
			if len(got) != len(recs) {
				t.Errorf("nfdump shows %d flows, exported %d", len(got), len(recs))
			}
		})
	}
}

// TestNoAllocsSegments: encoding and sending records with a segment, mixed
// with records without one, allocates nothing in steady state.
func TestNoAllocsSegments(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	e := newDestination(t, ipfix.Config{Network: "udp", Address: sinkUDP(t), Kind: flow.Key5Tuple, MessageSize: 1400})
	rng := rand.New(rand.NewPCG(5, 6))
	recs := append(segmentRecords(rng, flow.Key5Tuple, 1000), randRecords(rng, flow.Key5Tuple, 500, 1)...)
	batch := &record.Batch{ID: 1, Records: recs}
	var err error
	allocs := testing.AllocsPerRun(100, func() {
		if err == nil {
			err = e.Records(batch)
		}
		if err == nil {
			err = e.Flush()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("%.1f allocations per batch of %d records (and a Flush)", allocs, len(recs))
	}
	if st := e.Stats(); st.Messages < 100 {
		t.Errorf("only %d messages sent: the runs did not send", st.Messages)
	}
}

// TestSegmentTemplateBytes: the template of src keys of IPv4 hosts is the
// one sent before segments existed, and the same keys with a segment have
// template 276 with layer2SegmentId (351 = 0x015f, 8 bytes) after the
// address; a record of VNI 100 carries 0x0100000000000064. The bytes are
// written by hand from RFC 7011 section 3.4.1 and docs/export.md.
func TestSegmentTemplateBytes(t *testing.T) {
	tcp := newTCPCollector(t, "127.0.0.1:0")
	e := newDestination(t, ipfix.Config{Network: "tcp", Address: tcp.addr(), Kind: flow.KeySrc})
	k := flow.MakeKey(flow.KeySrc, netip.MustParseAddr("10.0.0.1"), netip.Addr{}, 0, 0, 0)
	ts := time.UnixMilli(0x0102030405).UnixNano()
	recs := []record.Record{{Key: k, TimeNs: ts}, {Key: k.WithSegment(100), TimeNs: ts}}
	if err := e.Records(&record.Batch{ID: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	stream := tcp.waitStreams(t, "the exporter to close", func(s [][]byte, ended []bool) bool {
		return len(ended) == 1 && ended[0]
	})[0]
	ms := []byte{0, 0, 0, 0x01, 0x02, 0x03, 0x04, 0x05}
	for _, c := range []struct {
		what string
		b    []byte
	}{
		{"the template of src IPv4 hosts (256: sourceIPv4Address, flowStartMilliseconds, flowEndMilliseconds)",
			[]byte{0, 2, 0, 20, 1, 0, 0, 3, 0, 8, 0, 4, 0, 152, 0, 8, 0, 153, 0, 8}},
		{"the template of src IPv4 hosts with a segment (276: sourceIPv4Address, layer2SegmentId, flowStartMilliseconds, flowEndMilliseconds)",
			[]byte{0, 2, 0, 24, 1, 20, 0, 4, 0, 8, 0, 4, 1, 0x5f, 0, 8, 0, 152, 0, 8, 0, 153, 0, 8}},
		{"the data set of the record without a segment", append([]byte{1, 0, 0, 24, 10, 0, 0, 1}, append(ms, ms...)...)},
		{"the data set of the record in VNI 100", append([]byte{1, 20, 0, 32, 10, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 100}, append(ms, ms...)...)},
	} {
		if !bytes.Contains(stream, c.b) {
			t.Errorf("the stream has no %s, % x:\n% x", c.what, c.b, stream)
		}
	}
}

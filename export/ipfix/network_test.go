package ipfix_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/netsampler/goflow2/v2/decoders/netflow"

	"github.com/flowdedup/flowdedup/export/ipfix"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/record"
)

// networkRecords returns n records of kind whose keys are by network, each
// masked to random prefix lengths (0-32, 0-128): every length goes out.
func networkRecords(rng *rand.Rand, kind flow.KeyKind, n int) []record.Record {
	recs := randRecords(rng, kind, n, 2)
	for i := range recs {
		m, err := flow.MakeMask(rng.IntN(33), rng.IntN(129))
		if err != nil {
			panic(err)
		}
		m.Apply(&recs[i].Key)
	}
	return recs
}

// TestNetworkKeys exports keys by network (--prefix) of every kind over UDP
// and TCP: each address goes out with its prefix length element
// (sourceIPv4PrefixLength 9, destinationIPv4PrefixLength 13,
// sourceIPv6PrefixLength 29, destinationIPv6PrefixLength 30), in templates
// of their own, which goflow2 and libfixbuf's ipfixDump both read back
// field by field. Host records of the same run keep their templates.
func TestNetworkKeys(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(kind), 29))
			recs := append(networkRecords(rng, kind, 3000), randRecords(rng, kind, 300, 1)...)
			rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })

			udp := newUDPCollector(t, "udp4", "127.0.0.1:0")
			e := newDestination(t, ipfix.Config{Network: "udp", Address: udp.addr(), Kind: kind, ObservationDomain: 9, MessageSize: 1400})
			sendBatches(t, e, rng, recs, nil)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			dgrams := udp.waitDatagrams(t, int(e.Stats().Messages))
			msgs := decodeDatagrams(t, dgrams)
			checkSession(t, msgs, 9)
			sameFlows(t, "goflow2, UDP", allFlows(msgs), wantAll(recs))

			if bin, err := exec.LookPath("ipfixDump"); err != nil {
				testutil.SkipOrFail(t, "ipfixDump is not installed (Debian package libfixbuf-tools): %v", err)
			} else {
				path := filepath.Join(t.TempDir(), "export.ipfix")
				if err := os.WriteFile(path, bytes.Join(dgrams, nil), 0o644); err != nil {
					t.Fatal(err)
				}
				var flows []wireFlow
				for _, m := range ipfixDump(t, bin, path) {
					flows = append(flows, m.Flows...)
				}
				sameFlows(t, "ipfixDump", flows, wantAll(recs))
			}

			tcp := newTCPCollector(t, "127.0.0.1:0")
			e = newDestination(t, ipfix.Config{Network: "tcp", Address: tcp.addr(), Kind: kind, ObservationDomain: 9})
			sendBatches(t, e, rng, recs, nil)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			stream := tcp.waitStreams(t, "the exporter to close", func(s [][]byte, ended []bool) bool {
				return len(ended) == 1 && ended[0]
			})[0]
			msgs = decodeStream(t, stream, netflow.CreateTemplateSystem())
			checkSession(t, msgs, 9)
			sameFlows(t, "goflow2, TCP", allFlows(msgs), wantAll(recs))
		})
	}
}

// TestNfcapdNetworks: nfdump, reading what nfcapd stored of an export of
// keys by network, shows each network's address with its prefix length
// (src_mask, dst_mask).
func TestNfcapdNetworks(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind.String(), func(t *testing.T) {
			col := testutil.StartNfcapd(t)
			rng := rand.New(rand.NewPCG(uint64(kind), 31))
			recs := networkRecords(rng, kind, 2000)
			e := newDestination(t, ipfix.Config{Network: "udp", Address: col.Addr, Kind: kind, ObservationDomain: 4})
			sendBatches(t, e, rng, recs, func() { col.WaitRead(t) })
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			want := make(map[testutil.NfdumpFlow]int)
			for i := range recs {
				f := nfdumpView(&recs[i])
				bits := uint8(recs[i].Key.Bits())
				if kind != flow.KeyDst {
					f.SrcMask = bits
				}
				if kind != flow.KeySrc {
					f.DstMask = bits
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

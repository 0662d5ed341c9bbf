package ipfix_test

import (
	"math/rand/v2"
	"testing"

	"github.com/flowdedup/flowdedup/export/ipfix"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil/servers"
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

			exportBoth(t, rng, kind, 9, recs, nil)
		})
	}
}

// TestNfcapdNetworks: nfdump, reading what nfcapd stored of an export of
// keys by network, shows each network's address with its prefix length
// (src_mask, dst_mask).
func TestNfcapdNetworks(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind.String(), func(t *testing.T) {
			col := servers.StartNfcapd(t)
			rng := rand.New(rand.NewPCG(uint64(kind), 31))
			recs := networkRecords(rng, kind, 2000)
			e := newDestination(t, ipfix.Config{Network: "udp", Address: col.Addr, Kind: kind, ObservationDomain: 4})
			sendBatches(t, e, rng, recs, func() { col.WaitRead(t) })
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			want := make(map[servers.NfdumpFlow]int)
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

package ipfix_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/export/ipfix"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/record"
)

// nfdumpView is what nfdump must show for r: the key's fields, zero where
// the key has none (no ports: ICMP, other portless protocols, non-first
// fragments; no protocol: keys other than 5-tuples; no source or
// destination address: src and dst keys, for which nfdump shows the
// unspecified address of the other's family), and the record's time to the
// millisecond.
func nfdumpView(r *record.Record) testutil.NfdumpFlow {
	k := r.Key
	f := testutil.NfdumpFlow{
		Src: k.Src(), Dst: k.Dst(), Proto: k.Proto(),
		SrcPort: k.SrcPort(), DstPort: k.DstPort(),
		First: time.Unix(0, r.TimeNs).UTC().Truncate(time.Millisecond),
	}
	unspecified := netip.IPv4Unspecified()
	if k.Is6() {
		unspecified = netip.IPv6Unspecified()
	}
	if !f.Src.IsValid() {
		f.Src = unspecified
	}
	if !f.Dst.IsValid() {
		f.Dst = unspecified
	}
	return f
}

// TestNfcapd exports over UDP to a real collector, nfdump's nfcapd, and
// checks that the flows nfdump reads back from its files are the records:
// addresses, protocol, ports and start time to the millisecond, IPv4 and
// IPv6, with nfcapd counting no sequence error and no bad packet.
func TestNfcapd(t *testing.T) {
	for _, c := range []struct {
		kind flow.KeyKind
		size int
	}{
		{flow.Key5Tuple, 0}, // the path MTU of loopback: 64 KiB datagrams
		{flow.Key5Tuple, 1472},
		{flow.KeySrc, 0},
		{flow.KeyDst, 0},
		{flow.KeyPair, 0},
	} {
		t.Run(fmt.Sprintf("%v/size=%d", c.kind, c.size), func(t *testing.T) {
			col := testutil.StartNfcapd(t)
			rng := rand.New(rand.NewPCG(uint64(c.kind), 99))
			recs := randRecords(rng, c.kind, 5000, 3)
			e := newDestination(t, ipfix.Config{Network: "udp", Address: col.Addr, Kind: c.kind, ObservationDomain: 3, MessageSize: c.size})
			// A burst of small datagrams overflows nfcapd's socket buffer:
			// let it read each batch's.
			sendBatches(t, e, rng, recs, func() { col.WaitRead(t) })
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			st := col.Stop(t)
			if st.Flows != uint64(len(recs)) || st.SequenceErrors != 0 || st.BadPackets != 0 || st.Dropped != 0 {
				t.Errorf("nfcapd counted %+v; want %d flows and no errors", st, len(recs))
			}
			got := col.Flows(t)
			want := make(map[testutil.NfdumpFlow]int)
			for i := range recs {
				want[nfdumpView(&recs[i])]++
			}
			bad := 0
			for _, f := range got {
				if want[f] == 0 {
					if bad++; bad <= 5 {
						t.Errorf("nfdump shows a flow not exported: %+v", f)
					}
					continue
				}
				want[f]--
			}
			for f, n := range want {
				if n != 0 {
					if bad++; bad <= 10 {
						t.Errorf("exported %d times more than nfdump shows: %+v", n, f)
					}
				}
			}
			if len(got) != len(recs) {
				t.Errorf("nfdump shows %d flows, exported %d", len(got), len(recs))
			}
			if t.Failed() {
				t.Logf("nfcapd:\n%s", col.Output())
			}
		})
	}
}

package pipeline

import (
	"net/netip"
	"testing"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// TestPrefix: with Config.Prefix, the records are the networks of the
// packets' sources, once each, whether the pipeline parsed the frames or
// a source handed it host keys (collect's records) or keys it had masked
// itself (the XDP program).
func TestPrefix(t *testing.T) {
	mask, err := flow.ParseMask("24,64")
	if err != nil {
		t.Fatal(err)
	}
	var pkts []pkt
	var keys []capture.Packet
	want := map[flow.Key]bool{}
	for i := range 3000 {
		a := addr(i * 7) // 10.0.0.0 + 7i: 3000 hosts in 83 /24s
		pkts = append(pkts, pkt{data: srcFrame(i * 7), t: t0 + int64(i)})
		keys = append(keys, capture.Packet{Key: srcKey(i * 7), TimeNs: t0 + int64(i)})
		n := flow.MakeKey(flow.KeySrc, netip.PrefixFrom(a, 24).Masked().Addr(), netip.Addr{}, 0, 0, 0)
		mask.Apply(&n)
		want[n] = true
	}
	if len(want) != 3000*7/256+1 {
		t.Fatalf("test setup: %d networks", len(want))
	}
	premasked := make([]capture.Packet, len(keys))
	for i, p := range keys {
		mask.Apply(&p.Key)
		premasked[i] = p
	}
	for name, src := range map[string]capture.Source{
		"frames":     newSource(pkts),
		"host keys":  &keySource{keys: keys},
		"masked key": &keySource{keys: premasked},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := Config{Workers: 2, Filter: "exact", Key: flow.KeySrc, Prefix: mask, Seed: 7, BatchSize: 16}
			sink, _ := run(t, cfg, src)
			recs, wins := sink.snapshot()
			sameSet(t, "networks", keySet(t, recs), want)
			for _, r := range recs {
				if r.Key.Bits() != 24 {
					t.Fatalf("record %v: prefix length %d", r.Key, r.Key.Bits())
				}
			}
			if w := wins[0]; w.Keys != 3000 || w.Distinct != uint64(len(want)) {
				t.Errorf("summary: %d keys, %d distinct; want 3000, %d", w.Keys, w.Distinct, len(want))
			}
		})
	}
}

package ipfix_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/netsampler/goflow2/v2/decoders/netflow"

	"github.com/flowdedup/flowdedup/export/ipfix"
)

// TestRoundTripProperty: for random records, key kinds, message sizes,
// batch sizes and flush points, over UDP and TCP, goflow2 decodes exactly
// the records given, in well-numbered messages within the size limit.
func TestRoundTripProperty(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x1fe))
		network := []string{"udp", "tcp"}[rng.IntN(2)]
		kind := kinds[rng.IntN(len(kinds))]
		size := 0
		if rng.IntN(4) != 0 {
			// On UDP sizes above 65507, the largest IPv4 UDP payload, are
			// capped: a message over it could not be sent.
			size = ipfix.MinMessageSize + rng.IntN(65535-ipfix.MinMessageSize+1)
		}
		n := rng.IntN(4000)
		if seed == 1 {
			n = 0
		}
		t.Run(fmt.Sprintf("%d/%s/%v/size=%d/n=%d", seed, network, kind, size, n), func(t *testing.T) {
			recs := randRecords(rng, kind, n, 1+rng.IntN(5))
			domain := rng.Uint32()
			cfg := ipfix.Config{Network: network, Kind: kind, ObservationDomain: domain, MessageSize: size}
			var msgs []decodedMessage
			if network == "udp" {
				col := newUDPCollector(t, "udp4", "127.0.0.1:0")
				cfg.Address = col.addr()
				e := newDestination(t, cfg)
				sendBatches(t, e, rng, recs, nil)
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				msgs = decodeDatagrams(t, col.waitDatagrams(t, int(e.Stats().Messages)))
				for i, m := range msgs {
					if m.Length > e.MessageSize() {
						t.Errorf("message %d: %d bytes, limit %d", i, m.Length, e.MessageSize())
					}
				}
			} else {
				col := newTCPCollector(t, "127.0.0.1:0")
				cfg.Address = col.addr()
				e := newDestination(t, cfg)
				sendBatches(t, e, rng, recs, nil)
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				if e.Stats().Messages == 0 {
					return // nothing to send: the exporter never connected
				}
				streams := col.waitStreams(t, "the exporter to close", func(s [][]byte, ended []bool) bool {
					return len(ended) == 1 && ended[0]
				})
				msgs = decodeStream(t, streams[0], netflow.CreateTemplateSystem())
				for i, m := range msgs {
					if m.Length > e.MessageSize() {
						t.Errorf("message %d: %d bytes, limit %d", i, m.Length, e.MessageSize())
					}
				}
			}
			checkSession(t, msgs, domain)
			sameFlows(t, "goflow2", allFlows(msgs), wantAll(recs))
		})
	}
}

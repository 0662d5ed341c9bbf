package netflow

import (
	"bytes"
	"testing"

	gfnetflow "github.com/netsampler/goflow2/v2/decoders/netflow"

	"github.com/flowdedup/flowdedup/collect/collecttest"
)

// benchMessages returns a message of the templates and a message of 30
// flow records (about a 1500-byte datagram: the size routers send) of
// exporter e.
func benchMessages(b *testing.B, e collecttest.Exporter) (templates, data []byte) {
	msgs := e.Encode(exportTime, collecttest.Flows(60, 7, exportTime), 30)
	if len(msgs) != 2 {
		b.Fatalf("%d messages", len(msgs))
	}
	return msgs[0], msgs[1]
}

var benchExporters = []struct {
	name string
	e    collecttest.Exporter
}{
	{"v9", collecttest.Exporter{Version: 9, Boot: exportTime.Add(-1e12)}},
	{"ipfix", collecttest.Exporter{Version: 10, Boot: exportTime.Add(-1e12), Absolute: true}},
}

// BenchmarkDecode decodes a 30-record message with this package and with
// goflow2's decoders (the templates known), reporting ns per record and
// allocations per message: the measurement behind
// docs/decisions/collect-decoders.md.
func BenchmarkDecode(b *testing.B) {
	for _, be := range benchExporters {
		tmpl, data := benchMessages(b, be.e)
		b.Run(be.name+"/flowdedup", func(b *testing.B) {
			s := NewSession(Limits{})
			decodeOne(s, tmpl)
			var m Message
			var r Record
			var n int
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				m.Reset(data, s)
				for m.Next(&r) {
					n++
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/record")
		})
		b.Run(be.name+"/goflow2", func(b *testing.B) {
			ts := gfnetflow.CreateTemplateSystem()
			var v9 gfnetflow.NFv9Packet
			var ipfix gfnetflow.IPFIXPacket
			if err := gfnetflow.DecodeMessageVersion(bytes.NewBuffer(tmpl), ts, &v9, &ipfix); err != nil {
				b.Fatal(err)
			}
			var n int
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := gfnetflow.DecodeMessageVersion(bytes.NewBuffer(data), ts, &v9, &ipfix); err != nil {
					b.Fatal(err)
				}
				sets := v9.FlowSets
				if be.e.Version == 10 {
					sets = ipfix.FlowSets
				}
				for _, s := range sets {
					if d, ok := s.(gfnetflow.DataFlowSet); ok {
						n += len(d.Records)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/record")
		})
	}
}

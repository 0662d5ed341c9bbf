package pipeline

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
)

// memSource replays pre-built frames, cycling, for a fixed number of
// packets: the cheapest possible Source, so the benchmark measures the
// pipeline.
type memSource struct {
	frames [][]byte
	i      int
	left   int
	t      int64
}

func (s *memSource) Next(p *capture.Packet) error {
	if s.left == 0 {
		return io.EOF
	}
	s.left--
	if s.i == len(s.frames) {
		s.i = 0
	}
	p.Data = s.frames[s.i]
	p.WireLen = len(p.Data)
	p.LinkType = flow.LinkEthernet
	p.TimeNs = s.t
	s.t += 100 // 10 Mpps of packet time
	s.i++
	return nil
}

func (s *memSource) Close() error { return nil }

// benchFrames returns n Ethernet/IPv4/UDP frames over the given number of
// distinct 5-tuples.
func benchFrames(n, flows int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	tuples := make([][]byte, flows)
	for i := range tuples {
		var s, d [4]byte
		for j := range s {
			s[j], d[j] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		tuples[i] = udpFrame(netip.AddrFrom4(s), netip.AddrFrom4(d), uint16(rng.Uint32()), uint16(rng.Uint32()))
	}
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = tuples[rng.IntN(flows)]
	}
	return frames
}

// BenchmarkPipeline runs one source of 2^20 packets (65536 frames over
// 16384 5-tuples, replayed) through the whole pipeline: parse, hash, shard,
// rings, qht:mem=1MiB per worker, collator, a Sink that counts. One
// iteration is one Run, setup included; Mpps is packets over wall time.
func BenchmarkPipeline(b *testing.B) {
	const packets = 1 << 20
	frames := benchFrames(1<<16, 1<<14)
	prefix, err := flow.ParseMask("24,64")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		workers int
		prefix  flow.Mask // keys by network (--prefix 24,64) beside hosts
	}{{1, flow.Mask{}}, {2, flow.Mask{}}, {1, prefix}, {2, prefix}} {
		name := fmt.Sprintf("workers=%d", c.workers)
		if !c.prefix.IsZero() {
			name += ",prefix=" + c.prefix.String()
		}
		workers := c.workers
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			runs := 0
			for b.Loop() {
				p, err := New(Config{Workers: workers, Filter: "qht:mem=1MiB", Key: flow.Key5Tuple, Prefix: c.prefix, Seed: 1}, &countSink{})
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Run(b.Context(), &memSource{frames: frames, left: packets}); err != nil {
					b.Fatal(err)
				}
				runs++
			}
			s := b.Elapsed().Seconds()
			b.ReportMetric(float64(runs*packets)/s/1e6, "Mpps")
			b.ReportMetric(s*1e9/float64(runs*packets), "ns/pkt")
		})
	}
}

// BenchmarkProducerOnly is the producer's unavoidable share, on one core:
// read a frame, parse, hash, pick the shard, store the key in a batch; no
// rings or filters. It bounds what the pipeline can reach with one source.
// "in-place" is what the producer does (Key.Decode, flow.HashKey), and
// "in-place-prefix" with --prefix 24,64 (flow.Mask.Apply between them);
// "by-value" is the same with flow.Parse and Key.Hash, whose copies of the
// key just written stall the CPU (see flow.HashKey).
func BenchmarkProducerOnly(b *testing.B) {
	frames := benchFrames(1<<16, 1<<14)
	keys := make([]flow.Key, DefaultBatchSize)
	b.Run("in-place", func(b *testing.B) { benchInPlace(b, frames, keys, nil) })
	b.Run("in-place-prefix", func(b *testing.B) { // in-place with --prefix 24,64
		m, err := flow.ParseMask("24,64")
		if err != nil {
			b.Fatal(err)
		}
		benchInPlace(b, frames, keys, &m)
	})
	b.Run("by-value", func(b *testing.B) {
		src := &memSource{frames: frames, left: -1}
		var pkt capture.Packet
		var sum uint64
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			src.Next(&pkt)
			k, err := flow.Parse(pkt.Data, pkt.LinkType, flow.Key5Tuple)
			if err != nil {
				b.Fatal(err)
			}
			h := k.Hash(1)
			sum += uint64(flow.ShardOf(h, 2))
			keys[n%len(keys)] = k
			n++
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds()/1e6, "Mpps")
		_ = sum
	})
}

// benchInPlace is BenchmarkProducerOnly's in-place loop: Key.Decode, the
// mask when m is not nil (a loop-invariant branch, predicted), flow.HashKey
// and the shard, each key stored as the producer stores it.
func benchInPlace(b *testing.B, frames [][]byte, keys []flow.Key, m *flow.Mask) {
	src := &memSource{frames: frames, left: -1}
	var pkt capture.Packet
	var key flow.Key
	var sum uint64
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		src.Next(&pkt)
		if err := key.Decode(pkt.Data, pkt.LinkType, flow.Key5Tuple); err != nil {
			b.Fatal(err)
		}
		if m != nil {
			m.Apply(&key)
		}
		h := flow.HashKey(&key, 1)
		sum += uint64(flow.ShardOf(h, 2))
		keys[n%len(keys)] = key
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds()/1e6, "Mpps")
	_ = sum
}

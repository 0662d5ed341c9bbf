package ipfix_test

import (
	"io"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/flowdedup/flowdedup/export/ipfix"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/report"
)

// sinkUDP returns the address of a loopback UDP socket that nobody reads:
// sends to it succeed, and the kernel drops what its buffer cannot hold.
func sinkUDP(tb testing.TB) string {
	tb.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c.LocalAddr().String()
}

// sinkTCP returns the address of a loopback TCP listener that reads and
// discards everything.
func sinkTCP(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	tb.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// TestNoAllocs: in steady state, encoding and sending records allocates
// nothing, on UDP and TCP, for every template (IPv4 and IPv6, with and
// without ports, of hosts and of networks), with batches of the Destination's own observation domain
// and of another (spooled by an earlier run) in turn.
func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			addr := sinkUDP(t)
			if network == "tcp" {
				addr = sinkTCP(t)
			}
			e := newDestination(t, ipfix.Config{Network: network, Address: addr, Kind: flow.Key5Tuple, MessageSize: 1400})
			rng := rand.New(rand.NewPCG(1, 2))
			recs := append(randRecords(rng, flow.Key5Tuple, 1000, 1), networkRecords(rng, flow.Key5Tuple, 500)...)
			batch := &record.Batch{ID: 1, Records: recs}
			spooled := &record.Batch{ID: 2, Records: recs, Domain: record.Domain{ID: 7, Valid: true}}
			var err error
			allocs := testing.AllocsPerRun(100, func() {
				for _, b := range []*record.Batch{batch, spooled} {
					if err == nil {
						err = e.Records(b)
					}
					if err == nil {
						err = e.Flush()
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if allocs != 0 {
				t.Errorf("%.1f allocations per two batches of %d records (and a Flush each)", allocs, len(recs))
			}
			if st := e.Stats(); st.Messages < 100 {
				t.Errorf("only %d messages sent: the runs did not send", st.Messages)
			}
		})
	}
}

// BenchmarkRecords measures records/s of a batch of 4096 IPv4 and IPv6
// 5-tuples (TCP, UDP, SCTP, ICMP, fragments), sent to a loopback socket
// over UDP (1472-byte messages, an Ethernet path) and over TCP, with the
// jsonl RecordWriter writing to io.Discard as the reference in the same
// run.
func BenchmarkRecords(b *testing.B) {
	recs := randRecords(rand.New(rand.NewPCG(3, 4)), flow.Key5Tuple, 4096, 1)
	batch := &record.Batch{ID: 1, Records: recs}
	report1 := func(b *testing.B) {
		b.ReportMetric(float64(b.N)*float64(len(recs))/b.Elapsed().Seconds(), "records/s")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(recs)), "ns/record")
	}
	b.Run("jsonl-discard", func(b *testing.B) {
		w, err := report.NewRecordWriter(io.Discard, "jsonl", flow.Key5Tuple)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			for i := range recs {
				if err := w.Record(&recs[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
		report1(b)
	})
	for _, c := range []struct {
		network string
		size    int
	}{{"udp", 1472}, {"udp", 0}, {"tcp", 0}} {
		name := "ipfix-" + c.network
		if c.network == "udp" {
			name += map[bool]string{true: "-loopback-mtu", false: "-1472"}[c.size == 0]
		}
		b.Run(name, func(b *testing.B) {
			addr := sinkUDP(b)
			if c.network == "tcp" {
				addr = sinkTCP(b)
			}
			e, err := ipfix.New(ipfix.Config{Network: c.network, Address: addr, Kind: flow.Key5Tuple, MessageSize: c.size})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			b.ReportAllocs()
			for b.Loop() {
				if err := e.Records(batch); err != nil {
					b.Fatal(err)
				}
			}
			report1(b)
		})
	}
}

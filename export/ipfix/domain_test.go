package ipfix_test

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/netsampler/goflow2/v2/decoders/netflow"

	"github.com/flowdedup/flowdedup/export/ipfix"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
	"github.com/flowdedup/flowdedup/record"
)

// domainBatch is a batch of the domain test: its domain and records.
type domainBatch struct {
	domain record.Domain
	recs   []record.Record
	flush  bool // Flush after it
}

// TestBatchDomain: a Destination configured with observation domain 9 is
// given batches of its own (without a domain, and with domain 9), of
// domain 7 (spooled by a run with --observation-domain 7) and of domain 0
// (a domain, not "none"), interleaved, some flushed and some left to share
// the Destination's buffers with the next. Over UDP and TCP, goflow2 and
// libfixbuf's ipfixDump, two decoders that keep templates per domain (RFC
// 7011 section 3.4.1) and fail a data set whose domain has not defined its
// template, read every message; in each domain the sequence numbers count
// that domain's data records from 0 (section 3.1; ipfixDump warns of
// any other), each data set's template was defined in that domain before
// or in its message, on TCP once per domain, and the records are those of
// the batches of that domain, once each.
func TestBatchDomain(t *testing.T) {
	dump, dumpErr := exec.LookPath("ipfixDump")
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 9))
			own, seven, zero := record.Domain{}, record.Domain{ID: 7, Valid: true}, record.Domain{ID: 0, Valid: true}
			nine := record.Domain{ID: 9, Valid: true}
			var batches []domainBatch
			for i, d := range []record.Domain{seven, seven, own, zero, seven, nine, own, zero, seven, own} {
				// Every 5-tuple template (IPv4 and IPv6, with and without
				// ports) in every domain.
				batches = append(batches, domainBatch{d, randRecords(rng, flow.Key5Tuple, 150+rng.IntN(300), 1), i%3 != 1})
			}
			cfg := ipfix.Config{Network: network, Kind: flow.Key5Tuple, ObservationDomain: 9, MessageSize: 1400}
			var stream []byte
			var msgs []decodedMessage
			send := func(e *ipfix.Destination) {
				for i, b := range batches {
					if err := e.Records(&record.Batch{ID: uint64(i + 1), Records: b.recs, Domain: b.domain}); err != nil {
						t.Fatal(err)
					}
					if b.flush {
						if err := e.Flush(); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if network == "tcp" {
				col := newTCPCollector(t, "127.0.0.1:0")
				cfg.Address = col.addr()
				e := newDestination(t, cfg)
				send(e)
				stream = col.waitStreams(t, "the exporter to close", func(s [][]byte, ended []bool) bool {
					return len(ended) == 1 && ended[0]
				})[0]
				msgs = decodeStream(t, stream, netflow.CreateTemplateSystem())
			} else {
				col := newUDPCollector(t, "udp4", "127.0.0.1:0")
				cfg.Address = col.addr()
				e := newDestination(t, cfg)
				send(e)
				dgrams := col.waitDatagrams(t, int(e.Stats().Messages))
				stream = bytes.Join(dgrams, nil)
				msgs = decodeDatagrams(t, dgrams)
			}

			wantByDomain := map[uint32][]wireFlow{}
			for _, b := range batches {
				d := b.domain.Or(9)
				wantByDomain[d] = append(wantByDomain[d], wantAll(b.recs)...)
			}
			byDomain := map[uint32][]decodedMessage{}
			for _, m := range msgs {
				byDomain[m.Domain] = append(byDomain[m.Domain], m)
			}
			if got := slices.Sorted(maps.Keys(byDomain)); !slices.Equal(got, []uint32{0, 7, 9}) {
				t.Errorf("messages of domains %v, want 0, 7 and 9", got)
			}
			for d, ms := range byDomain {
				checkSession(t, ms, d)
				sameFlows(t, fmt.Sprintf("goflow2, domain %d", d), allFlows(ms), wantByDomain[d])
				if network == "tcp" {
					// TCP: each template once per domain and connection
					// (RFC 7011 section 8.3), and all four were used.
					seen := map[uint16]int{}
					for _, m := range ms {
						for _, id := range m.Templates {
							seen[id]++
						}
					}
					if len(seen) != 4 {
						t.Errorf("domain %d: templates %v sent, want the 4 of 5-tuples", d, seen)
					}
					for id, n := range seen {
						if n != 1 {
							t.Errorf("domain %d: template %d sent %d times on one connection", d, id, n)
						}
					}
				}
			}

			if dumpErr != nil {
				testutil.SkipOrFail(t, "ipfixDump is not installed (Debian package libfixbuf-tools): %v", dumpErr)
			}
			path := filepath.Join(t.TempDir(), "export.ipfix")
			if err := os.WriteFile(path, stream, 0o644); err != nil {
				t.Fatal(err)
			}
			dumped := ipfixDump(t, dump, path) // fails on a sequence or template warning
			if len(dumped) != len(msgs) {
				t.Errorf("ipfixDump read %d messages, goflow2 %d", len(dumped), len(msgs))
			}
			dumpByDomain := map[uint32][]wireFlow{}
			for _, m := range dumped {
				dumpByDomain[m.Domain] = append(dumpByDomain[m.Domain], m.Flows...)
			}
			for d, want := range wantByDomain {
				sameFlows(t, fmt.Sprintf("ipfixDump, domain %d", d), dumpByDomain[d], want)
			}
			if len(dumpByDomain) != len(wantByDomain) {
				t.Errorf("ipfixDump shows records of %d domains, want %d", len(dumpByDomain), len(wantByDomain))
			}
		})
	}
}

package netflow

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/collect/collecttest"
	"github.com/flowdedup/flowdedup/internal/testutil/testexporter"
)

// writeSeeds rewrites the seed corpus of FuzzMessages from the real
// exporters: go test ./collect/netflow -run TestSoftflowd -write-seeds
var writeSeeds = flag.Bool("write-seeds", false, "write softflowd's datagrams to testdata/fuzz/FuzzMessages")

// joinMessages frames messages as FuzzMessages takes them: each preceded
// by its length, 2 bytes big endian.
func joinMessages(msgs [][]byte) []byte {
	var b []byte
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
		b = append(b, m...)
	}
	return b
}

// splitMessages undoes joinMessages; a length past the end takes what is
// left.
func splitMessages(b []byte) [][]byte {
	var msgs [][]byte
	for len(b) >= 2 {
		n := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		n = min(n, len(b))
		msgs = append(msgs, b[:n])
		b = b[n:]
	}
	return msgs
}

// TestSoftflowd decodes what softflowd exports from a testdata capture, as
// NetFlow v5, v9 and IPFIX, and checks that goflow2's decoders read the
// same records from the same datagrams, and that every flow softflowd
// says it exported is there. With -write-seeds it writes the datagrams to
// the seed corpus of FuzzMessages.
func TestSoftflowd(t *testing.T) {
	for _, capture := range []string{"small.pcap", "ipv6.pcap"} {
		for _, v := range []int{5, 9, 10} {
			t.Run(fmt.Sprintf("%s/v%d", capture, v), func(t *testing.T) {
				msgs := testexporter.CaptureSoftflowd(t, filepath.Join("..", "..", "testdata", "pcaps", capture), v)
				if len(msgs) == 0 {
					t.Fatal("softflowd sent nothing")
				}
				s := NewSession(Limits{})
				got := decodeAll(t, s, msgs)
				ref := newReference()
				var want []Record
				for i, msg := range msgs {
					rs, err := ref.decode(msg)
					if err != nil {
						t.Fatalf("goflow2: message %d: %v", i, err)
					}
					want = append(want, rs...)
				}
				sameRecords(t, "goflow2", got, want)
				if s.Stats.Errors != [NumReasons]uint64{} {
					t.Errorf("errors %v, want none", s.Stats.Errors)
				}
				for _, d := range s.domains {
					if d.Seq.Lost != 0 || d.Seq.Resets != 0 || d.Seq.Reordered != 0 {
						t.Errorf("domain %d: sequence %+v, want no loss", d.ID, d.Seq)
					}
				}
				if *writeSeeds {
					name := filepath.Join("testdata", "fuzz", "FuzzMessages", fmt.Sprintf("softflowd-%s-v%d", capture, v))
					writeCorpusFile(t, name, joinMessages(msgs))
				}
			})
		}
	}
}

// writeCorpusFile writes b as a corpus entry of a []byte fuzz target.
func writeCorpusFile(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// FuzzMessages decodes a run of messages of one exporter (each preceded
// by its length: joinMessages) and checks that nothing panics, that every
// record is whole (both addresses valid and of one family when both are
// there), and that wherever goflow2's decoders read a message without an
// error and this package counted none, both read the same records. The
// seeds are what softflowd exports (TestSoftflowd -write-seeds, in
// testdata) and the messages of collecttest's exporters.
func FuzzMessages(f *testing.F) {
	now := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	flows := collecttest.Flows(40, 9, now)
	for _, e := range exporters() {
		f.Add(joinMessages(e.Encode(now, flows, 20)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := NewSession(Limits{MaxTemplates: 8, MaxDomains: 4})
		ref := newReference()
		var m Message
		for _, msg := range splitMessages(b) {
			before := s.Stats.Errors
			var got []Record
			if m.Reset(msg, s) == nil {
				var r Record
				for m.Next(&r) {
					got = append(got, r)
				}
			}
			want, err := ref.decode(msg)
			if err != nil || s.Stats.Errors != before || len(s.templates) > 8 || len(s.domains) > 4 {
				continue // goflow2 or this package found fault; templates may now differ
			}
			if len(got) != len(want) {
				t.Fatalf("%d records, goflow2 %d", len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("record %d:\n got %+v\nwant %+v (goflow2)", i, got[i], want[i])
				}
			}
		}
		if len(s.templates) > 8 || len(s.domains) > 4 {
			t.Fatalf("%d templates, %d domains: over the limits", len(s.templates), len(s.domains))
		}
	})
}

package netflow

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/collect/collecttest"
)

// exportTime is when the test exporters send: a whole second, as the v9
// and IPFIX headers have no finer clock.
var exportTime = time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)

// wantRecord is the record Next should give for f.
func wantRecord(f *collecttest.Flow) Record {
	r := Record{Src: f.Src, Dst: f.Dst, Proto: f.Proto, HasProto: true, HasPorts: true, StartNs: f.Start.UnixNano()}
	r.SrcPort, r.DstPort = f.SrcPort, f.DstPort
	return r
}

// decodeAll decodes msgs in one session and returns the records.
func decodeAll(tb testing.TB, s *Session, msgs [][]byte) []Record {
	tb.Helper()
	var m Message
	var recs []Record
	for i, msg := range msgs {
		if err := m.Reset(msg, s); err != nil {
			tb.Fatalf("message %d: %v", i, err)
		}
		var r Record
		for m.Next(&r) {
			recs = append(recs, r)
		}
	}
	return recs
}

// exporters are the configurations every version test runs.
func exporters() []collecttest.Exporter {
	boot := exportTime.Add(-time.Hour)
	return []collecttest.Exporter{
		{Version: 5, Boot: boot, Domain: 0x0102},
		{Version: 9, Boot: boot, Domain: 7},
		{Version: 9, Boot: boot, Domain: 7, SamplingRate: 100, TemplateEvery: 3},
		{Version: 10, Boot: boot, Domain: 7},
		{Version: 10, Boot: boot, Domain: 7, Absolute: true, TemplateEvery: 2},
		{Version: 10, Boot: boot, Domain: 7, Absolute: true, SamplingRate: 8},
	}
}

func exporterName(e *collecttest.Exporter) string {
	return fmt.Sprintf("v%d/abs=%v/sampling=%d", e.Version, e.Absolute, e.SamplingRate)
}

// TestDecode checks every field the decoder reads against the flows the
// messages were made of, and against goflow2's decoders on the same bytes.
func TestDecode(t *testing.T) {
	flows := collecttest.Flows(200, 1, exportTime)
	for _, e := range exporters() {
		t.Run(exporterName(&e), func(t *testing.T) {
			msgs := e.Encode(exportTime, flows, 30)
			s := NewSession(Limits{})
			got := decodeAll(t, s, msgs)
			var want []Record
			for i := range flows {
				if e.Version == 5 && flows[i].Src.Is6() {
					continue // v5 has no IPv6
				}
				want = append(want, wantRecord(&flows[i]))
			}
			if e.Version != 5 {
				want = perMessageFamilyOrder(flows, 30)
			}
			sameRecords(t, "encoded flows", got, want)
			ref := newReference()
			var refRecs []Record
			for i, msg := range msgs {
				rs, err := ref.decode(msg)
				if err != nil {
					t.Fatalf("goflow2: message %d: %v", i, err)
				}
				refRecs = append(refRecs, rs...)
			}
			sameRecords(t, "goflow2", got, refRecs)
			if s.Stats.Errors != [NumReasons]uint64{} {
				t.Errorf("errors %v, want none", s.Stats.Errors)
			}
			if d := s.domains[e.Domain]; d == nil || d.SamplingRate != e.SamplingRate {
				t.Errorf("domain %d: %+v, want sampling rate %d", e.Domain, d, e.SamplingRate)
			} else if d.Seq.Lost != 0 || d.Seq.Reordered != 0 || d.Seq.Resets != 0 {
				t.Errorf("sequence %+v, want no loss", d.Seq)
			}
		})
	}
}

// perMessageFamilyOrder is the order of the records of v9 and IPFIX
// messages of perMessage flows each: in each message, the IPv4 data set,
// then the IPv6 one.
func perMessageFamilyOrder(flows []collecttest.Flow, perMessage int) []Record {
	var want []Record
	for len(flows) > 0 {
		n := min(perMessage, len(flows))
		for _, v6 := range []bool{false, true} {
			for i := range flows[:n] {
				if flows[i].Src.Is6() == v6 {
					want = append(want, wantRecord(&flows[i]))
				}
			}
		}
		flows = flows[n:]
	}
	return want
}

func sameRecords(t *testing.T, what string, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, %s has %d", len(got), what, len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("record %d:\n got %+v\nwant %+v (%s)", i, got[i], want[i], what)
		}
	}
}

// TestSequenceLoss drops messages and checks the loss counted in the unit
// of each protocol: messages for v9, records for v5 and IPFIX.
func TestSequenceLoss(t *testing.T) {
	flows := collecttest.Flows(300, 2, exportTime)
	for _, e := range exporters() {
		t.Run(exporterName(&e), func(t *testing.T) {
			msgs := e.Encode(exportTime, flows, 30)
			s := NewSession(Limits{})
			var m Message
			var lostDatagrams, lostRecords uint64
			for i, msg := range msgs {
				if dropped(i, len(msgs)) {
					lostDatagrams++
					m.Reset(msg, s)
					var r Record
					for m.Next(&r) {
						lostRecords++
					}
					continue
				}
				if err := m.Reset(msg, s); err != nil {
					t.Fatal(err)
				}
				var r Record
				for m.Next(&r) {
				}
			}
			// The session above read the dropped messages too (to count
			// their records): start again without them.
			s = NewSession(Limits{})
			for i, msg := range msgs {
				if dropped(i, len(msgs)) {
					continue
				}
				m.Reset(msg, s)
				var r Record
				for m.Next(&r) {
				}
			}
			want := lostRecords
			if e.Version == 9 {
				want = lostDatagrams
			}
			if d := s.domains[e.Domain]; d.Seq.Lost != want || d.Seq.Reordered != 0 || d.Seq.Resets != 0 {
				t.Errorf("sequence %+v, want %d lost", d.Seq, want)
			}
		})
	}
}

// dropped says which of n messages TestSequenceLoss drops: never the
// first (the templates are in it), nor the last (a loss shows only when a
// later message comes).
func dropped(i, n int) bool { return i%4 == 1 && i < n-1 }

// TestSequenceReorderAndReset: a message that comes late is not loss, and
// an exporter that restarts (its sequence begins again) is a reset.
func TestSequenceReorderAndReset(t *testing.T) {
	e := collecttest.Exporter{Version: 9, Boot: exportTime.Add(-time.Hour)}
	msgs := e.Encode(exportTime, collecttest.Flows(90, 3, exportTime), 30)
	s := NewSession(Limits{})
	var m Message
	for _, i := range []int{0, 2, 1} {
		m.Reset(msgs[i], s)
		var r Record
		for m.Next(&r) {
		}
	}
	restarted := collecttest.Exporter{Version: 9, Boot: exportTime}
	again := restarted.Encode(exportTime, collecttest.Flows(30, 4, exportTime), 30)
	// A sequence far behind: msgs[2] was sequence 2; make the restart
	// start far ahead instead, to check both directions.
	binary.BigEndian.PutUint32(again[0][12:], 5_000_000)
	m.Reset(again[0], s)
	d := s.domains[0]
	if d.Seq.Lost != 1 || d.Seq.Reordered != 1 || d.Seq.Resets != 1 {
		t.Errorf("sequence %+v, want 1 lost (message 1, before it came late), 1 reordered, 1 reset", d.Seq)
	}
}

// TestUptime: a start before a wrap of the exporter's uptime is before the
// export; a start ahead of the export's uptime by less than 2^31 ms is
// after it, as nfdump reads softflowd's export of a capture.
func TestUptime(t *testing.T) {
	var m Message
	m.Header.ExportNs = exportTime.UnixNano()
	for _, tc := range []struct {
		uptime, first uint32
		want          time.Duration // start - export
	}{
		{60_000, 1_000, -59 * time.Second},
		{500, 1<<32 - 1500, -2 * time.Second},                // the uptime wrapped 500 ms before the export
		{0, 1_416_096_833, 1_416_096_833 * time.Millisecond}, // softflowd -r: 16 days ahead
		{0, 1<<31 + 5, -(1<<31 - 5) * time.Millisecond},
	} {
		m.Header.UptimeMs = tc.uptime
		if got := time.Duration(m.uptimeToNs(tc.first) - m.Header.ExportNs); got != tc.want {
			t.Errorf("uptime %d, first %d: start %v from the export, want %v", tc.uptime, tc.first, got, tc.want)
		}
	}
}

package netflow

import (
	"encoding/binary"
	"testing"

	"github.com/flowdedup/flowdedup/collect/collecttest"
)

// ipfixMessage returns an IPFIX message of domain dom holding sets.
func ipfixMessage(dom uint32, sets ...[]byte) []byte {
	b := make([]byte, ipfixHeaderLen)
	binary.BigEndian.PutUint16(b, 10)
	binary.BigEndian.PutUint32(b[4:], uint32(exportTime.Unix()))
	binary.BigEndian.PutUint32(b[12:], dom)
	for _, s := range sets {
		b = append(b, s...)
	}
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	return b
}

// set returns a set of ID id holding body.
func set(id uint16, body ...byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, id)
	b = binary.BigEndian.AppendUint16(b, uint16(4+len(body)))
	return append(b, body...)
}

// tmpl returns a template record: ID, then (element, length) pairs.
func tmpl(id uint16, fields ...uint16) []byte {
	b := binary.BigEndian.AppendUint16(nil, id)
	b = binary.BigEndian.AppendUint16(b, uint16(len(fields)/2))
	for _, f := range fields {
		b = binary.BigEndian.AppendUint16(b, f)
	}
	return b
}

// decodeOne decodes msg in s and returns the records and what Reset said.
func decodeOne(s *Session, msg []byte) ([]Record, error) {
	var m Message
	if err := m.Reset(msg, s); err != nil {
		return nil, err
	}
	var recs []Record
	var r Record
	for m.Next(&r) {
		recs = append(recs, r)
	}
	return recs, nil
}

// TestBadMessages: each kind of damage is counted by its reason, and what
// is whole in the message is still read.
func TestBadMessages(t *testing.T) {
	srcTemplate := set(2, tmpl(300, ieSrcIPv4, 4)...)
	record := set(300, 10, 0, 0, 1)
	tests := []struct {
		name    string
		msgs    [][]byte
		reason  Reason
		records int // records read, from the last message
	}{
		{"empty", [][]byte{nil}, Truncated, 0},
		{"version 5 without header", [][]byte{{0, 5, 0, 1}}, Truncated, 0},
		{"version 5 count past the end", [][]byte{append([]byte{0, 5, 0, 2}, make([]byte, 20+48)...)}, Truncated, 0},
		{"version 9 without header", [][]byte{{0, 9, 0, 0, 0, 0}}, Truncated, 0},
		{"IPFIX without header", [][]byte{{0, 10, 0, 16}}, Truncated, 0},
		{"IPFIX length past the end", [][]byte{func() []byte { m := ipfixMessage(1); m[3] = 200; return m }()}, Truncated, 0},
		{"version 7", [][]byte{{0, 7, 0, 0}}, BadVersion, 0},
		{"set length below 4", [][]byte{ipfixMessage(1, srcTemplate, record, []byte{1, 44, 0, 2})}, BadSet, 1},
		{"set past the end", [][]byte{ipfixMessage(1, srcTemplate, record, []byte{1, 44, 0, 200, 10})}, Truncated, 1},
		{"reserved set ID", [][]byte{ipfixMessage(1, set(7, 0, 0, 0, 0), srcTemplate, record)}, BadSet, 1},
		{"data before its template", [][]byte{ipfixMessage(1, record, srcTemplate, record)}, NoTemplate, 1},
		{"template of another domain", [][]byte{ipfixMessage(1, srcTemplate), ipfixMessage(2, record)}, NoTemplate, 0},
		{"template ID below 256", [][]byte{ipfixMessage(1, set(2, tmpl(255, ieSrcIPv4, 4)...))}, BadTemplate, 0},
		{"address of 3 bytes", [][]byte{ipfixMessage(1, set(2, tmpl(300, ieSrcIPv4, 3)...))}, BadTemplate, 0},
		{"protocol of 2 bytes", [][]byte{ipfixMessage(1, set(2, tmpl(300, ieProtocol, 2)...))}, BadTemplate, 0},
		{"variable-length address", [][]byte{ipfixMessage(1, set(2, tmpl(300, ieSrcIPv4, varLen)...))}, BadTemplate, 0},
		{"records of no length", [][]byte{ipfixMessage(1, set(2, tmpl(300, 1, 0, 2, 0)...))}, BadTemplate, 0},
		{"too many fields", [][]byte{ipfixMessage(1, set(2, tmpl(300, make([]uint16, 2*(DefaultMaxFields+1))...)...))}, BadTemplate, 0},
		{"template cut short", [][]byte{ipfixMessage(1, set(2, tmpl(300, ieSrcIPv4, 4)[:6]...))}, Truncated, 0},
		{"withdrawn template", [][]byte{ipfixMessage(1, srcTemplate), ipfixMessage(1, set(2, 1, 44, 0, 0), record)}, NoTemplate, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSession(Limits{})
			var recs []Record
			for _, msg := range tt.msgs {
				recs, _ = decodeOne(s, msg)
			}
			for r := range NumReasons {
				want := uint64(0)
				if r == tt.reason {
					want = 1
				}
				if s.Stats.Errors[r] != want {
					t.Errorf("%v: %d, want %d (all: %v)", r, s.Stats.Errors[r], want, s.Stats.Errors)
				}
			}
			if len(recs) != tt.records {
				t.Errorf("%d records, want %d", len(recs), tt.records)
			}
		})
	}
}

// TestVariableLength reads a template with variable-length fields (an
// interface name before the addresses) in both length encodings.
func TestVariableLength(t *testing.T) {
	s := NewSession(Limits{})
	tm := set(2, tmpl(300, 82, varLen, ieSrcIPv4, 4, ieProtocol, 1)...)
	long := append([]byte{255, 0, 3, 'e', 't', 'h'}, 10, 0, 0, 2, 17)
	short := append([]byte{2, 'e', 'n'}, 10, 0, 0, 1, 6)
	recs, _ := decodeOne(s, ipfixMessage(1, tm, set(300, append(short, append(long, 0, 0)...)...)))
	if len(recs) != 2 || recs[0].Src.String() != "10.0.0.1" || recs[0].Proto != 6 || recs[1].Src.String() != "10.0.0.2" || recs[1].Proto != 17 {
		t.Errorf("records %+v", recs)
	}
	if s.Stats.Errors != [NumReasons]uint64{} {
		t.Errorf("errors %v", s.Stats.Errors)
	}
}

// TestTemplateFlood: an exporter (or whoever spoofs its address) that sends
// more templates than the Session keeps evicts old ones, counted; the
// templates in use survive the CLOCK.
func TestTemplateFlood(t *testing.T) {
	const max = 8
	s := NewSession(Limits{MaxTemplates: max})
	used := set(2, tmpl(256, ieSrcIPv4, 4)...)
	data := set(256, 10, 0, 0, 9)
	decodeOne(s, ipfixMessage(1, used))
	for id := uint16(300); id < 1300; id++ {
		if recs, _ := decodeOne(s, ipfixMessage(1, set(2, tmpl(id, ieSrcIPv4, 4)...), data)); len(recs) != 1 {
			t.Fatalf("template %d: %d records of the template in use, want 1", id, len(recs))
		}
		if len(s.templates) > max {
			t.Fatalf("%d templates kept, limit %d", len(s.templates), max)
		}
	}
	if s.Stats.TemplatesEvicted != 1000+1-max {
		t.Errorf("%d evicted, want %d", s.Stats.TemplatesEvicted, 1000+1-max)
	}
	if s.Stats.Errors[NoTemplate] != 0 {
		t.Errorf("%d data sets without their template: the template in use was evicted", s.Stats.Errors[NoTemplate])
	}
}

// TestDomainFlood: observation domains beyond the limit evict idle ones,
// counted.
func TestDomainFlood(t *testing.T) {
	const max = 4
	s := NewSession(Limits{MaxDomains: max})
	for d := range uint32(100) {
		decodeOne(s, ipfixMessage(d))
		if len(s.domains) > max {
			t.Fatalf("%d domains kept, limit %d", len(s.domains), max)
		}
	}
	if s.Stats.DomainsEvicted != 100-max {
		t.Errorf("%d evicted, want %d", s.Stats.DomainsEvicted, 100-max)
	}
}

// TestTemplateRefreshNoAlloc: routers resend their templates every few
// messages; a refresh identical to the stored template allocates nothing,
// and decoding a message allocates nothing.
func TestTemplateRefreshNoAlloc(t *testing.T) {
	for _, e := range exporters() {
		t.Run(exporterName(&e), func(t *testing.T) {
			e.TemplateEvery = 1
			msgs := e.Encode(exportTime, collecttest.Flows(60, 5, exportTime), 30)
			s := NewSession(Limits{})
			decodeAll(t, s, msgs[:1])
			var m Message
			var r Record
			n := testing.AllocsPerRun(100, func() {
				m.Reset(msgs[1], s)
				for m.Next(&r) {
				}
			})
			if n != 0 {
				t.Errorf("%.1f allocations per message, want 0", n)
			}
		})
	}
}

// TestThroughNumbering: an exporter that numbers IPFIX records through the
// message (softflowd) is recognised, and then a lost message counts its
// records.
func TestThroughNumbering(t *testing.T) {
	tm := set(2, tmpl(300, ieSrcIPv4, 4)...)
	s := NewSession(Limits{})
	var seq uint32
	for i, n := range []int{3, 1, 4, 1, 5, 9, 2, 6} {
		body := make([]byte, 0, 4*n)
		for range n {
			body = append(body, 10, 0, 0, 1)
		}
		msg := ipfixMessage(1, tm, set(300, body...))
		seq += uint32(n)
		binary.BigEndian.PutUint32(msg[8:], seq) // through this message
		if i == 5 {
			continue // lost: 9 records
		}
		decodeOne(s, msg)
	}
	d := s.domains[1]
	if d.Seq.Lost != 9 || d.Seq.Reordered != 0 || d.Seq.Resets != 0 || !d.Seq.Through() {
		t.Errorf("sequence %+v, want 9 records lost", d.Seq)
	}
}

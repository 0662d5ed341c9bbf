package netflow

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// varOverrun returns an IPFIX message whose template has a
// variable-length field (interfaceName) before a source address, and a
// data set of one whole record and then one whose field claims 200 bytes
// the set does not hold.
func varOverrun() []byte {
	tm := set(2, tmpl(300, 82, varLen, ieSrcIPv4, 4)...)
	whole := []byte{2, 'e', 'n', 10, 0, 0, 1}
	overrun := []byte{200, 'x', 'y', 10, 0, 0, 2}
	return ipfixMessage(1, tm, set(300, append(whole, overrun...)...))
}

// TestVariableLengthOverrun: a variable-length field that runs past its
// set is counted as truncated (issue 25, item 6), the whole record before
// it is read, and the record the exporter numbered but nobody could read
// is not taken for loss in transit when the next message comes.
func TestVariableLengthOverrun(t *testing.T) {
	s := NewSession(Limits{})
	msg := varOverrun()
	binary.BigEndian.PutUint32(msg[8:], 0) // records before it
	recs, err := decodeOne(s, msg)
	if err != nil || len(recs) != 1 || recs[0].Src.String() != "10.0.0.1" {
		t.Fatalf("records %+v, %v; want the whole one, 10.0.0.1", recs, err)
	}
	if s.Stats.Errors[Truncated] != 1 {
		t.Errorf("truncated %d, want 1 (all %v)", s.Stats.Errors[Truncated], s.Stats.Errors)
	}
	next := ipfixMessage(1, set(300, 2, 'e', 'n', 10, 0, 0, 3))
	binary.BigEndian.PutUint32(next[8:], 2) // the exporter sent two records before
	if recs, _ := decodeOne(s, next); len(recs) != 1 {
		t.Fatalf("next message: %d records", len(recs))
	}
	if d := s.domains[1]; d.Seq.Lost != 0 {
		t.Errorf("lost %d, want 0: the record cut short was counted as truncated", d.Seq.Lost)
	}
	// Padding shorter than any record is not an error.
	s2 := NewSession(Limits{})
	pad := ipfixMessage(1, set(2, tmpl(300, 82, varLen, ieSrcIPv4, 4)...), set(300, 2, 'e', 'n', 10, 0, 0, 1, 0, 0, 0))
	if recs, _ := decodeOne(s2, pad); len(recs) != 1 || s2.Stats.Errors != [NumReasons]uint64{} {
		t.Errorf("padded set: %d records, errors %v; want 1 and none", len(recs), s2.Stats.Errors)
	}
}

// absStart returns an IPFIX message of one record of a template with
// flowStartMilliseconds, whose value is ms.
func absStart(ms uint64) []byte {
	tm := set(2, tmpl(300, ieSrcIPv4, 4, ieStartMilliseconds, 8)...)
	rec := binary.BigEndian.AppendUint64([]byte{10, 0, 0, 1}, ms)
	return ipfixMessage(1, tm, set(300, rec...))
}

// TestBadTimes: times that cannot be Unix ns come out as BadTime, for the
// collector to count; those that can are read as they are, even before
// 1970 (issue 25, item 1: the collector decides what is sane).
func TestBadTimes(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  []byte
		want int64
	}{
		{"flowStartMilliseconds 2^64-1", absStart(math.MaxUint64), BadTime},
		{"flowStartMilliseconds past 2262", absStart(1 << 62), BadTime},
		{"flowStartMilliseconds the largest that fits", absStart(9223372036854), 9223372036854 * 1e6},
		{"flowStartMilliseconds 0", absStart(0), 0},
		{"v5 1 ms before the epoch", v5Epoch(), -1e6},
	} {
		recs, err := decodeOne(NewSession(Limits{}), tc.msg)
		if err != nil || len(recs) != 1 || recs[0].StartNs != tc.want {
			t.Errorf("%s: %+v, %v; want one record starting at %d", tc.name, recs, err, tc.want)
		}
	}
}

// v5Epoch returns a NetFlow v5 message of header unix_secs 0, sysUptime 1
// and one record of First 0: a flow 1 ms before 1970.
func v5Epoch() []byte {
	b := make([]byte, v5HeaderLen+v5RecordLen)
	binary.BigEndian.PutUint16(b, 5)
	binary.BigEndian.PutUint16(b[2:], 1)
	binary.BigEndian.PutUint32(b[4:], 1) // sysUptime
	r := b[v5HeaderLen:]
	copy(r, []byte{10, 0, 0, 1, 10, 0, 0, 2})
	r[38] = 6
	return b
}

// TestWriteHostileSeeds adds the hostile messages to FuzzMessages'
// corpus with -write-seeds, and checks that they are there.
func TestWriteHostileSeeds(t *testing.T) {
	seeds := map[string][]byte{
		"var-length-overrun":   joinMessages([][]byte{varOverrun()}),
		"start-ms-max":         joinMessages([][]byte{absStart(math.MaxUint64)}),
		"v5-before-epoch":      joinMessages([][]byte{v5Epoch()}),
		"template-flood-ports": joinMessages(floodMessages(0, 40)),
	}
	for name, b := range seeds {
		path := filepath.Join("testdata", "fuzz", "FuzzMessages", name)
		if *writeSeeds {
			writeCorpusFile(t, path, b)
		}
		if !corpusHas(t, path, b) {
			t.Errorf("%s: not in the corpus (go test -run TestWriteHostileSeeds -write-seeds)", path)
		}
	}
}

// floodMessages returns n IPFIX messages of domain dom, each a template
// of a new ID (from 256) with 60 fields.
func floodMessages(dom uint32, n int) [][]byte {
	var msgs [][]byte
	for i := range n {
		fields := make([]uint16, 0, 120)
		for f := range 60 {
			fields = append(fields, uint16(1000+f), 4)
		}
		msgs = append(msgs, ipfixMessage(dom, set(2, tmpl(uint16(256+i), fields...)...)))
	}
	return msgs
}

// TestBudgetFlood: sessions sharing a Budget flood it with templates; the
// bytes accounted never exceed it, every one is a template held (the sum
// of the Sessions' costs, each at least its record), evictions are
// counted, and the template an exporter uses survives the flood.
func TestBudgetFlood(t *testing.T) {
	const budget = 256 << 10
	b := NewBudget(budget)
	lim := Limits{Budget: b}
	user := NewSession(lim)
	used := set(2, tmpl(256, ieSrcIPv4, 4)...)
	data := set(256, 10, 0, 0, 9)
	decodeOne(user, ipfixMessage(7, used))
	var flooders []*Session
	for range 50 {
		flooders = append(flooders, NewSession(lim))
	}
	msgs := floodMessages(1, 200) // 200 templates of 256 bytes each: 2.5 MB over 50 sessions
	stored := 0
	for i, m := range msgs {
		for _, s := range flooders {
			decodeOne(s, m)
			stored++
			if b.Used() > budget {
				t.Fatalf("message %d: %d bytes held, budget %d", i, b.Used(), budget)
			}
		}
		if recs, _ := decodeOne(user, ipfixMessage(7, data)); len(recs) != 1 {
			t.Fatalf("after %d templates: the template in use is gone (%d records)", stored, len(recs))
		}
	}
	sum, held, raw := user.TemplateBytes(), len(user.templates), 0
	for _, s := range append(flooders, user) {
		if s != user {
			sum += s.TemplateBytes()
			held += len(s.templates)
		}
		for _, tm := range s.templates {
			raw += len(tm.raw)
		}
	}
	if sum != b.Used() {
		t.Errorf("sessions hold %d bytes, the budget says %d", sum, b.Used())
	}
	if int64(raw) > b.Used() || raw < 4+4*60*(held-1) {
		t.Errorf("%d templates of %d bytes of records, %d bytes accounted", held, raw, b.Used())
	}
	if b.Used() < budget/2 {
		t.Errorf("%d bytes held of %d: the budget is not used", b.Used(), budget)
	}
	if ev := b.Evicted(); ev == 0 || int(ev) != stored+1-held {
		t.Errorf("%d evicted, want %d (stored %d, held %d)", ev, stored+1-held, stored+1, held)
	}
	for _, s := range flooders {
		s.Release()
	}
	user.Release()
	if b.Used() != 0 || len(b.ring) != 0 || b.sessions != 0 {
		t.Errorf("released: %d bytes, %d templates, %d sessions left", b.Used(), len(b.ring), b.sessions)
	}
}

// TestBudgetOneFlooder: one session flooding a budget evicts its own
// templates (it holds more than its share), not the others'.
func TestBudgetOneFlooder(t *testing.T) {
	b := NewBudget(64 << 10)
	lim := Limits{Budget: b, MaxTemplates: 1 << 20}
	var quiet []*Session
	for i := range 4 {
		s := NewSession(lim)
		decodeOne(s, ipfixMessage(1, set(2, tmpl(uint16(300+i), ieSrcIPv4, 4)...)))
		quiet = append(quiet, s)
	}
	flood := NewSession(lim)
	for _, m := range floodMessages(1, 2000) {
		decodeOne(flood, m)
		if b.Used() > b.Max() {
			t.Fatalf("%d bytes held, budget %d", b.Used(), b.Max())
		}
	}
	for i, s := range quiet {
		if len(s.templates) != 1 {
			t.Errorf("quiet session %d: %d templates, want its 1", i, len(s.templates))
		}
	}
	if b.Evicted() == 0 || len(flood.templates) >= 2000 {
		t.Errorf("evicted %d, flooder holds %d", b.Evicted(), len(flood.templates))
	}
}

// TestBudgetRedefine: a template redefined larger is charged its new
// size.
func TestBudgetRedefine(t *testing.T) {
	b := NewBudget(1 << 20)
	s := NewSession(Limits{Budget: b})
	decodeOne(s, ipfixMessage(1, set(2, tmpl(300, ieSrcIPv4, 4)...)))
	small := b.Used()
	decodeOne(s, floodMessages(1, 45)[44]) // ID 300, 60 fields
	if big := b.Used(); big < small+4*59 || big != s.TemplateBytes() {
		t.Errorf("%d bytes after redefining a template of %d bytes with 59 fields more (session %d)", big, small, s.TemplateBytes())
	}
	decodeOne(s, ipfixMessage(1, set(2, 1, 44, 0, 0))) // withdraw 300
	if b.Used() != 0 {
		t.Errorf("%d bytes after the withdrawal", b.Used())
	}
}

// corpusHas reports whether the corpus file at path holds b.
func corpusHas(t *testing.T, path string, b []byte) bool {
	t.Helper()
	got, err := os.ReadFile(path)
	return err == nil && string(got) == fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
}

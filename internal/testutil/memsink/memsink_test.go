package memsink

import (
	"sync"
	"testing"

	"github.com/flowdedup/flowdedup/record"
)

// Records and summaries come back in the order given, as copies: changing
// what was passed in, or what a snapshot returned, changes nothing kept.
// Concurrent writers lose nothing.
func TestSinkKeepsInOrder(t *testing.T) {
	var s Sink
	r := record.Record{TimeNs: 1}
	w := record.WindowSummary{StartNs: 10}
	for i := range 3 {
		r.TimeNs, w.StartNs = int64(i), int64(10*i)
		if err := s.Record(&r); err != nil {
			t.Fatal(err)
		}
		if err := s.Window(&w); err != nil {
			t.Fatal(err)
		}
	}
	r.TimeNs, w.StartNs = 99, 99
	recs, wins := s.Records(), s.Windows()
	if len(recs) != 3 || len(wins) != 3 {
		t.Fatalf("%d records, %d summaries, want 3 and 3", len(recs), len(wins))
	}
	for i := range 3 {
		if recs[i].TimeNs != int64(i) || wins[i].StartNs != int64(10*i) {
			t.Errorf("#%d: record time %d, summary start %d; want %d, %d", i, recs[i].TimeNs, wins[i].StartNs, i, 10*i)
		}
	}
	recs[0].TimeNs, wins[0].StartNs = 77, 77
	if s.Records()[0].TimeNs != 0 || s.Windows()[0].StartNs != 0 {
		t.Error("changing a snapshot changed what the sink keeps")
	}
	if err := s.Close(); err != nil || len(s.Records()) != 3 {
		t.Errorf("Close: %v, %d records after it, want nil, 3", err, len(s.Records()))
	}

	var c Sink
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 250 {
				c.Record(&record.Record{})
				c.Window(&record.WindowSummary{})
			}
		})
	}
	wg.Wait()
	if n, m := len(c.Records()), len(c.Windows()); n != 1000 || m != 1000 {
		t.Errorf("4 writers of 250: %d records, %d summaries, want 1000 each", n, m)
	}
}

// With WindowsOnly the sink keeps the summaries and no record.
func TestWindowsOnly(t *testing.T) {
	s := &Sink{WindowsOnly: true}
	if err := s.Record(&record.Record{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Window(&record.WindowSummary{Packets: 3}); err != nil {
		t.Fatal(err)
	}
	if r, w := s.Records(), s.Windows(); len(r) != 0 || len(w) != 1 || w[0].Packets != 3 {
		t.Fatalf("records %v, windows %v: want none and one of 3 packets", r, w)
	}
}

package seqnum

import "testing"

// message is an IPFIX message as an exporter numbers it.
type message struct {
	all, flows uint32 // data records, flow records of them
	lost       bool   // lost in transit: never observed
}

// run numbers msgs as an exporter would (through: flow records through
// the message, as softflowd; options: options records numbered) and
// observes the ones not lost.
func run(msgs []message, through, options bool) Counter {
	var c Counter
	var seq uint32 = 1000
	for _, m := range msgs {
		n := m.flows
		if options {
			n = m.all
		}
		s := seq
		if through {
			s = seq + n
		}
		if !m.lost {
			c.ObserveRecords(s, m.all, m.flows)
		}
		seq += n
	}
	return c
}

// TestObserveRecords: the loss counted is the flow records of the lost
// messages (the RFC's numbering: their data records), whichever way the
// exporter numbers them, once enough messages told the counter.
func TestObserveRecords(t *testing.T) {
	msgs := []message{{22, 21, false}, {29, 29, false}, {27, 27, false}, {26, 26, false}, {28, 28, false},
		{31, 30, false}, {30, 30, true}, {25, 25, false}, {20, 20, false}, {20, 20, true}, {21, 21, true}, {24, 24, false}}
	for _, tc := range []struct {
		name             string
		through, options bool
		lost             uint64
	}{
		{"RFC 7011", false, true, 30 + 20 + 21},
		{"options records unnumbered", false, false, 30 + 20 + 21},
		{"flow records through the message (softflowd)", true, false, 30 + 20 + 21},
	} {
		c := run(msgs, tc.through, tc.options)
		if c.Lost != tc.lost || c.Reordered != 0 || c.Resets != 0 || c.Through() != tc.through {
			t.Errorf("%s: %+v, want %d lost", tc.name, c, tc.lost)
		}
	}
	// Equal record counts in a row fit both numberings: the counter waits
	// for a message that tells, and counts no loss meanwhile.
	even := []message{{20, 20, false}, {20, 20, false}, {20, 20, false}, {20, 20, false}, {21, 21, false}, {22, 22, false}, {23, 23, false}}
	if c := run(even, true, false); c.Lost != 0 || c.Reordered != 0 || !c.Through() {
		t.Errorf("softflowd, equal counts first: %+v", c)
	}
}

func TestObserve(t *testing.T) {
	var c Counter
	for _, seq := range []uint32{1, 2, 4, 3, 5, 1 << 30, 1<<30 + 1} {
		c.Observe(seq, 1)
	}
	if c.Lost != 1 || c.Reordered != 1 || c.Resets != 1 {
		t.Errorf("%+v: want 1 lost (3, before it came), 1 reordered (3), 1 reset (the jump)", c)
	}
	c = Counter{}
	c.Observe(1<<32-1, 1)
	c.Observe(1, 1) // the sequence wraps: 0 is lost
	if c.Lost != 1 || c.Resets != 0 {
		t.Errorf("across the wrap: %+v", c)
	}
}

// Package seqnum counts what the sequence numbers of an exporter's
// datagrams say about loss in transit: NetFlow v9 and sFlow number
// datagrams, NetFlow v5 and IPFIX records.
package seqnum

// Counter counts what the sequence numbers of a domain's messages say about
// loss in transit. NetFlow v9 and sFlow number datagrams; IPFIX and
// NetFlow v5 number records: Lost is in the unit of the protocol
// (LostUnit).
type Counter struct {
	Lost      uint64 // datagrams (v9) or records (v5, IPFIX) skipped by the sequence
	Reordered uint64 // messages whose sequence was behind the one expected (late or duplicated)
	Resets    uint64 // jumps too far either way to be loss: the exporter restarted
	next      uint32 // the sequence expected next
	known     bool   // next is known

	// IPFIX: through is set when the exporter numbers records through the
	// message rather than before it (softflowd 1.1.0 does): the first
	// record of a message is then its sequence minus its records. last is
	// the previous message's sequence; streak counts the messages in a row
	// that fit that numbering and not the RFC's, and the streak fields
	// what the RFC's reading counted for them, taken back if it proves
	// wrong.
	through                     bool
	last                        uint32
	streak                      int
	streakLost, streakReordered uint64
	streakResets                uint64
}

// maxSeqGap is the largest jump ahead of the expected sequence number
// counted as loss; a longer one, or one further back, is an exporter that
// restarted (its sequence begins again). 2^20 datagrams or records is
// minutes of a busy exporter's export.
const maxSeqGap = 1 << 20

// Observe accounts for a message numbered seq, after which the sequence
// continues at seq+advance.
func (s *Counter) Observe(seq, advance uint32) {
	if s.known {
		switch d := seq - s.next; {
		case d == 0:
		case d <= maxSeqGap:
			s.Lost += uint64(d)
		case -d <= maxSeqGap:
			s.Reordered++
			return // the expected sequence stays where it was
		default:
			s.Resets++
		}
	}
	s.next, s.known = seq+advance, true
}

// throughStreak is how many messages in a row must fit the numbering
// through the message, and not the RFC's, before a domain is read so: a
// message lost now and then can look like it once, when the next message
// holds as many records as the lost one.
const throughStreak = 3

// ObserveRecords accounts for an IPFIX message numbered seq that held n
// data records. RFC 7011 numbers the records sent before the message;
// an exporter that numbers them through it is recognised (throughStreak)
// and read so from then on.
func (s *Counter) ObserveRecords(seq, n uint32) {
	if s.known && !s.through {
		if seq != s.next && seq-n == s.last {
			s.streak++
		} else {
			s.streak, s.streakLost, s.streakReordered, s.streakResets = 0, 0, 0, 0
		}
	}
	lost, reordered, resets := s.Lost, s.Reordered, s.Resets
	if s.through {
		s.Observe(seq-n, n)
	} else {
		s.Observe(seq, n)
	}
	s.last = seq
	if s.streak == 0 {
		return
	}
	s.streakLost += s.Lost - lost
	s.streakReordered += s.Reordered - reordered
	s.streakResets += s.Resets - resets
	if s.streak >= throughStreak {
		s.through = true
		s.Lost -= s.streakLost
		s.Reordered -= s.streakReordered
		s.Resets -= s.streakResets
		s.next = seq
		s.streak, s.streakLost, s.streakReordered, s.streakResets = 0, 0, 0, 0
	}
}

// Unknown forgets the expected sequence: a message whose record count is
// not known (a data set without its template) cannot say where the next
// one starts.
func (s *Counter) Unknown() { s.known = false }

// Through reports whether the counter reads IPFIX sequence numbers as
// numbering the records through the message (see ObserveRecords).
func (s *Counter) Through() bool { return s.through }

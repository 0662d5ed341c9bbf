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
	alt       uint32 // IPFIX: the sequence expected next if the exporter numbers only some records (ObserveRecords)
	known     bool   // next is known

	// IPFIX: through is set when the exporter numbers records through the
	// message rather than before it (softflowd 1.1.0 does): the first
	// record of a message is then its sequence minus its records. last is
	// the previous message's sequence; streak counts the messages in a row
	// that fit that numbering and not the RFC's, and the streak fields
	// what the RFC's reading counted for them, taken back if it proves
	// wrong.
	through                     bool
	unnumbered                  bool // IPFIX: options records are not numbered
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

// ObserveRecords accounts for an IPFIX message numbered seq that held all
// data records, flows of them flow records (the rest options records).
// RFC 7011 numbers every data record sent before the message. Exporters
// stray two ways, which the counter recognises so as not to count loss
// where there is none: some leave options records unnumbered (a message
// that starts where the flow records alone say is not late), and some
// (softflowd 1.1.0) number the flow records through the message rather
// than before it, recognised once throughStreak messages in a row fit that
// numbering and not the RFC's, and read so from then on.
func (s *Counter) ObserveRecords(seq, all, flows uint32) {
	if s.known && !s.through {
		switch through := seq-flows == s.last; {
		case through && seq != s.next:
			s.streak++
		case !through:
			s.streak, s.streakLost, s.streakReordered, s.streakResets = 0, 0, 0, 0
		}
		// Both fit (equal record counts in a row): the streak waits.
	}
	lost, reordered, resets := s.Lost, s.Reordered, s.Resets
	last := seq
	if s.through {
		// The flow records before the message are its sequence less its
		// own; the next message's are this one's sequence.
		start := seq - flows
		s.Observe(start, flows)
		s.alt = start + all
	} else {
		if s.known && seq == s.alt && s.alt != s.next {
			s.unnumbered = true // the options records before were not numbered
		}
		adv := all
		if s.unnumbered {
			s.next, adv = s.alt, flows
		}
		s.Observe(seq, adv)
		s.alt = seq + flows
	}
	s.last = last
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
		s.next, s.alt = last, last
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

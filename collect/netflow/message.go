package netflow

import (
	"encoding/binary"
	"errors"
	"math"
	"net/netip"
)

// Errors of Reset: the message cannot be read at all. Each is also counted
// in the Session's Stats.Errors.
var (
	ErrTruncated = errors.New("netflow: message truncated")
	ErrVersion   = errors.New("netflow: not NetFlow v5, v9 or IPFIX")
)

// Header lengths.
const (
	v5HeaderLen    = 24
	v5RecordLen    = 48
	v9HeaderLen    = 20
	ipfixHeaderLen = 16
	setHeaderLen   = 4
)

// Header is a message's header, in one form for the three versions.
type Header struct {
	Version uint16 // 5, 9 or 10 (IPFIX)
	// Count is the v5 record count, or the v9 count of records of all
	// kinds (data, template, options) as the exporter gives it; 0 for
	// IPFIX.
	Count uint16
	// Length is the IPFIX message length; 0 for NetFlow.
	Length uint16
	// UptimeMs is the exporter's uptime (sysUpTime) when it sent the
	// message, in ms (v5, v9).
	UptimeMs uint32
	// ExportNs is when the exporter sent the message, Unix ns (v5:
	// seconds and nanoseconds; v9, IPFIX: seconds).
	ExportNs int64
	// Sequence is the v5 count of flows sent before, the v9 count of
	// messages, or the IPFIX count of data records.
	Sequence uint32
	// Domain is the v9 source ID, the IPFIX observation domain ID, or
	// (v5) the engine type << 8 | the engine ID.
	Domain uint32
}

// Record is one flow record: the fields of a flow key and its start time.
// Addresses the record did not carry are invalid (netip.Addr{}); ports and
// protocol it did not carry are 0 (HasProto, HasPorts say which).
type Record struct {
	Src, Dst         netip.Addr
	Proto            uint8
	SrcPort, DstPort uint16
	HasProto         bool
	HasPorts         bool // both ports were in the record
	// StartNs is the flow's start, Unix ns (the export time when the
	// record had none), as the exporter says it: BadTime when it cannot
	// be one. A collector checks that it is sane.
	StartNs int64
}

// Message decodes one message. Reset it onto a message, then call Next
// until it returns false. The zero Message is ready for Reset; reuse one
// for every message so that nothing is allocated.
type Message struct {
	Header Header

	s     *Session
	dom   *Domain
	b     []byte // the message, cut to its length
	off   int    // the next set's header (v5: the next record)
	t     *template
	data  []byte // the rest of the data set being read
	nrec  uint32 // data records read, for the IPFIX sequence
	nopts uint32 // options records of them
	gap   bool   // a data set was skipped: the message's record count is unknown
	done  bool   // the sequence was accounted for
	lost  int64  // what the sequence said of loss (Lost)
}

// Lost returns what the message's sequence number added to its domain's
// Seq.Lost: the messages (v9) or records (v5, IPFIX) lost in transit before
// it; negative when it takes back an earlier count (an IPFIX exporter found
// to number its records through the message). Known after Reset for v5
// and v9, after the last Next for IPFIX.
func (m *Message) Lost() int64 { return m.lost }

// Domain returns the observation domain of the message last Reset, or
// nil when Reset failed.
func (m *Message) Domain() *Domain { return m.dom }

// Reset starts decoding message b with the templates and domains of s.
// It reads the header and returns ErrTruncated or ErrVersion (counted in
// s.Stats.Errors too) when there is nothing to decode. b is read in place
// until the last Next.
func (m *Message) Reset(b []byte, s *Session) error {
	*m = Message{s: s}
	if len(b) < 2 {
		s.Stats.Errors[Truncated]++
		return ErrTruncated
	}
	h := &m.Header
	h.Version = binary.BigEndian.Uint16(b)
	switch h.Version {
	case 5:
		if len(b) < v5HeaderLen {
			break
		}
		h.Count = binary.BigEndian.Uint16(b[2:])
		h.UptimeMs = binary.BigEndian.Uint32(b[4:])
		h.ExportNs = int64(binary.BigEndian.Uint32(b[8:]))*1e9 + int64(binary.BigEndian.Uint32(b[12:])) // not checked below 1e9: taken as it is
		h.Sequence = binary.BigEndian.Uint32(b[16:])
		h.Domain = uint32(b[20])<<8 | uint32(b[21])
		n := v5HeaderLen + int(h.Count)*v5RecordLen
		if n > len(b) {
			break // the count claims records the datagram does not hold
		}
		m.b, m.off = b[:n], v5HeaderLen
		m.start()
		if si := binary.BigEndian.Uint16(b[22:]) & 0x3fff; si != 0 {
			m.dom.SamplingRate = uint32(si)
		}
		return nil
	case 9:
		if len(b) < v9HeaderLen {
			break
		}
		h.Count = binary.BigEndian.Uint16(b[2:])
		h.UptimeMs = binary.BigEndian.Uint32(b[4:])
		h.ExportNs = int64(binary.BigEndian.Uint32(b[8:])) * 1e9
		h.Sequence = binary.BigEndian.Uint32(b[12:])
		h.Domain = binary.BigEndian.Uint32(b[16:])
		m.b, m.off = b, v9HeaderLen
		m.start()
		return nil
	case 10:
		if len(b) < ipfixHeaderLen {
			break
		}
		h.Length = binary.BigEndian.Uint16(b[2:])
		h.ExportNs = int64(binary.BigEndian.Uint32(b[4:])) * 1e9
		h.Sequence = binary.BigEndian.Uint32(b[8:])
		h.Domain = binary.BigEndian.Uint32(b[12:])
		if int(h.Length) > len(b) || h.Length < ipfixHeaderLen {
			break
		}
		m.b, m.off = b[:h.Length], ipfixHeaderLen
		m.start()
		return nil
	default:
		s.Stats.Errors[BadVersion]++
		return ErrVersion
	}
	s.Stats.Errors[Truncated]++
	return ErrTruncated
}

// start begins a message whose header was read.
func (m *Message) start() {
	m.s.Stats.Messages++
	m.dom = m.s.domain(m.Header.Domain, m.Header.Version)
	before := m.dom.Seq.Lost
	switch m.Header.Version {
	case 5: // numbers flows
		m.dom.Seq.Observe(m.Header.Sequence, uint32(m.Header.Count))
		m.done = true
	case 9: // numbers messages
		m.dom.Seq.Observe(m.Header.Sequence, 1)
		m.done = true
	}
	m.lost = int64(m.dom.Seq.Lost - before)
}

// finish accounts for the sequence of a message read to its end.
func (m *Message) finish() {
	if m.done {
		return
	}
	m.done = true
	if m.gap {
		m.dom.Seq.Unknown()
		return
	}
	before := m.dom.Seq.Lost
	m.dom.Seq.ObserveRecords(m.Header.Sequence, m.nrec, m.nrec-m.nopts)
	m.lost += int64(m.dom.Seq.Lost - before)
}

// Next decodes the next flow record into r and reports whether there was
// one. Template sets, options templates and options data records are taken
// as they come; what is wrong is counted in the Session's Stats and
// skipped.
func (m *Message) Next(r *Record) bool {
	if m.b == nil {
		return false
	}
	if m.Header.Version == 5 {
		return m.nextV5(r)
	}
	for {
		if m.t != nil && m.nextData(r) {
			return true
		}
		if !m.nextSet() {
			m.finish()
			m.b = nil
			return false
		}
	}
}

// nextV5 decodes the next v5 record.
func (m *Message) nextV5(r *Record) bool {
	if m.off+v5RecordLen > len(m.b) {
		m.b = nil
		return false
	}
	rec := m.b[m.off : m.off+v5RecordLen]
	m.off += v5RecordLen
	*r = Record{
		Src:      netip.AddrFrom4([4]byte(rec[0:4])),
		Dst:      netip.AddrFrom4([4]byte(rec[4:8])),
		SrcPort:  binary.BigEndian.Uint16(rec[32:]),
		DstPort:  binary.BigEndian.Uint16(rec[34:]),
		Proto:    rec[38],
		HasProto: true,
		HasPorts: true,
		StartNs:  m.uptimeToNs(binary.BigEndian.Uint32(rec[24:])),
	}
	m.s.Stats.Records++
	return true
}

// uptimeToNs converts a time in ms of the exporter's uptime to Unix ns with
// the header's clock. The uptime is a 32-bit count of ms that wraps every
// 49.7 days, so a flow that began before a wrap has a start above the
// uptime of its export: the difference is taken modulo 2^32. But a start
// above the export's uptime by less than half of 2^32 ms is read as after
// the export, as nfdump reads it: softflowd reading a capture sends
// uptimes of the capture's clock and an export uptime of 0, and so do
// exporters whose clocks are wrong. A collector then sees a flow starting
// after it was exported, and can tell.
func (m *Message) uptimeToNs(ms uint32) int64 {
	if ms > m.Header.UptimeMs && ms-m.Header.UptimeMs < 1<<31 {
		return m.Header.ExportNs + int64(ms-m.Header.UptimeMs)*1e6
	}
	age := m.Header.UptimeMs - ms
	return m.Header.ExportNs - int64(age)*1e6
}

// nextSet moves to the next set of the message, handling template and
// options template sets on the way; it returns false at the end of the
// message or at a set that cannot be read (counted).
func (m *Message) nextSet() bool {
	m.t, m.data = nil, nil
	for {
		rest := len(m.b) - m.off
		if rest < setHeaderLen {
			// The end, or padding (NetFlow v9 pads to 32 bits).
			return false
		}
		id := binary.BigEndian.Uint16(m.b[m.off:])
		n := int(binary.BigEndian.Uint16(m.b[m.off+2:]))
		switch {
		case n < setHeaderLen:
			m.s.Stats.Errors[BadSet]++
			m.gap = true
			return false
		case n > rest:
			m.s.Stats.Errors[Truncated]++
			m.gap = true
			return false
		}
		body := m.b[m.off+setHeaderLen : m.off+n]
		m.off += n
		v := m.Header.Version
		switch {
		case id >= 256:
			t, ok := m.s.templates[templateKey{domain: m.Header.Domain, id: id, version: v}]
			if !ok {
				m.s.Stats.Errors[NoTemplate]++
				m.gap = true
				continue
			}
			t.used = true
			m.t, m.data = t, body
			return true
		case v == 9 && id == 0, v == 10 && id == 2:
			m.templates(body, id, false)
		case v == 9 && id == 1, v == 10 && id == 3:
			m.templates(body, id, true)
		default:
			m.s.Stats.Errors[BadSet]++ // a reserved set ID
		}
	}
}

// templates reads the template records of a (options) template set.
func (m *Message) templates(body []byte, setID uint16, options bool) {
	s, v := m.s, m.Header.Version
	t := &s.scratch
	for len(body) >= 4 {
		id := binary.BigEndian.Uint16(body)
		count := int(binary.BigEndian.Uint16(body[2:]))
		hdr, scope := 4, 0
		switch {
		case v == 10 && count == 0:
			// A withdrawal (RFC 7011 section 8.1).
			s.withdraw(templateKey{domain: m.Header.Domain, id: id, version: v}, setID)
			body = body[4:]
			continue
		case options && v == 10:
			if len(body) < 6 {
				s.Stats.Errors[Truncated]++
				return
			}
			scope = int(binary.BigEndian.Uint16(body[4:]))
			hdr = 6
			if scope == 0 || scope > count {
				count = -1
			}
		case options: // v9: scope and option lengths in bytes
			if len(body) < 6 {
				s.Stats.Errors[Truncated]++
				return
			}
			sl, ol := count, int(binary.BigEndian.Uint16(body[4:]))
			hdr = 6
			if sl%4 != 0 || ol%4 != 0 {
				count = -1
			} else {
				scope, count = sl/4, sl/4+ol/4
			}
		}
		if count < 0 {
			// Its length is unknown: nothing after it can be read.
			s.Stats.Errors[BadTemplate]++
			return
		}
		n, ok := s.parseTemplate(t, body[hdr:], count, scope, v, options)
		if n < 0 {
			s.Stats.Errors[Truncated]++
			return
		}
		if ok && id >= 256 {
			s.store(templateKey{domain: m.Header.Domain, id: id, version: v}, body[:hdr+n], t)
		} else {
			s.Stats.Errors[BadTemplate]++
		}
		body = body[hdr+n:]
	}
}

// nextData decodes the next flow record of the data set being read,
// taking options records on the way.
func (m *Message) nextData(r *Record) bool {
	t := m.t
	var locs *[numSlots]loc
	var scratch [numSlots]loc
	for {
		var rec []byte
		if t.fixed > 0 {
			if len(m.data) < t.fixed {
				return false // the end of the set, or its padding
			}
			rec, m.data = m.data[:t.fixed], m.data[t.fixed:]
			locs = &t.locs
		} else {
			n, ok := walk(t.fields, m.data, &scratch)
			if !ok {
				if len(m.data) >= t.minLen {
					// Not padding, which is shorter than any record: a
					// variable-length field runs past the set's end.
					m.s.Stats.Errors[Truncated]++
					m.gap = true
				}
				m.data = nil
				return false
			}
			rec, m.data = m.data[:n], m.data[n:]
			locs = &scratch
		}
		m.nrec++
		if t.options {
			m.nopts++
			m.option(rec, locs)
			continue
		}
		m.record(rec, locs, r)
		return true
	}
}

// walk finds the fields of a record of a template with variable-length
// fields at the start of data: it fills locs and returns the record's
// length, or false when data holds no whole record.
func walk(fields []field, data []byte, locs *[numSlots]loc) (int, bool) {
	*locs = [numSlots]loc{}
	off := 0
	for _, f := range fields {
		n := int(f.n)
		if f.n == varLen {
			if off >= len(data) {
				return 0, false
			}
			n = int(data[off])
			off++
			if n == 255 {
				if off+2 > len(data) {
					return 0, false
				}
				n = int(binary.BigEndian.Uint16(data[off:]))
				off += 2
			}
		}
		if off+n > len(data) {
			return 0, false
		}
		if f.slot != noSlot {
			locs[f.slot] = loc{off: uint16(off), n: uint16(n)}
		}
		off += n
	}
	return off, off > 0
}

// uint reads the unsigned integer at l in rec (1 to 8 bytes, big endian).
func uintAt(rec []byte, l loc) uint64 {
	b := rec[l.off : l.off+l.n]
	switch len(b) {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.BigEndian.Uint16(b))
	case 4:
		return uint64(binary.BigEndian.Uint32(b))
	case 8:
		return binary.BigEndian.Uint64(b)
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// BadTime is Record.StartNs of a record whose time cannot be a time in
// Unix ns (an absolute time in ms past the year 2262).
const BadTime = math.MinInt64

// msToNs converts a time in Unix ms to Unix ns, BadTime when it does not
// fit.
func msToNs(ms uint64) int64 {
	if ms > math.MaxInt64/1_000_000 {
		return BadTime
	}
	return int64(ms) * 1e6
}

// ntpEpoch is the NTP era 0 epoch (1900) in Unix seconds.
const ntpEpoch = -2208988800

// ntpToNs converts an RFC 7011 dateTimeMicroseconds or
// dateTimeNanoseconds value (NTP format: seconds since 1900 and a binary
// fraction) to Unix ns.
func ntpToNs(v uint64) int64 {
	sec := int64(v>>32) + ntpEpoch
	frac := int64((v & 0xffffffff) * 1e9 >> 32)
	return sec*1e9 + frac
}

// record fills r from a flow record.
func (m *Message) record(rec []byte, l *[numSlots]loc, r *Record) {
	*r = Record{}
	switch {
	case l[slotSrc4].n != 0:
		o := l[slotSrc4].off
		r.Src = netip.AddrFrom4([4]byte(rec[o : o+4]))
	case l[slotSrc6].n != 0:
		o := l[slotSrc6].off
		r.Src = netip.AddrFrom16([16]byte(rec[o : o+16]))
	}
	switch {
	case l[slotDst4].n != 0:
		o := l[slotDst4].off
		r.Dst = netip.AddrFrom4([4]byte(rec[o : o+4]))
	case l[slotDst6].n != 0:
		o := l[slotDst6].off
		r.Dst = netip.AddrFrom16([16]byte(rec[o : o+16]))
	}
	if l[slotProto].n != 0 {
		r.Proto, r.HasProto = rec[l[slotProto].off], true
	}
	if l[slotSport].n != 0 && l[slotDport].n != 0 {
		r.SrcPort = uint16(uintAt(rec, l[slotSport]))
		r.DstPort = uint16(uintAt(rec, l[slotDport]))
		r.HasPorts = true
	}
	r.StartNs = m.startNs(rec, l)
	if l[slotSampling].n != 0 || l[slotRandomSampling].n != 0 || l[slotPacketInterval].n != 0 {
		m.sampling(rec, l)
	}
	m.s.Stats.Records++
}

// startNs returns the start time of a flow record.
func (m *Message) startNs(rec []byte, l *[numSlots]loc) int64 {
	switch {
	case l[slotMilli].n != 0:
		return msToNs(uintAt(rec, l[slotMilli]))
	case l[slotSec].n != 0:
		return int64(uintAt(rec, l[slotSec])) * 1e9
	case l[slotMicro].n != 0:
		return ntpToNs(uintAt(rec, l[slotMicro]))
	case l[slotNano].n != 0:
		return ntpToNs(uintAt(rec, l[slotNano]))
	case l[slotDelta].n != 0:
		return m.Header.ExportNs - int64(uintAt(rec, l[slotDelta]))*1e3
	case l[slotUptime].n != 0:
		ms := uint32(uintAt(rec, l[slotUptime]))
		if m.Header.Version == 9 {
			return m.uptimeToNs(ms)
		}
		if init := m.dom.initMs; init != 0 {
			if init > math.MaxUint64-uint64(ms) {
				return BadTime
			}
			return msToNs(init + uint64(ms))
		}
	}
	return m.Header.ExportNs
}

// option takes an options data record: the exporter's clock and sampling.
func (m *Message) option(rec []byte, l *[numSlots]loc) {
	m.s.Stats.Options++
	if l[slotInit].n != 0 {
		m.dom.initMs = uintAt(rec, l[slotInit])
	}
	m.sampling(rec, l)
}

// sampling takes the sampling rate a record gives, if any.
func (m *Message) sampling(rec []byte, l *[numSlots]loc) {
	var rate uint64
	switch {
	case l[slotPacketInterval].n != 0:
		// Systematic count-based sampling (RFC 5476): interval packets
		// selected out of every interval+space.
		in := uintAt(rec, l[slotPacketInterval])
		if in != 0 {
			var sp uint64
			if l[slotPacketSpace].n != 0 {
				sp = uintAt(rec, l[slotPacketSpace])
			}
			rate = (in + sp) / in
		}
	case l[slotSampling].n != 0:
		rate = uintAt(rec, l[slotSampling])
	case l[slotRandomSampling].n != 0:
		rate = uintAt(rec, l[slotRandomSampling])
	}
	if rate != 0 {
		m.dom.SamplingRate = uint32(min(rate, 1<<32-1))
	}
}

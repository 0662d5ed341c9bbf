package netflow

import (
	"bytes"
	"encoding/binary"
	"unsafe"
)

// Information elements the decoder reads (IANA "IPFIX Information
// Elements"; NetFlow v9 field types share the numbers).
const (
	ieProtocol             = 4
	ieSrcPort              = 7
	ieSrcIPv4              = 8
	ieDstPort              = 11
	ieDstIPv4              = 12
	ieStartSysUpTime       = 22 // v9 FIRST_SWITCHED
	ieSrcIPv6              = 27
	ieDstIPv6              = 28
	ieSamplingInterval     = 34
	ieSamplerRandomInt     = 50
	ieStartSeconds         = 150
	ieStartMilliseconds    = 152
	ieStartMicroseconds    = 154
	ieStartNanoseconds     = 156
	ieStartDeltaMicros     = 158
	ieSystemInitTimeMillis = 160
	ieSamplingPacketInt    = 305
	ieSamplingPacketSpace  = 306
)

// slot numbers the fields a template's records are read for.
type slot uint8

const (
	slotSrc4 slot = iota
	slotSrc6
	slotDst4
	slotDst6
	slotProto
	slotSport
	slotDport
	slotUptime
	slotSec
	slotMilli
	slotMicro
	slotNano
	slotDelta
	slotInit
	slotSampling
	slotRandomSampling
	slotPacketInterval
	slotPacketSpace
	numSlots
	noSlot = numSlots
)

// slotOf returns the slot of IANA element id, and the field lengths it may
// have: exactly want, or (unsigned integers, which RFC 7011 section 6.2
// lets an exporter send in fewer bytes) from 1 to want.
func slotOf(id uint16) (s slot, want uint16, reduced bool) {
	switch id {
	case ieSrcIPv4:
		return slotSrc4, 4, false
	case ieSrcIPv6:
		return slotSrc6, 16, false
	case ieDstIPv4:
		return slotDst4, 4, false
	case ieDstIPv6:
		return slotDst6, 16, false
	case ieProtocol:
		return slotProto, 1, false
	case ieSrcPort:
		return slotSport, 2, true
	case ieDstPort:
		return slotDport, 2, true
	case ieStartSysUpTime:
		return slotUptime, 4, true
	case ieStartSeconds:
		return slotSec, 4, false
	case ieStartMilliseconds:
		return slotMilli, 8, false
	case ieStartMicroseconds:
		return slotMicro, 8, false
	case ieStartNanoseconds:
		return slotNano, 8, false
	case ieStartDeltaMicros:
		return slotDelta, 4, true
	case ieSystemInitTimeMillis:
		return slotInit, 8, false
	case ieSamplingInterval:
		return slotSampling, 4, true
	case ieSamplerRandomInt:
		return slotRandomSampling, 4, true
	case ieSamplingPacketInt:
		return slotPacketInterval, 4, true
	case ieSamplingPacketSpace:
		return slotPacketSpace, 4, true
	}
	return noSlot, 0, false
}

// varLen is the field length of a variable-length IPFIX field.
const varLen = 0xffff

// loc is where a field is in a record: its offset and length; n == 0:
// absent.
type loc struct {
	off, n uint16
}

// field is a template field as the decoder keeps it.
type field struct {
	n    uint16 // length; varLen: variable (IPFIX)
	slot slot   // noSlot for fields not read
}

type templateKey struct {
	domain  uint32
	id      uint16
	version uint16
}

// template is a compiled (options) template.
type template struct {
	options bool // an options template: its records describe the exporter
	used    bool // a data set used it since the CLOCK last passed
	// fixed is the length of every record when no field is variable,
	// else 0: records are then walked field by field (fields).
	fixed  int
	minLen int // the shortest record: fixed, or the fixed fields and a length byte per variable one
	locs   [numSlots]loc
	fields []field // the fields, when a field is variable; nil otherwise
	raw    []byte  // the template record as received: a refresh is compared with it

	// Its place in its Session and in the Budget's CLOCK.
	owner *Session
	key   templateKey
	size  int64 // its cost charged (Budget)
	ring  int   // its index in the Budget's ring
}

// parseTemplate compiles the fields of a template record (raw: the
// record from its field specifiers on, count of them, the first scope of
// them scope fields that are not read) of version v. ok is false for a
// template the decoder refuses (BadTemplate); n is the bytes of raw the
// fields took (the next record starts there), or -1 when raw ends inside
// them.
func (s *Session) parseTemplate(t *template, raw []byte, count, scope int, v uint16, options bool) (n int, ok bool) {
	*t = template{options: options, fields: t.fields[:0], raw: t.raw}
	ok = count > 0 && count <= s.lim.MaxFields
	off, variable := 0, false
	for i := range count {
		if n+4 > len(raw) {
			return -1, false
		}
		id := binary.BigEndian.Uint16(raw[n:])
		fl := binary.BigEndian.Uint16(raw[n+2:])
		n += 4
		if v == 10 && id&0x8000 != 0 {
			if n+4 > len(raw) {
				return -1, false
			}
			n += 4 // an enterprise-specific element: read by nobody here
			id = 0
		}
		if !ok {
			continue // read on, to find where the next record starts
		}
		sl := noSlot
		if i >= scope {
			var want uint16
			var reduced bool
			sl, want, reduced = slotOf(id)
			if sl != noSlot && (fl == 0 || fl > want || (fl < want && !reduced)) {
				ok = false // a field of the key or the clock with an impossible length
				continue
			}
		}
		if fl == varLen && v == 10 {
			variable = true
			t.minLen++
		} else {
			if !variable && sl != noSlot {
				t.locs[sl] = loc{off: uint16(off), n: fl}
			}
			off += int(fl)
			t.minLen += int(fl)
		}
		t.fields = append(t.fields, field{n: fl, slot: sl})
	}
	switch {
	case !ok:
		return n, false
	case t.minLen == 0 || t.minLen > maxMessage:
		return n, false // records of no length would never end a set
	case !variable:
		t.fixed = off
		t.fields = t.fields[:0]
	default:
		t.locs = [numSlots]loc{}
	}
	return n, true
}

// maxMessage is the longest message: a UDP datagram, an IPFIX message.
const maxMessage = 65535

// store keeps the template compiled into t, whose record is raw, under
// k, unless the Session holds the same already. t is the caller's scratch:
// store copies it.
func (s *Session) store(k templateKey, raw []byte, t *template) {
	if old, ok := s.templates[k]; ok {
		old.used = true
		if bytes.Equal(old.raw, raw) {
			return // a refresh of what we have
		}
		// Changed: reuse the old one's memory.
		fields, oldRaw, size, ring := old.fields, old.raw, old.size, old.ring
		if cap(fields) < len(t.fields) {
			fields = make([]field, 0, len(t.fields))
		}
		if cap(oldRaw) < len(raw) {
			oldRaw = make([]byte, 0, len(raw))
		}
		grow := templateOverhead + int64(cap(fields))*int64(unsafe.Sizeof(field{})) + int64(cap(oldRaw)) - size
		if !s.room(grow, old) {
			s.drop(old) // the new layout does not fit: the old one must not be used
			s.lim.Budget.evicted.Add(1)
			return
		}
		*old = *t
		old.fields = append(fields[:0], t.fields...)
		old.raw = append(oldRaw[:0], raw...)
		old.owner, old.key, old.size, old.ring = s, k, size, ring
		old.used = true
		s.charge(old, old.cost())
		s.Stats.Templates++
		return
	}
	if len(s.templates) >= s.lim.MaxTemplates {
		if s.evictTemplate(nil) {
			s.Stats.TemplatesEvicted++
		}
	}
	nt := new(template)
	*nt = *t
	nt.fields = append([]field(nil), t.fields...)
	nt.raw = append([]byte(nil), raw...)
	if !s.room(nt.cost(), nil) {
		s.lim.Budget.evicted.Add(1) // not kept: counted as evicted at once
		return
	}
	// Not used yet: a template flood's templates, never used, are the
	// first the CLOCK evicts, before those data sets use.
	nt.used = false
	nt.owner, nt.key, nt.size, nt.ring = s, k, 0, -1
	s.templates[k] = nt
	s.clock = append(s.clock, k)
	s.charge(nt, nt.cost())
	if b := s.lim.Budget; b != nil {
		b.enroll(nt)
	}
	s.Stats.Templates++
}

// evictTemplate drops one template, the first the CLOCK finds unused
// since its hand last passed it, never keep; false when there is none to
// drop.
func (s *Session) evictTemplate(keep *template) bool {
	for range 2*len(s.clock) + 1 {
		if len(s.clock) == 0 {
			return false
		}
		if s.hand >= len(s.clock) {
			s.hand = 0
		}
		k := s.clock[s.hand]
		t, ok := s.templates[k]
		if ok && (t.used || t == keep) {
			if t != keep {
				t.used = false
			}
			s.hand++
			continue
		}
		if !ok {
			s.unclock(s.hand)
			continue
		}
		s.drop(t)
		return true
	}
	return false
}

// unclock removes entry i of the Session's CLOCK.
func (s *Session) unclock(i int) {
	s.clock = append(s.clock[:i], s.clock[i+1:]...)
	if s.hand > i {
		s.hand--
	}
}

// drop removes template t from the Session, its CLOCK and its budget.
func (s *Session) drop(t *template) {
	delete(s.templates, t.key)
	for i, k := range s.clock {
		if k == t.key {
			s.unclock(i)
			break
		}
	}
	s.charge(t, 0)
	if b := s.lim.Budget; b != nil {
		b.unenroll(t)
	}
	t.owner = nil
}

// Release drops every template of the Session, giving their memory back
// to its Budget, and returns how many it dropped: a collector calls it
// when it forgets the exporter or its connection closes (RFC 7011
// scopes templates to the transport session). The Session may still be
// used: it learns its templates again.
func (s *Session) Release() int {
	n := 0
	for len(s.clock) > 0 {
		k := s.clock[len(s.clock)-1]
		if t, ok := s.templates[k]; ok {
			s.drop(t)
			n++
		} else {
			s.clock = s.clock[:len(s.clock)-1]
		}
	}
	s.hand = 0
	return n
}

// TemplateBytes returns the cost of the Session's templates (Budget).
func (s *Session) TemplateBytes() int64 { return s.bytes }

// withdraw drops template k (IPFIX template withdrawal); id of the set
// (2 or 3) withdraws every template of the domain of that kind.
func (s *Session) withdraw(k templateKey, setID uint16) {
	all := k.id == setID
	for i := 0; i < len(s.clock); i++ {
		c := s.clock[i]
		if c.domain != k.domain || c.version != k.version {
			continue
		}
		t, ok := s.templates[c]
		if !ok || (all && t.options != (setID == 3)) || (!all && c.id != k.id) {
			continue
		}
		s.drop(t)
		i--
		s.Stats.Withdrawn++
	}
}

package collecttest

import (
	"encoding/binary"
	"time"
)

// Exporter encodes the messages of one NetFlow or IPFIX exporter (one
// observation domain), keeping its sequence numbers and clock across
// messages.
type Exporter struct {
	// Version is 5, 9 or 10 (IPFIX).
	Version int
	// Domain is the v9 source ID or IPFIX observation domain ID; v5 takes
	// its low 16 bits as the engine type and ID.
	Domain uint32
	// Boot is when the exporter booted: uptimes count from it.
	Boot time.Time
	// Absolute makes IPFIX records carry flowStartMilliseconds rather than
	// flowStartSysUpTime with a systemInitTimeMilliseconds options record.
	Absolute bool
	// SamplingRate, when not 0, is sent in the v5 header or an options
	// record (samplingInterval).
	SamplingRate uint32
	// TemplateEvery resends the templates every that many messages
	// (v9, IPFIX); 0 sends them in the first message only.
	TemplateEvery int

	seq  uint32 // v5, IPFIX: records sent; v9: messages sent
	msgs int
}

// MaxV5Records is the most records of a v5 message.
const MaxV5Records = 30

// Encode returns the messages that export flows at time now, at most
// perMessage records each (v5: at most MaxV5Records). IPv6 flows are left
// out of v5 messages.
func (e *Exporter) Encode(now time.Time, flows []Flow, perMessage int) [][]byte {
	if e.Version == 5 {
		perMessage = min(perMessage, MaxV5Records)
	}
	var msgs [][]byte
	for len(flows) > 0 {
		n := min(perMessage, len(flows))
		if m := e.message(now, flows[:n]); m != nil {
			msgs = append(msgs, m)
		}
		flows = flows[n:]
	}
	return msgs
}

func (e *Exporter) uptime(t time.Time) uint32 { return uint32(t.Sub(e.Boot).Milliseconds()) }

func (e *Exporter) message(now time.Time, flows []Flow) []byte {
	switch e.Version {
	case 5:
		return e.v5(now, flows)
	case 9, 10:
		return e.templated(now, flows)
	}
	panic("collecttest: version must be 5, 9 or 10")
}

func (e *Exporter) v5(now time.Time, flows []Flow) []byte {
	var recs []byte
	n := 0
	for i := range flows {
		f := &flows[i]
		if !f.Src.Is4() {
			continue
		}
		recs = append(recs, f.Src.AsSlice()...)
		recs = append(recs, f.Dst.AsSlice()...)
		recs = append(recs, 0, 0, 0, 0, 0, 0, 0, 0) // next hop, input, output
		recs = binary.BigEndian.AppendUint32(recs, f.Packets)
		recs = binary.BigEndian.AppendUint32(recs, f.Bytes)
		recs = binary.BigEndian.AppendUint32(recs, e.uptime(f.Start))
		recs = binary.BigEndian.AppendUint32(recs, e.uptime(f.End))
		recs = binary.BigEndian.AppendUint16(recs, f.SrcPort)
		recs = binary.BigEndian.AppendUint16(recs, f.DstPort)
		recs = append(recs, 0, 0, f.Proto, 0)       // pad, TCP flags, protocol, ToS
		recs = append(recs, 0, 0, 0, 0, 0, 0, 0, 0) // AS numbers, masks, pad
		n++
	}
	if n == 0 {
		return nil
	}
	b := binary.BigEndian.AppendUint16(nil, 5)
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	b = binary.BigEndian.AppendUint32(b, e.uptime(now))
	b = binary.BigEndian.AppendUint32(b, uint32(now.Unix()))
	b = binary.BigEndian.AppendUint32(b, uint32(now.Nanosecond()))
	b = binary.BigEndian.AppendUint32(b, e.seq)
	b = append(b, byte(e.Domain>>8), byte(e.Domain))
	b = binary.BigEndian.AppendUint16(b, uint16(min(e.SamplingRate, 0x3fff)))
	e.seq += uint32(n)
	return append(b, recs...)
}

// templated encodes a v9 or IPFIX message.
func (e *Exporter) templated(now time.Time, flows []Flow) []byte {
	v := uint16(e.Version)
	abs := v == 10 && e.Absolute
	b := binary.BigEndian.AppendUint16(nil, v)
	b = append(b, 0, 0) // v9 count, IPFIX length: below
	if v == 9 {
		b = binary.BigEndian.AppendUint32(b, e.uptime(now))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(now.Unix()))
	b = binary.BigEndian.AppendUint32(b, e.seq)
	b = binary.BigEndian.AppendUint32(b, e.Domain)

	tset, oset := uint16(0), uint16(1)
	if v == 10 {
		tset, oset = 2, 3
	}
	count := 0
	withTemplates := e.msgs == 0 || (e.TemplateEvery > 0 && e.msgs%e.TemplateEvery == 0)
	options := e.SamplingRate != 0 || (v == 10 && !abs)
	if withTemplates {
		var start int
		b, start = beginSet(b, tset)
		b = appendTemplate(b, TemplateV4, flowFields(false, abs))
		b = appendTemplate(b, TemplateV6, flowFields(true, abs))
		b = endSet(b, start, false)
		count += 2
		if options {
			b, start = beginSet(b, oset)
			b = e.appendOptionsTemplate(b)
			b = endSet(b, start, v == 9)
			count++
		}
	}
	records := 0
	if withTemplates && options {
		var start int
		b, start = beginSet(b, TemplateOptions)
		b = binary.BigEndian.AppendUint32(b, 0) // the scope
		if v == 10 {
			b = binary.BigEndian.AppendUint64(b, uint64(e.Boot.UnixMilli()))
		}
		b = binary.BigEndian.AppendUint32(b, e.SamplingRate)
		b = endSet(b, start, v == 9)
		count++
		records++
	}
	for _, v6 := range []bool{false, true} {
		fs := flowFields(v6, abs)
		start := -1
		for i := range flows {
			f := &flows[i]
			if f.Src.Is6() != v6 {
				continue
			}
			if start < 0 {
				id := uint16(TemplateV4)
				if v6 {
					id = TemplateV6
				}
				b, start = beginSet(b, id)
			}
			b = appendFlow(b, fs, f, e.uptime)
			count++
			records++
		}
		if start >= 0 {
			b = endSet(b, start, v == 9)
		}
	}
	if v == 9 {
		binary.BigEndian.PutUint16(b[2:], uint16(count))
		e.seq++
	} else {
		binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
		e.seq += uint32(records)
	}
	e.msgs++
	return b
}

// appendOptionsTemplate appends the options template record: scope
// meteringProcessId (IPFIX) or system (v9), then the exporter's clock
// (IPFIX) and sampling interval.
func (e *Exporter) appendOptionsTemplate(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, TemplateOptions)
	if e.Version == 9 {
		b = binary.BigEndian.AppendUint16(b, 4) // scope length, bytes
		b = binary.BigEndian.AppendUint16(b, 4) // option length, bytes
		b = binary.BigEndian.AppendUint16(b, 1) // scope: system
		b = binary.BigEndian.AppendUint16(b, 4)
		b = binary.BigEndian.AppendUint16(b, ieSamplingInt)
		return binary.BigEndian.AppendUint16(b, 4)
	}
	b = binary.BigEndian.AppendUint16(b, 3) // fields
	b = binary.BigEndian.AppendUint16(b, 1) // scope fields
	b = binary.BigEndian.AppendUint16(b, ieMeteringProcess)
	b = binary.BigEndian.AppendUint16(b, 4)
	b = binary.BigEndian.AppendUint16(b, ieSystemInitMs)
	b = binary.BigEndian.AppendUint16(b, 8)
	b = binary.BigEndian.AppendUint16(b, ieSamplingInt)
	return binary.BigEndian.AppendUint16(b, 4)
}

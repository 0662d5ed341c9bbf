package collecttest

import (
	"encoding/binary"
	"net/netip"
)

// SFlowSample is one flow sample of an sFlow datagram: a raw packet
// header record.
type SFlowSample struct {
	Header       []byte // the packet's first bytes
	Protocol     uint32 // sFlow header_protocol: 1 Ethernet, 11 IPv4, 12 IPv6
	FrameLength  uint32
	SamplingRate uint32
}

// SFlow is an sFlow v5 agent: it numbers its datagrams and flow samples.
type SFlow struct {
	Agent    netip.Addr
	SubAgent uint32
	UptimeMs uint32
	seq      uint32 // datagrams sent
	sampled  uint32 // flow samples sent
}

// Datagram returns a datagram of the agent holding samples as flow
// samples (format 1, each with one raw packet header record) and, when
// counters, a counter sample (format 2, with no records).
func (a *SFlow) Datagram(samples []SFlowSample, counters bool) []byte {
	b := binary.BigEndian.AppendUint32(nil, 5)
	if a.Agent.Is4() {
		b = binary.BigEndian.AppendUint32(b, 1)
	} else {
		b = binary.BigEndian.AppendUint32(b, 2)
	}
	b = append(b, a.Agent.AsSlice()...)
	b = binary.BigEndian.AppendUint32(b, a.SubAgent)
	b = binary.BigEndian.AppendUint32(b, a.seq)
	a.seq++
	b = binary.BigEndian.AppendUint32(b, a.UptimeMs)
	n := len(samples)
	if counters {
		n++
	}
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	for _, s := range samples {
		hl := len(s.Header)
		pad := (4 - hl%4) % 4
		rec := 16 + hl + pad
		b = binary.BigEndian.AppendUint32(b, 1) // flow sample
		b = binary.BigEndian.AppendUint32(b, uint32(32+8+rec))
		b = binary.BigEndian.AppendUint32(b, a.sampled) // sequence
		a.sampled++
		b = binary.BigEndian.AppendUint32(b, 1) // source: ifIndex 1
		b = binary.BigEndian.AppendUint32(b, s.SamplingRate)
		b = binary.BigEndian.AppendUint32(b, a.sampled*s.SamplingRate) // sample pool
		b = binary.BigEndian.AppendUint32(b, 0)                        // drops
		b = binary.BigEndian.AppendUint32(b, 1)                        // input
		b = binary.BigEndian.AppendUint32(b, 2)                        // output
		b = binary.BigEndian.AppendUint32(b, 1)                        // records
		b = binary.BigEndian.AppendUint32(b, 1)                        // raw packet header
		b = binary.BigEndian.AppendUint32(b, uint32(rec))
		b = binary.BigEndian.AppendUint32(b, s.Protocol)
		b = binary.BigEndian.AppendUint32(b, s.FrameLength)
		b = binary.BigEndian.AppendUint32(b, 0) // stripped
		b = binary.BigEndian.AppendUint32(b, uint32(hl))
		b = append(b, s.Header...)
		b = append(b, make([]byte, pad)...)
	}
	if counters {
		b = binary.BigEndian.AppendUint32(b, 2)  // counter sample
		b = binary.BigEndian.AppendUint32(b, 12) // sequence, source, no records
		b = binary.BigEndian.AppendUint32(b, a.seq)
		b = binary.BigEndian.AppendUint32(b, 1)
		b = binary.BigEndian.AppendUint32(b, 0)
	}
	return b
}

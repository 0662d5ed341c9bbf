// Package collecttest encodes NetFlow v5, NetFlow v9, IPFIX and sFlow v5
// datagrams for the tests, fuzz corpora and benchmarks of flowdedup
// collect, as net/http/httptest serves net/http's. It writes the
// templates and records a router sends (the fields softflowd exports), so
// that a decoder can be checked against a reference decoder on the same
// bytes. It is not a flow exporter: it keeps no flow cache and sends
// nothing.
package collecttest

import (
	"encoding/binary"
	"net/netip"
	"time"
)

// Flow is one flow record to encode.
type Flow struct {
	Src, Dst         netip.Addr // both of one family
	Proto            uint8
	SrcPort, DstPort uint16
	Start, End       time.Time
	Packets, Bytes   uint32
}

// Template IDs the encoders use: one for IPv4 flows, one for IPv6 flows,
// one for the options record (clock and sampling).
const (
	TemplateV4      = 1024
	TemplateV6      = 2048
	TemplateOptions = 256
)

// IANA information elements (and v9 field types) the encoders write.
const (
	ieOctets          = 1
	iePackets         = 2
	ieProtocol        = 4
	ieTOS             = 5
	ieTCPFlags        = 6
	ieSrcPort         = 7
	ieSrcIPv4         = 8
	ieInputIf         = 10
	ieDstPort         = 11
	ieDstIPv4         = 12
	ieOutputIf        = 14
	ieEndSysUpTime    = 21
	ieStartSysUpTime  = 22
	ieSrcIPv6         = 27
	ieDstIPv6         = 28
	ieSamplingInt     = 34
	ieSamplingAlgo    = 35
	ieStartMillis     = 152
	ieEndMillis       = 153
	ieMeteringProcess = 143
	ieSystemInitMs    = 160
)

// fieldSpec is a template field: element and length.
type fieldSpec struct{ id, n uint16 }

// flowFields returns the fields of a flow record of family v6: softflowd's
// own choice (addresses, times, counters, interfaces, ports, protocol,
// flags, ToS), with the start and end times as uptime (v9, and IPFIX as
// softflowd sends it) or as absolute milliseconds (IPFIX, absolute).
func flowFields(v6, absolute bool) []fieldSpec {
	src, dst, an := uint16(ieSrcIPv4), uint16(ieDstIPv4), uint16(4)
	if v6 {
		src, dst, an = ieSrcIPv6, ieDstIPv6, 16
	}
	fs := []fieldSpec{{src, an}, {dst, an}}
	if absolute {
		fs = append(fs, fieldSpec{ieStartMillis, 8}, fieldSpec{ieEndMillis, 8})
	} else {
		fs = append(fs, fieldSpec{ieStartSysUpTime, 4}, fieldSpec{ieEndSysUpTime, 4})
	}
	return append(fs,
		fieldSpec{ieOctets, 4}, fieldSpec{iePackets, 4},
		fieldSpec{ieInputIf, 4}, fieldSpec{ieOutputIf, 4},
		fieldSpec{ieSrcPort, 2}, fieldSpec{ieDstPort, 2},
		fieldSpec{ieProtocol, 1}, fieldSpec{ieTCPFlags, 1}, fieldSpec{ieTOS, 1},
	)
}

// appendFlow appends the record of f for fields fs; uptime converts a time
// to the exporter's uptime in ms.
func appendFlow(b []byte, fs []fieldSpec, f *Flow, uptime func(time.Time) uint32) []byte {
	for _, fl := range fs {
		switch fl.id {
		case ieSrcIPv4, ieSrcIPv6:
			b = append(b, f.Src.AsSlice()...)
		case ieDstIPv4, ieDstIPv6:
			b = append(b, f.Dst.AsSlice()...)
		case ieStartSysUpTime:
			b = binary.BigEndian.AppendUint32(b, uptime(f.Start))
		case ieEndSysUpTime:
			b = binary.BigEndian.AppendUint32(b, uptime(f.End))
		case ieStartMillis:
			b = binary.BigEndian.AppendUint64(b, uint64(f.Start.UnixMilli()))
		case ieEndMillis:
			b = binary.BigEndian.AppendUint64(b, uint64(f.End.UnixMilli()))
		case ieOctets:
			b = binary.BigEndian.AppendUint32(b, f.Bytes)
		case iePackets:
			b = binary.BigEndian.AppendUint32(b, f.Packets)
		case ieInputIf, ieOutputIf:
			b = binary.BigEndian.AppendUint32(b, 0)
		case ieSrcPort:
			b = binary.BigEndian.AppendUint16(b, f.SrcPort)
		case ieDstPort:
			b = binary.BigEndian.AppendUint16(b, f.DstPort)
		case ieProtocol:
			b = append(b, f.Proto)
		case ieTCPFlags, ieTOS:
			b = append(b, 0)
		}
	}
	return b
}

// appendTemplate appends a template record (without a set header).
func appendTemplate(b []byte, id uint16, fs []fieldSpec) []byte {
	b = binary.BigEndian.AppendUint16(b, id)
	b = binary.BigEndian.AppendUint16(b, uint16(len(fs)))
	for _, f := range fs {
		b = binary.BigEndian.AppendUint16(b, f.id)
		b = binary.BigEndian.AppendUint16(b, f.n)
	}
	return b
}

// beginSet appends a set header whose length endSet fills in, and returns
// where the set starts.
func beginSet(b []byte, id uint16) ([]byte, int) {
	start := len(b)
	b = binary.BigEndian.AppendUint16(b, id)
	return append(b, 0, 0), start
}

// endSet pads the set begun at start to 32 bits (when pad) and writes its
// length.
func endSet(b []byte, start int, pad bool) []byte {
	for pad && (len(b)-start)%4 != 0 {
		b = append(b, 0)
	}
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	return b
}

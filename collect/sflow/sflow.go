// Package sflow decodes sFlow version 5 datagrams (sflow.org's sFlow
// Version 5 specification) into the packet headers their flow samples
// carry, in place and without allocating per datagram or per sample.
//
// A flow sample holds the first bytes of a packet the agent sampled (a raw
// packet header record), or the fields of its IP header (sampled IPv4 and
// IPv6 records): Next hands out one Sample per flow sample, the raw header
// when the sample has one. Counter samples and records of other formats
// are skipped and counted, as is whatever is damaged; Reset and Next never
// panic.
//
//	var d sflow.Datagram
//	if err := d.Reset(datagram); err != nil {
//		// counted in d.Stats by reason
//	}
//	var s sflow.Sample
//	for d.Next(&s) {
//		// s.Header (s.Protocol says its link type), or s.Src, s.Dst, ...
//	}
//
// sFlow carries no flow times: a collector stamps samples with their
// arrival. The agent numbers its datagrams (Datagram.Sequence, per agent
// and sub-agent), so loss in transit is counted in datagrams.
package sflow

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// Errors of Reset.
var (
	ErrTruncated = errors.New("sflow: datagram truncated")
	ErrVersion   = errors.New("sflow: not sFlow version 5")
)

// Reason says why (part of) a datagram was not decoded.
type Reason uint8

// Reasons, counted in Stats.Errors; their labels (String) are stable.
const (
	// Truncated: the datagram ends inside its header, or a sample or
	// record claims more bytes than the datagram holds. The rest of the
	// datagram is skipped.
	Truncated Reason = iota
	// BadVersion: the version is not 5, or the agent address type is
	// neither IPv4 nor IPv6. The datagram is skipped.
	BadVersion
	// NoHeader: a flow sample without a record a key can be made of (a
	// raw packet header of a known protocol, or a sampled IPv4 or IPv6
	// header).
	NoHeader
	// NumReasons is the number of reasons.
	NumReasons
)

var reasonLabels = [NumReasons]string{Truncated: "truncated", BadVersion: "bad_version", NoHeader: "no_header"}

// String returns the reason's label.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonLabels[r]
	}
	return "unknown"
}

// Stats are a Datagram's counters since it was made (or reset by the
// caller).
type Stats struct {
	Datagrams uint64 // datagrams whose header was read
	Samples   uint64 // flow samples handed out by Next
	Counters  uint64 // counter samples, skipped
	Other     uint64 // samples of other formats and enterprises, skipped
	Errors    [NumReasons]uint64
}

// Header protocols of a raw packet header record (the sFlow
// header_protocol enumeration) that Sample.Protocol holds.
const (
	ProtoEthernet = 1  // ISO 8802-3 Ethernet
	ProtoIPv4     = 11 // a raw IPv4 packet
	ProtoIPv6     = 12 // a raw IPv6 packet
)

// Sample is one flow sample.
type Sample struct {
	// Header is the sampled packet's first bytes (a raw packet header
	// record), in the datagram's buffer: valid until the buffer is
	// reused. nil when the sample had only a sampled IPv4/IPv6 record.
	Header []byte
	// Protocol is the header's protocol (ProtoEthernet, ProtoIPv4,
	// ProtoIPv6), when Header is set.
	Protocol uint32
	// FrameLength is the sampled packet's length on the wire.
	FrameLength uint32
	// SamplingRate is the sample's 1-in-N sampling rate.
	SamplingRate uint32
	// The fields of a sampled IPv4 or IPv6 record, when Header is nil.
	Src, Dst         netip.Addr
	Proto            uint8
	SrcPort, DstPort uint16
}

// Datagram decodes one datagram: Reset it onto a datagram, then call Next
// until it returns false. Reuse one for every datagram.
type Datagram struct {
	Agent    netip.Addr // the agent's address, from the datagram (not its UDP source)
	SubAgent uint32
	Sequence uint32 // the agent's (and sub-agent's) datagram number
	UptimeMs uint32
	Stats    Stats

	b        []byte // the samples not read yet
	nsamples uint32 // samples the header announces, not read yet
}

// Reset starts decoding datagram b, read in place until the last Next. It
// returns ErrTruncated or ErrVersion (counted in Stats.Errors) when there
// is nothing to decode.
func (d *Datagram) Reset(b []byte) error {
	d.b, d.nsamples = nil, 0
	if len(b) < 8 {
		d.Stats.Errors[Truncated]++
		return ErrTruncated
	}
	if binary.BigEndian.Uint32(b) != 5 {
		d.Stats.Errors[BadVersion]++
		return ErrVersion
	}
	var n int
	switch binary.BigEndian.Uint32(b[4:]) {
	case 1:
		n = 8 + 4
		if len(b) < n+16 {
			break
		}
		d.Agent = netip.AddrFrom4([4]byte(b[8:12]))
	case 2:
		n = 8 + 16
		if len(b) < n+16 {
			break
		}
		d.Agent = netip.AddrFrom16([16]byte(b[8:24]))
	default:
		d.Stats.Errors[BadVersion]++
		return ErrVersion
	}
	if len(b) < n+16 {
		d.Stats.Errors[Truncated]++
		return ErrTruncated
	}
	d.SubAgent = binary.BigEndian.Uint32(b[n:])
	d.Sequence = binary.BigEndian.Uint32(b[n+4:])
	d.UptimeMs = binary.BigEndian.Uint32(b[n+8:])
	d.nsamples = binary.BigEndian.Uint32(b[n+12:])
	d.b = b[n+16:]
	d.Stats.Datagrams++
	return nil
}

// Sample formats (enterprise 0).
const (
	fmtFlow            = 1
	fmtCounter         = 2
	fmtExpandedFlow    = 3
	fmtExpandedCounter = 4
)

// Flow record formats (enterprise 0).
const (
	recRawHeader   = 1
	recSampledIPv4 = 3
	recSampledIPv6 = 4
)

// Next decodes the next flow sample into s and reports whether there was
// one.
func (d *Datagram) Next(s *Sample) bool {
	for ; d.nsamples > 0; d.nsamples-- {
		if len(d.b) < 8 {
			d.truncated()
			return false
		}
		format := binary.BigEndian.Uint32(d.b)
		n := binary.BigEndian.Uint32(d.b[4:])
		if uint64(n) > uint64(len(d.b)-8) {
			d.truncated()
			return false
		}
		body := d.b[8 : 8+n]
		d.b = d.b[8+n:]
		switch format {
		case fmtFlow, fmtExpandedFlow:
			if d.flowSample(body, format == fmtExpandedFlow, s) {
				d.nsamples--
				d.Stats.Samples++
				return true
			}
		case fmtCounter, fmtExpandedCounter:
			d.Stats.Counters++
		default:
			d.Stats.Other++
		}
	}
	d.b = nil
	return false
}

func (d *Datagram) truncated() {
	d.Stats.Errors[Truncated]++
	d.b, d.nsamples = nil, 0
}

// flowSample decodes the flow sample body into s; false when it holds
// nothing to key (counted).
func (d *Datagram) flowSample(body []byte, expanded bool, s *Sample) bool {
	// sequence, source ID (one word, or type and index), sampling rate,
	// pool, drops, input, output (one word each, or format and value),
	// record count.
	hdr := 8 * 4
	rate := 8
	if expanded {
		hdr, rate = 11*4, 12
	}
	if len(body) < hdr {
		d.Stats.Errors[Truncated]++
		return false
	}
	*s = Sample{SamplingRate: binary.BigEndian.Uint32(body[rate:])}
	nrec := binary.BigEndian.Uint32(body[hdr-4:])
	recs := body[hdr:]
	found := false
	for ; nrec > 0; nrec-- {
		if len(recs) < 8 {
			d.Stats.Errors[Truncated]++
			return false
		}
		format := binary.BigEndian.Uint32(recs)
		n := binary.BigEndian.Uint32(recs[4:])
		if uint64(n) > uint64(len(recs)-8) {
			d.Stats.Errors[Truncated]++
			return false
		}
		rec := recs[8 : 8+n]
		recs = recs[8+n:]
		switch format {
		case recRawHeader:
			if len(rec) < 16 {
				d.Stats.Errors[Truncated]++
				return false
			}
			proto := binary.BigEndian.Uint32(rec)
			hl := binary.BigEndian.Uint32(rec[12:])
			if uint64(hl) > uint64(len(rec)-16) {
				d.Stats.Errors[Truncated]++
				return false
			}
			if hl == 0 || proto != ProtoEthernet && proto != ProtoIPv4 && proto != ProtoIPv6 {
				continue // no header, or of a protocol flow.Parse does not read
			}
			s.Header, s.Protocol = rec[16:16+hl], proto
			s.FrameLength = binary.BigEndian.Uint32(rec[4:])
			s.Src, s.Dst, s.Proto, s.SrcPort, s.DstPort = netip.Addr{}, netip.Addr{}, 0, 0, 0
			return true // the raw header is what the key is made of
		case recSampledIPv4:
			if len(rec) < 32 || found {
				continue
			}
			s.FrameLength = binary.BigEndian.Uint32(rec)
			s.Proto = uint8(binary.BigEndian.Uint32(rec[4:]))
			s.Src = netip.AddrFrom4([4]byte(rec[8:12]))
			s.Dst = netip.AddrFrom4([4]byte(rec[12:16]))
			s.SrcPort = uint16(binary.BigEndian.Uint32(rec[16:]))
			s.DstPort = uint16(binary.BigEndian.Uint32(rec[20:]))
			found = true
		case recSampledIPv6:
			if len(rec) < 56 || found {
				continue
			}
			s.FrameLength = binary.BigEndian.Uint32(rec)
			s.Proto = uint8(binary.BigEndian.Uint32(rec[4:]))
			s.Src = netip.AddrFrom16([16]byte(rec[8:24]))
			s.Dst = netip.AddrFrom16([16]byte(rec[24:40]))
			s.SrcPort = uint16(binary.BigEndian.Uint32(rec[40:]))
			s.DstPort = uint16(binary.BigEndian.Uint32(rec[44:]))
			found = true
		}
	}
	if !found {
		d.Stats.Errors[NoHeader]++
	}
	return found
}

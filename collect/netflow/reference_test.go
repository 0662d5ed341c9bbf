package netflow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"net/netip"

	gfnetflow "github.com/netsampler/goflow2/v2/decoders/netflow"
	"github.com/netsampler/goflow2/v2/decoders/netflowlegacy"
)

// reference decodes messages with goflow2's decoders, the reference this
// package is checked against: it keeps goflow2's template system and the
// IPFIX exporter clocks (systemInitTimeMilliseconds) of one session.
type reference struct {
	templates gfnetflow.NetFlowTemplateSystem
	initMs    map[uint32]uint64 // by observation domain
}

func newReference() *reference {
	return &reference{templates: guardedTemplates{gfnetflow.CreateTemplateSystem()}, initMs: map[uint32]uint64{}}
}

// guardedTemplates is goflow2's template system refusing templates whose
// records have no length: goflow2 2.2.6 decodes a data set of such a
// template by appending empty records until memory runs out (found by
// FuzzMessages; testdata/fuzz/FuzzMessages/07a0e0f0887e2510). Refusing
// the template makes goflow2 return an error instead, and the fuzz target
// then does not compare.
type guardedTemplates struct {
	gfnetflow.NetFlowTemplateSystem
}

func (g guardedTemplates) AddTemplate(version uint16, domain uint32, id uint16, t any) error {
	var fields []gfnetflow.Field
	switch t := t.(type) {
	case gfnetflow.TemplateRecord:
		fields = t.Fields
	case gfnetflow.IPFIXOptionsTemplateRecord:
		fields = append(append(fields, t.Scopes...), t.Options...)
	case gfnetflow.NFv9OptionsTemplateRecord:
		fields = append(append(fields, t.Scopes...), t.Options...)
	}
	if gfnetflow.GetTemplateSize(version, fields) == 0 {
		return errors.New("reference: a template of records of no length")
	}
	return g.NetFlowTemplateSystem.AddTemplate(version, domain, id, t)
}

// decode returns the flow records of msg as goflow2 reads them, or its
// error.
func (ref *reference) decode(msg []byte) ([]Record, error) {
	if len(msg) >= 2 && binary.BigEndian.Uint16(msg) == 5 {
		var p netflowlegacy.PacketNetFlowV5
		if err := netflowlegacy.DecodeMessageVersion(bytes.NewBuffer(msg), &p); err != nil {
			return nil, err
		}
		exportNs := int64(p.UnixSecs)*1e9 + int64(p.UnixNSecs)
		var recs []Record
		for _, r := range p.Records {
			recs = append(recs, Record{
				Src:      netip.AddrFrom4(ipv4(uint32(r.SrcAddr))),
				Dst:      netip.AddrFrom4(ipv4(uint32(r.DstAddr))),
				Proto:    r.Proto,
				SrcPort:  r.SrcPort,
				DstPort:  r.DstPort,
				HasProto: true,
				HasPorts: true,
				StartNs:  uptimeNs(exportNs, p.SysUptime, r.First),
			})
		}
		return recs, nil
	}
	var v9 gfnetflow.NFv9Packet
	var ipfix gfnetflow.IPFIXPacket
	if err := gfnetflow.DecodeMessageVersion(bytes.NewBuffer(msg), ref.templates, &v9, &ipfix); err != nil {
		return nil, err
	}
	var sets []any
	var version uint16
	var exportNs int64
	var uptime, domain uint32
	if v9.Version == 9 {
		sets, version, exportNs, uptime, domain = v9.FlowSets, 9, int64(v9.UnixSeconds)*1e9, v9.SystemUptime, v9.SourceId
	} else {
		sets, version, exportNs, domain = ipfix.FlowSets, 10, int64(ipfix.ExportTime)*1e9, ipfix.ObservationDomainId
	}
	var recs []Record
	for _, set := range sets {
		switch s := set.(type) {
		case gfnetflow.OptionsDataFlowSet:
			for _, r := range s.Records {
				for _, f := range r.OptionsValues {
					if f.Type == ieSystemInitTimeMillis && !f.PenProvided {
						if b, ok := f.Value.([]byte); ok && len(b) == 8 {
							ref.initMs[domain] = binary.BigEndian.Uint64(b)
						}
					}
				}
			}
		case gfnetflow.DataFlowSet:
			for _, r := range s.Records {
				recs = append(recs, ref.record(r.Values, version, exportNs, uptime, domain))
			}
		}
	}
	return recs, nil
}

// record reads the fields of a flow key and the start time from goflow2's
// data fields, with the same precedence of time fields as Message.
func (ref *reference) record(values []gfnetflow.DataField, version uint16, exportNs int64, uptime, domain uint32) Record {
	var r Record
	var sport, dport, upt, milli, sec, micro, nano, delta []byte
	var src4, src6, dst4, dst6 []byte
	for _, f := range values {
		b, _ := f.Value.([]byte)
		if f.PenProvided {
			continue
		}
		switch f.Type {
		case ieSrcIPv4:
			src4 = b
		case ieSrcIPv6:
			src6 = b
		case ieDstIPv4:
			dst4 = b
		case ieDstIPv6:
			dst6 = b
		case ieProtocol:
			if len(b) == 1 {
				r.Proto, r.HasProto = b[0], true
			}
		case ieSrcPort:
			sport = b
		case ieDstPort:
			dport = b
		case ieStartSysUpTime:
			upt = b
		case ieStartMilliseconds:
			milli = b
		case ieStartSeconds:
			sec = b
		case ieStartMicroseconds:
			micro = b
		case ieStartNanoseconds:
			nano = b
		case ieStartDeltaMicros:
			delta = b
		}
	}
	// An IPv4 address wins over an IPv6 one in the same record, as in
	// Message.
	for _, a := range [][]byte{src6, src4} {
		if ip, ok := netip.AddrFromSlice(a); ok {
			r.Src = ip
		}
	}
	for _, a := range [][]byte{dst6, dst4} {
		if ip, ok := netip.AddrFromSlice(a); ok {
			r.Dst = ip
		}
	}
	if sport != nil && dport != nil {
		r.SrcPort, r.DstPort, r.HasPorts = uint16(beUint(sport)), uint16(beUint(dport)), true
	}
	switch {
	case milli != nil:
		r.StartNs = refMs(beUint(milli), 0)
	case sec != nil:
		r.StartNs = int64(beUint(sec)) * 1e9
	case micro != nil:
		r.StartNs = ntpToNs(beUint(micro))
	case nano != nil:
		r.StartNs = ntpToNs(beUint(nano))
	case delta != nil:
		r.StartNs = exportNs - int64(beUint(delta))*1e3
	case upt != nil && version == 9:
		r.StartNs = uptimeNs(exportNs, uptime, uint32(beUint(upt)))
	case upt != nil && ref.initMs[domain] != 0:
		r.StartNs = refMs(ref.initMs[domain], beUint(upt))
	default:
		r.StartNs = exportNs
	}
	return r
}

// uptimeNs is the start time of a flow that started at uptime first of an
// exporter whose uptime was uptime at exportNs: before it, modulo 2^32 ms,
// unless first is ahead of uptime by less than 2^31 ms (see
// Message.uptimeToNs), as nfdump reads it.
func uptimeNs(exportNs int64, uptime, first uint32) int64 {
	if first > uptime && first-uptime < 1<<31 {
		return exportNs + int64(first-uptime)*1e6
	}
	return exportNs - int64(uptime-first)*1e6
}

// refMs is the time of base+ms Unix ms in Unix ns, or math.MinInt64 (a
// time that cannot be) when the sum overflows 64 bits or int64 ns.
func refMs(base, ms uint64) int64 {
	sum, carry := bits.Add64(base, ms, 0)
	if carry != 0 || sum > (1<<63-1)/1_000_000 {
		return math.MinInt64
	}
	return int64(sum) * 1e6
}

func beUint(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

func ipv4(v uint32) [4]byte {
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], v)
	return a
}

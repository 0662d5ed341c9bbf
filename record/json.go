package record

import (
	"strconv"
	"time"

	"github.com/flowdedup/flowdedup/flow"
)

// AppendJSON appends r's JSON line, newline included: the line of --out's
// jsonl format (docs/architecture.md#records-and-summaries), which the
// spool's rejected files hold too.
//
// A key with a segment (flow.Key.Segment: taken inside VXLAN or Geneve)
// has its VNI in a "vni" number after the key's fields, before "window":
//
//	{"ts":"2026-01-01T00:00:01.5Z","src":"10.0.0.1","vni":100,"window":"2026-01-01T00:00:00Z"}
//
// A key without one has no "vni", and its line is the line written before
// segments existed, byte for byte.
func AppendJSON(b []byte, r *Record) []byte {
	k := &r.Key
	b = append(b, `{"ts":"`...)
	b = appendTime(b, r.TimeNs)
	b = append(b, '"')
	if k.Kind() != flow.KeyDst {
		b = append(b, `,"src":"`...)
		b = k.AppendSrc(b)
		b = append(b, '"')
	}
	if k.Kind() != flow.KeySrc {
		b = append(b, `,"dst":"`...)
		b = k.AppendDst(b)
		b = append(b, '"')
	}
	if k.Kind() == flow.Key5Tuple {
		b = append(b, `,"proto":`...)
		b = strconv.AppendUint(b, uint64(k.Proto()), 10)
		if name := flow.ProtoName(k.Proto()); name != "" {
			b = append(b, `,"proto_name":"`...)
			b = append(b, name...)
			b = append(b, '"')
		}
		if k.HasPorts() {
			b = append(b, `,"sport":`...)
			b = strconv.AppendUint(b, uint64(k.SrcPort()), 10)
			b = append(b, `,"dport":`...)
			b = strconv.AppendUint(b, uint64(k.DstPort()), 10)
		}
	}
	if vni, ok := k.Segment(); ok {
		b = append(b, `,"vni":`...)
		b = strconv.AppendUint(b, uint64(vni), 10)
	}
	if r.Windowed {
		b = append(b, `,"window":"`...)
		b = appendTime(b, r.WindowNs)
		b = append(b, '"')
	}
	return append(b, "}\n"...)
}

// appendTime appends the instant ns nanoseconds after the Unix epoch in
// RFC 3339 form, in UTC, without trailing zeros in the fraction.
func appendTime(b []byte, ns int64) []byte {
	return time.Unix(0, ns).UTC().AppendFormat(b, time.RFC3339Nano)
}

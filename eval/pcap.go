package eval

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/pcapfile"
	"github.com/flowdedup/flowdedup/flow"
)

// PcapSpec is a pcap stream spec,
// pcap:PATH[,key=KIND][,prefix=V4LEN[,V6LEN]][,decap=LIST], as eval and
// tune read it.
type PcapSpec struct {
	Path string
	// Kind is the key= kind; 0 when the spec has none.
	Kind flow.KeyKind
	// Prefix is the prefix= lengths (flow.ParseMask's text, so 24,64 with
	// its comma); HasPrefix says whether the spec has prefix=.
	Prefix    flow.Mask
	HasPrefix bool
	// Decap is the decap= tunnels (flow.ParseDecap's text, replay's
	// --decap: "all", "gre,vxlan=4789"), whose innermost IP header keys a
	// frame; HasDecap says whether the spec has decap=.
	Decap    flow.Decap
	HasDecap bool
}

// pcapUsage is the grammar of a pcap spec, for errors.
const pcapUsage = "pcap:PATH[,key=KIND][,prefix=V4LEN[,V6LEN]][,decap=LIST]"

// ParsePcapSpec reads rest, what follows "pcap:" in a stream spec. The
// options key=, prefix= and decap= come after the path, each at most once,
// in any order; they are read from the end, so that the path may hold
// commas, and prefix='s and decap='s values may too (24,64; gre,vxlan).
func ParsePcapSpec(rest string) (PcapSpec, error) {
	var ps PcapSpec
	var hasKind bool
	for {
		ik, ip, id := strings.LastIndex(rest, ",key="), strings.LastIndex(rest, ",prefix="), strings.LastIndex(rest, ",decap=")
		switch {
		case ik < 0 && ip < 0 && id < 0:
			if rest == "" {
				return ps, fmt.Errorf("%w: pcap needs a path (%s)", ErrStreamSpec, pcapUsage)
			}
			ps.Path = rest
			return ps, nil
		case id > ik && id > ip:
			if ps.HasDecap {
				return ps, fmt.Errorf("%w: decap= given twice", ErrStreamSpec)
			}
			d, err := flow.ParseDecap(rest[id+len(",decap="):])
			if err != nil {
				return ps, fmt.Errorf("%w: %w", ErrStreamSpec, err)
			}
			ps.Decap, ps.HasDecap, rest = d, true, rest[:id]
		case ik > ip:
			if hasKind {
				return ps, fmt.Errorf("%w: key= given twice", ErrStreamSpec)
			}
			k, err := flow.ParseKeyKind(rest[ik+len(",key="):])
			if err != nil {
				return ps, fmt.Errorf("%w: %v", ErrStreamSpec, err)
			}
			ps.Kind, hasKind, rest = k, true, rest[:ik]
		default:
			if ps.HasPrefix {
				return ps, fmt.Errorf("%w: prefix= given twice", ErrStreamSpec)
			}
			v := rest[ip+len(",prefix="):]
			m, err := flow.ParseMask(v)
			if err == nil && v == "" {
				err = fmt.Errorf("%w: prefix= needs V4LEN[,V6LEN]", flow.ErrBadMask)
			}
			if err != nil {
				return ps, fmt.Errorf("%w: %w", ErrStreamSpec, err)
			}
			ps.Prefix, ps.HasPrefix, rest = m, true, rest[:ip]
		}
	}
}

// String returns the spec, pcap:PATH with its options.
func (ps PcapSpec) String() string {
	s := "pcap:" + ps.Path
	if ps.Kind != 0 {
		s += ",key=" + ps.Kind.String()
	}
	if ps.HasPrefix {
		s += ",prefix=" + ps.Prefix.String()
	}
	if ps.HasDecap {
		s += ",decap=" + ps.Decap.String()
	}
	return s
}

// pcapStream is the flow keys of a capture file, as replay extracts them
// (with the spec's prefix=, as replay --prefix, and its decap=, as replay
// --decap): frames the parser rejects are not elements (replay counts them
// as malformed or skipped instead).
type pcapStream struct {
	spec PcapSpec // Kind set: src unless the spec says
}

func parsePcapStream(spec, rest string) (Stream, error) {
	ps, err := ParsePcapSpec(rest)
	if err != nil {
		return nil, fmt.Errorf("eval: %q: %w", spec, err)
	}
	if ps.Kind == 0 {
		ps.Kind = flow.KeySrc
	}
	return pcapStream{spec: ps}, nil
}

func (s pcapStream) String() string { return s.spec.String() }

func (s pcapStream) Materialize(seed uint64) (*Elements, error) {
	src, err := pcapfile.Open(s.spec.Path)
	if err != nil {
		return nil, fmt.Errorf("eval: stream %s: %w", s, err)
	}
	defer src.Close()
	e := &Elements{}
	seen := map[flow.Key]struct{}{}
	var pkt capture.Packet
	for {
		err := src.Next(&pkt)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// A damaged file ends its framing; what was read before it is
			// the stream, as in replay.
			if errors.Is(err, capture.ErrCorrupt) {
				continue
			}
			return nil, fmt.Errorf("eval: stream %s: %w", s, err)
		}
		var k flow.Key
		if err := k.DecodeDecap(pkt.Data, pkt.LinkType, s.spec.Kind, &s.spec.Decap); err != nil {
			continue
		}
		s.spec.Prefix.Apply(&k)
		_, dup := seen[k]
		if !dup {
			seen[k] = struct{}{}
		}
		e.Hashes = append(e.Hashes, k.Hash(seed))
		e.Dup = append(e.Dup, dup)
	}
	if len(e.Hashes) == 0 {
		return nil, fmt.Errorf("eval: stream %s: %w: no frame of the capture has a flow key", s, ErrStreamSpec)
	}
	return e, nil
}

// WithDecap returns stream with its frames keyed through the tunnels of d
// (replay's --decap), unless its spec says decap= itself: eval's and
// tune's --decap. Streams other than pcap: carry no packets; for them it
// fails (wrapping ErrStreamSpec) when d lists tunnels, and returns the
// stream as it is when not.
func WithDecap(stream Stream, d flow.Decap) (Stream, error) {
	ps, ok := stream.(pcapStream)
	if !ok {
		if d.Tunnels != 0 {
			return nil, fmt.Errorf("eval: --decap %s: %w: %s is no capture (--decap keys the frames of pcap: streams)", d, ErrStreamSpec, stream)
		}
		return stream, nil
	}
	if !ps.spec.HasDecap && d.Tunnels != 0 {
		ps.spec.Decap, ps.spec.HasDecap = d, true
	}
	return ps, nil
}

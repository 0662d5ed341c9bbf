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

// pcapStream is the flow keys of a capture file, as replay extracts them:
// frames flow.Parse rejects are not elements (replay counts them as
// malformed or skipped instead).
type pcapStream struct {
	path string
	kind flow.KeyKind
}

func parsePcapStream(spec, rest string) (Stream, error) {
	path, kind := rest, flow.KeySrc
	if i := strings.LastIndex(rest, ",key="); i >= 0 {
		k, err := flow.ParseKeyKind(rest[i+len(",key="):])
		if err != nil {
			return nil, fmt.Errorf("eval: %q: %w: %v", spec, ErrStreamSpec, err)
		}
		path, kind = rest[:i], k
	}
	if path == "" {
		return nil, fmt.Errorf("eval: %q: %w: pcap needs a path (pcap:PATH[,key=src|dst|pair|5tuple])", spec, ErrStreamSpec)
	}
	return pcapStream{path: path, kind: kind}, nil
}

func (s pcapStream) String() string { return "pcap:" + s.path + ",key=" + s.kind.String() }

func (s pcapStream) Materialize(seed uint64) (*Elements, error) {
	src, err := pcapfile.Open(s.path)
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
		k, err := flow.Parse(pkt.Data, pkt.LinkType, s.kind)
		if err != nil {
			continue
		}
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

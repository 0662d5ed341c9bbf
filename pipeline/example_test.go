package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/record"
)

// printSink writes what the pipeline reports.
type printSink struct{}

func (printSink) Record(r *record.Record) error {
	fmt.Printf("record %v at +%v\n", r.Key, time.Duration(r.TimeNs-r.WindowNs))
	return nil
}

func (printSink) Window(s *record.WindowSummary) error {
	fmt.Printf("window +%v: %d packets, %d keys, %d distinct, final %v\n",
		time.Duration(s.StartNs-start), s.Packets, s.Keys, s.Distinct, s.Final)
	return nil
}

func (printSink) Close() error { return nil }

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// rawSource replays raw IPv4 headers (link type flow.LinkIPv4), one every
// 400 ms.
type rawSource struct{ srcs []byte }

func (s *rawSource) Next(p *capture.Packet) error {
	if len(s.srcs) == 0 {
		return io.EOF
	}
	hdr := []byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, s.srcs[0], 192, 0, 2, 1}
	p.Data, p.WireLen, p.LinkType = hdr, len(hdr), flow.LinkIPv4
	p.TimeNs = start + int64(5-len(s.srcs))*int64(400*time.Millisecond)
	s.srcs = s.srcs[1:]
	return nil
}

func (s *rawSource) Close() error { return nil }

// Distinct source addresses per one-second window: 10.0.0.1 is reported
// again in the second window, since windows are independent.
func Example() {
	p, err := pipeline.New(pipeline.Config{
		Workers: 1,
		Filter:  "exact",
		Key:     flow.KeySrc,
		Window:  time.Second,
	}, printSink{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Run(context.Background(), &rawSource{srcs: []byte{1, 2, 1, 1, 3}}); err != nil {
		fmt.Println(err)
	}
	// Output:
	// record 10.0.0.1 at +0s
	// record 10.0.0.2 at +400ms
	// window +0s: 3 packets, 3 keys, 2 distinct, final false
	// record 10.0.0.1 at +200ms
	// record 10.0.0.3 at +600ms
	// window +1s: 2 packets, 2 keys, 2 distinct, final true
}

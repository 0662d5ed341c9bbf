package pcapfile

import (
	"testing"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/capturetest"
	"github.com/flowdedup/flowdedup/flow"
)

// TestSource checks the Reader against the contract of capture.Source,
// on a pcap file and on a gzip-compressed pcapng file.
func TestSource(t *testing.T) {
	pkts := testFrames(20, 28, false)
	frames := make([][]byte, len(pkts))
	for i, p := range pkts {
		frames[i] = p.data
	}
	for _, file := range []struct {
		name string
		data func(t *testing.T) []byte
	}{
		{"pcap", func(t *testing.T) []byte { return writePcap(t, pkts, flow.LinkEthernet, true) }},
		{"pcapng.gz", func(t *testing.T) []byte { return gzipBytes(t, writeNg(t, pkts, flow.LinkEthernet)) }},
	} {
		t.Run(file.name, func(t *testing.T) {
			capturetest.Run(t, capturetest.Backend{
				Open: func(t *testing.T) capture.Source {
					s, err := Open(writeTemp(t, "a."+file.name, file.data(t)))
					if err != nil {
						t.Fatal(err)
					}
					return s
				},
				Frames: frames,
			})
		})
	}
}

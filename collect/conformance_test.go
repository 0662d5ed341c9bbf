package collect

import (
	"net/netip"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/capture/capturetest"
	"github.com/flowdedup/flowdedup/collect/collecttest"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// TestSource checks a Collector's Source against the contract of
// capture.Source (capturetest): each "frame" is a NetFlow v5 datagram of
// one flow, and Next returns the flow's source key, in the order sent;
// Close wakes a Next waiting for a datagram (in Go, on the readers'
// channel, not in the kernel).
func TestSource(t *testing.T) {
	var frames [][]byte
	key := map[string]flow.Key{}
	e := collecttest.Exporter{Version: 5, Boot: exportTime.Add(-time.Hour)}
	for _, f := range collecttest.Flows(40, 28, exportTime) {
		if !f.Src.Is4() || len(frames) == 10 {
			continue // v5 carries IPv4 flows only
		}
		msg := e.Encode(exportTime, []collecttest.Flow{f}, 1)[0]
		frames = append(frames, msg)
		key[string(msg)] = flow.MakeKey(flow.KeySrc, f.Src, netip.Addr{}, 0, 0, 0)
	}
	var c *Collector
	capturetest.Run(t, capturetest.Backend{
		Open: func(t *testing.T) capture.Source {
			// An hour's poll interval: an idle Next waits until a
			// datagram comes or Close.
			c = open(t, NetFlow, flow.KeySrc, func(cfg *Config) { cfg.PollInterval = time.Hour })
			return c.Source()
		},
		Send:   func(t *testing.T, frames [][]byte) { send(t, c.Addrs()[0], frames) },
		Match:  func(p *capture.Packet, frame []byte) bool { return p.Key == key[string(frame)] },
		Frames: frames,
		Live:   true,
		Blocked: func(t *testing.T, tid int) {
			testutil.WaitBlockedIn(t, "github.com/flowdedup/flowdedup/collect.(*source).wait", time.Minute)
		},
	})
}

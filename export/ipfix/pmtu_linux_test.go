package ipfix_test

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/flowdedup/flowdedup/export/ipfix"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/internal/testutil"
)

// TestPathMTURoute: the UDP message size follows the path MTU the kernel
// holds for the collector: the MTU of the interface a route goes out of,
// or the route's own MTU when it has one (as a tunnel's route would), less
// 28 bytes of IPv4 and UDP headers. Nothing is sent: connecting a UDP
// socket is enough for the kernel to pick the route.
func TestPathMTURoute(t *testing.T) {
	ns := testutil.NetNS(t)
	nl := ns.Netlink()
	veth := ns.Link(t, ns.Veth[0])
	if err := nl.LinkSetMTU(veth, 1400); err != nil {
		t.Fatalf("set MTU: %v", err)
	}
	addr, _ := netlink.ParseAddr("10.231.0.1/24")
	if err := nl.AddrAdd(veth, addr); err != nil {
		t.Fatalf("add address: %v", err)
	}
	_, dst, _ := net.ParseCIDR("10.232.0.0/24")
	if err := nl.RouteAdd(&netlink.Route{LinkIndex: veth.Attrs().Index, Dst: dst, Gw: net.IPv4(10, 231, 0, 2), MTU: 1280}); err != nil {
		t.Fatalf("add route: %v", err)
	}
	for _, c := range []struct {
		collector string
		want      int
	}{
		{"10.231.0.9:4739", 1400 - 28}, // on the link: the interface's MTU
		{"10.232.0.9:4739", 1280 - 28}, // through the route with an MTU
	} {
		var e *ipfix.Destination
		err := ns.Do(func() error {
			var err error
			e, err = ipfix.New(ipfix.Config{Network: "udp", Address: c.collector, Kind: flow.KeySrc})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.MessageSize(); got != c.want {
			t.Errorf("collector %s: MessageSize() = %d, want %d", c.collector, got, c.want)
		}
		e.Close()
	}
}

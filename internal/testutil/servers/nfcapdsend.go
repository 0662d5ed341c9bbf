package servers

import (
	"net"
	"testing"
)

// Send sends msgs to nfcapd from a UDP socket of the test's own, in bursts
// small enough for nfcapd's socket buffer (its -B cannot raise it above
// net.core.rmem_max), waiting for nfcapd to read each burst before the
// next (WaitRead). A datagram the kernel dropped anyway fails tb.
func (n *Nfcapd) Send(tb testing.TB, msgs [][]byte) {
	tb.Helper()
	c, err := net.Dial("udp", n.Addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	const burst = 64 // about 90 KiB of 1400-byte datagrams: half the default buffer
	for i, m := range msgs {
		if _, err := c.Write(m); err != nil {
			tb.Fatal(err)
		}
		if (i+1)%burst == 0 || i == len(msgs)-1 {
			if d := n.WaitRead(tb); d != 0 {
				tb.Fatalf("the kernel dropped %d of nfcapd's datagrams", d)
			}
		}
	}
}

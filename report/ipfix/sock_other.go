//go:build !linux

package ipfix

import "net"

// pathMTU returns 0: the path MTU is read on Linux only.
func pathMTU(c *net.UDPConn, v6 bool) int { return 0 }

// peeker finds closed connections on Linux only; elsewhere a closed
// connection is found by the write that fails.
type peeker struct{}

func newPeeker(c *net.TCPConn) *peeker { return nil }

func (p *peeker) peerClosed() bool { return false }

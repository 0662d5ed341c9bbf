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

// rawConn stands for a TCP connection's raw socket, which is looked at on
// Linux only.
type rawConn struct{}

// newRawConn reports false: a message counts as sent when written.
func newRawConn(c *net.TCPConn) (rawConn, bool) { return rawConn{}, false }

func bytesAcked(rawConn) (uint64, bool) { return 0, false }

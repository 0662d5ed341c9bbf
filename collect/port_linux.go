//go:build linux

package collect

import "unsafe"

// port returns the source port of datagram i of the batch: the transport
// session (with its address) that scopes an exporter's templates and
// sequence numbers. sockaddr_in and sockaddr_in6 hold it at one offset,
// in network byte order.
func (b *datagrams) port(i int) uint16 {
	p := (*[2]byte)(unsafe.Pointer(&b.names[i].Port))
	return uint16(p[0])<<8 | uint16(p[1])
}

//go:build !linux

package collect

// port returns 0: the portable receiver does not keep the source port,
// so an address's datagrams share one transport session.
func (b *datagrams) port(int) uint16 { return 0 }

// Package sockwait lets a capture source sleep until its socket has frames,
// its poll interval ends, or Close wakes it: the poll(2)-plus-eventfd wait
// that the AF_PACKET (capture/afpacket) and AF_XDP (capture/afxdp) sources share.
//
// A Waiter belongs to one socket: its reader calls Wait, any goroutine may
// call Wake, and Close releases the eventfd. The package makes its system
// calls (poll, eventfd) through golang.org/x/sys/unix. Linux only.
package sockwait

//go:build linux && !(mips || mips64 || ppc64 || s390x)

package xdp

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Promisc puts the interface called iface in promiscuous mode until the
// returned Closer is closed, or the process ends: the mode is a membership of
// an AF_PACKET socket that receives nothing (protocol 0), and the kernel drops
// the membership with the socket, even when the process is killed. The XDP
// hook sees what the NIC accepts, so a mirror port needs this to see frames
// addressed to other hosts.
func Promisc(iface string) (*os.File, error) {
	ifindex, err := InterfaceIndex(iface)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if IsPermission(err) {
			return nil, fmt.Errorf("%w: promiscuous mode needs CAP_NET_RAW: %v", ErrPermission, err)
		}
		return nil, fmt.Errorf("xdp: promiscuous mode: %w", err)
	}
	mreq := unix.PacketMreq{Ifindex: int32(ifindex), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("xdp: promiscuous mode on %s: %w", iface, err)
	}
	return os.NewFile(uintptr(fd), "promisc:"+iface), nil
}

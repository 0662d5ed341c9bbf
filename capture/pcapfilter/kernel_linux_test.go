package pcapfilter

import (
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestKernelAccepts attaches every program of the tcpdump
// comparison, and a long one, to a socket: the kernel's checker must take
// them. A UDP socket needs no privilege for this.
func TestKernelAccepts(t *testing.T) {
	// 40 ports: long jumps, within what this kernel takes (about 2000
	// instructions, bounded by net.core.optmem_max once converted to eBPF).
	exprs := append([]string{"", strings.Repeat("port 1 or ", 40) + "port 2"}, tcpdumpExprs...)
	for _, lt := range linkTypes {
		for _, expr := range exprs {
			prog, err := Compile(expr, lt, 256)
			if err != nil {
				continue // rejects all on this link type
			}
			// A socket per program: a replaced filter is freed, and its
			// socket memory returned, only after an RCU grace period.
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatalf("UDP socket: %v", err)
			}
			fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
			if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog); err != nil {
				t.Errorf("%v %q: the kernel refuses the %d-instruction program: %v", lt, expr, len(prog), err)
			}
			unix.Close(fd)
		}
	}
}

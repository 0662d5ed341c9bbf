package pcapfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeEmpty reports whether nothing waits to be read in the pipe r
// (FIONREAD, TIOCINQ on Linux, is 0), without putting r into blocking mode
// as Fd would.
func pipeEmpty(r *os.File) bool {
	rc, err := r.SyscallConn()
	if err != nil {
		return false
	}
	n := -1
	rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	return n == 0
}

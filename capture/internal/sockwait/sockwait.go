//go:build linux

package sockwait

import (
	"encoding/binary"
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// Result says why Wait returned.
type Result int

// Results of Wait.
const (
	Ready   Result = iota // the socket is readable
	Timeout               // the deadline passed first
	Woken                 // Wake was called (the source is closing)
)

// Waiter waits on one socket. Wait is called by the source's reader only;
// Wake may be called from any goroutine.
type Waiter struct {
	sock int
	efd  int            // eventfd written by Wake, -1 once closed
	fds  [2]unix.PollFd // kept here so that waiting allocates nothing
}

// New returns a Waiter for the socket sock, which the caller keeps owning.
func New(sock int) (*Waiter, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return &Waiter{sock: sock, efd: efd}, nil
}

// Wait blocks until the socket is readable, deadline passes (the zero time:
// never), or Wake is called. A socket in an error state is an error: its
// pending error (SockError), which reading clears.
func (w *Waiter) Wait(deadline time.Time) (Result, error) {
	for {
		timeout := -1
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return Timeout, nil
			}
			timeout = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		w.fds = [2]unix.PollFd{
			{Fd: int32(w.sock), Events: unix.POLLIN},
			{Fd: int32(w.efd), Events: unix.POLLIN},
		}
		n, err := unix.Poll(w.fds[:], timeout)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return Ready, err
		case w.fds[1].Revents != 0:
			return Woken, nil
		case n == 0:
			return Timeout, nil
		case w.fds[0].Revents&unix.POLLERR != 0:
			if err := SockError(w.sock); err != nil {
				return Ready, err
			}
			// An error condition with no error to read would make
			// every poll return at once: report it rather than spin.
			return Ready, errors.New("poll reports an error condition the socket does not explain")
		}
		return Ready, nil
	}
}

// Wake makes a Wait in progress, and every later one, return Woken. The
// eventfd is never read, so the wake-up cannot be lost.
func (w *Waiter) Wake() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(w.efd, one[:])
}

// Close releases the eventfd; call it once no Wait can be running. It is
// safe to call more than once.
func (w *Waiter) Close() error {
	if w.efd < 0 {
		return nil
	}
	err := unix.Close(w.efd)
	w.efd = -1
	return err
}

// SockError reads and clears the pending error of the socket fd: nil when
// there is none.
func SockError(fd int) error {
	errno, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err == nil && errno != 0 {
		err = unix.Errno(errno)
	}
	return err
}

// CloseSocket closes the socket *fd, unless it is -1 already, and sets *fd
// to -1, then closes w (when not nil), which wakes a Wait in progress. A
// capture source releases its kernel objects with it and Unmap, on Close or
// from the cleanup of a source dropped without Close; both are safe to call
// again.
func CloseSocket(fd *int, w *Waiter) {
	if *fd >= 0 {
		unix.Close(*fd)
		*fd = -1
	}
	if w != nil {
		w.Close()
	}
}

// Unmap unmaps each mapping that is not nil and sets it to nil.
func Unmap(maps ...*[]byte) {
	for _, m := range maps {
		if *m != nil {
			unix.Munmap(*m)
			*m = nil
		}
	}
}

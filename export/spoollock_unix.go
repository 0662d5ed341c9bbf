//go:build unix

package export

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir opens and locks (flock, exclusive, without waiting) the lock file
// path, so that two processes never use one spool directory at once: each
// would send the other's files. The lock goes with the process, so a crash
// never leaves it held.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: another flowdedup uses it (give each its own --spool)", ErrSpoolInUse)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

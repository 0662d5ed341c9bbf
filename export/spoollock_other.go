//go:build !unix

package export

import "os"

// lockDir opens the lock file path. Without flock, nothing keeps a second
// process from using the same spool directory.
func lockDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}

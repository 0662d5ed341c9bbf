//go:build !linux

package pcapfile

import "os"

// pollableStdin returns standard input: elsewhere than on Linux, opening
// /dev/stdin may share the file description of the inherited one, whose
// mode must not change under the processes that share it. Reads of a pipe
// on standard input then wait for data as long as it takes.
func pollableStdin() (*os.File, bool) { return os.Stdin, false }

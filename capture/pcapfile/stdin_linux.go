package pcapfile

import "os"

// pollableStdin returns standard input as a file whose reads can time out,
// when it is a pipe, and whether it opened that file (which the caller
// then closes). A pipe inherited as standard input is in blocking mode,
// and Go's runtime can put a deadline only on a file in non-blocking mode;
// switching the inherited descriptor would switch it for every process
// that shares it (the shell, the next command of a script). Opening
// /dev/stdin, on Linux, opens the pipe anew: a file description of this
// reader's own, on the same pipe.
func pollableStdin() (*os.File, bool) {
	fi, err := os.Stdin.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return os.Stdin, false
	}
	f, err := os.Open("/dev/stdin")
	if err != nil {
		return os.Stdin, false
	}
	if fi2, err := f.Stat(); err != nil || !os.SameFile(fi, fi2) {
		f.Close()
		return os.Stdin, false
	}
	return f, true
}

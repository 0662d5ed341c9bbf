package cli

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/flowdedup/flowdedup/report/outfile"
)

// hangup dispatches SIGHUP to the plain output files open in this process:
// each is asked to reopen its path at its next write (outfile.Reopener),
// the logrotate convention, with a notice on its run's stderr.
var hangup = struct {
	once  sync.Once
	mu    sync.Mutex
	files map[*outfile.Reopener]io.Writer // the file and where its notice goes
}{files: map[*outfile.Reopener]io.Writer{}}

// catchHangup makes SIGHUP reopen the files given to onHangup instead of
// ending the process, its default action. replay and run call it first
// thing, so that a SIGHUP at any moment of their life (while an XDP
// program loads, before any output is open, while the totals are written)
// is caught; it stays caught until the process exits: nothing in
// flowdedup wants SIGHUP's default back.
func catchHangup() {
	hangup.once.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGHUP)
		go func() {
			for range ch {
				hangup.mu.Lock()
				for f, notice := range hangup.files {
					f.Reopen()
					fmt.Fprintf(notice, "flowdedup: SIGHUP: reopening %s at its next write\n", f.Name())
				}
				hangup.mu.Unlock()
			}
		}()
	})
}

// onHangup registers f for reopening on SIGHUP (once catchHangup has run)
// and returns what unregisters it.
func onHangup(f *outfile.Reopener, notice io.Writer) io.Closer {
	hangup.mu.Lock()
	defer hangup.mu.Unlock()
	hangup.files[f] = notice
	return closerFunc(func() error {
		hangup.mu.Lock()
		defer hangup.mu.Unlock()
		delete(hangup.files, f)
		return nil
	})
}

package testutil

import (
	"bufio"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a command a test started and reads the stderr of, line by
// line, as it comes: flowdedup run or collect, or a collector.
type Process struct {
	Cmd    *exec.Cmd
	done   chan error    // the result of Wait, once
	exited chan struct{} // closed when it has exited, err set
	err    error

	mu    sync.Mutex
	logs  strings.Builder
	lines []string
	more  chan struct{} // closed and replaced at each line
	ended bool          // stderr reached its end
}

// StartProcess starts cmd in a process group of its own (so that cleanup
// kills what it runs too: ip netns exec, strace, setpriv exec one another)
// and returns once a line of its stderr contains ready (at once when ready
// is empty), failing tb if the process exits first or says nothing of the
// kind within limit. cmd.Stdin and cmd.Stdout are the caller's business;
// cmd.Stderr must be nil. The test's cleanup kills the group, and logs what
// the process said on stderr when the test failed.
func StartProcess(tb testing.TB, cmd *exec.Cmd, ready string, limit time.Duration) *Process {
	tb.Helper()
	p := &Process{Cmd: cmd, done: make(chan error, 1), exited: make(chan struct{}), more: make(chan struct{})}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if tb.Failed() {
			tb.Logf("%s said on stderr:\n%s", cmd.Args[0], p.Log())
		}
	})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.lines = append(p.lines, sc.Text())
			close(p.more)
			p.more = make(chan struct{})
			p.mu.Unlock()
		}
		p.mu.Lock()
		p.ended = true
		close(p.more)
		p.mu.Unlock()
		p.err = cmd.Wait()
		close(p.exited)
		p.done <- p.err
	}()
	if ready != "" {
		p.WaitLine(tb, ready, limit)
	}
	return p
}

// WaitLine waits for a line of the process's stderr that contains s, and
// returns the first, failing tb if the process's stderr ends first or
// no such line comes within limit.
func (p *Process) WaitLine(tb testing.TB, s string, limit time.Duration) string {
	tb.Helper()
	deadline := time.After(limit)
	seen := 0
	for {
		p.mu.Lock()
		for ; seen < len(p.lines); seen++ {
			if strings.Contains(p.lines[seen], s) {
				line := p.lines[seen]
				p.mu.Unlock()
				return line
			}
		}
		ended, more := p.ended, p.more
		p.mu.Unlock()
		if ended {
			tb.Fatalf("%s exited before saying %q:\n%s", p.Cmd.Args[0], s, p.Log())
		}
		select {
		case <-more:
		case <-deadline:
			tb.Fatalf("%s did not say %q within %v:\n%s", p.Cmd.Args[0], s, limit, p.Log())
		}
	}
}

// WaitFor waits until cond holds, as testutil.WaitFor does, failing tb at
// once, with what the process said, if the process exits first.
func (p *Process) WaitFor(tb testing.TB, what string, limit time.Duration, cond func() bool) {
	tb.Helper()
	WaitFor(tb, what, limit, func() bool {
		select {
		case <-p.exited:
			tb.Fatalf("%s exited (%v) while the test waited for %s\n%s", p.Cmd.Args[0], p.err, what, p.Log())
		default:
		}
		return cond()
	})
}

// Log returns what the process wrote on stderr so far.
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// Done is sent the process's exit (cmd.Wait's error) once, when it ends.
func (p *Process) Done() <-chan error { return p.done }

// Stop sends sig to the process and waits up to limit for it to exit,
// failing tb if it does not. It returns the exit error (nil for status 0).
func (p *Process) Stop(tb testing.TB, sig syscall.Signal, limit time.Duration) error {
	tb.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		tb.Fatal(err)
	}
	return p.Wait(tb, limit)
}

// Wait waits up to limit for the process to exit, failing tb if it does
// not, and returns the exit error.
func (p *Process) Wait(tb testing.TB, limit time.Duration) error {
	tb.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(limit):
		tb.Fatalf("%s did not exit within %v\n%s", p.Cmd.Args[0], limit, p.Log())
		return nil
	}
}

// Package cli implements the flowdedup command line: each subcommand is a
// function over explicit arguments and writers, so tests call it directly and
// cmd/flowdedup stays a thin main.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1 // the command ran and failed
	ExitUsage = 2 // bad flags or arguments
)

// usageError marks errors caused by how the command was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"eval", "compare filters' error rates and speed on a synthetic or recorded stream", runEval},
		{"filters", "list the filters and their parameters", runFilters},
		{"replay", "pcap/pcapng files -> distinct flows and window summaries", runReplay},
		{"run", "live capture from an interface (afpacket) -> distinct flows and window summaries", runLive},
		{"gen", "write a synthetic pcap/pcapng: N packets over F distinct flows", runGen},
	}
}

// Main runs flowdedup with args (without the program name) and returns the
// process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return ExitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return ExitOK
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return ExitOK
		case errors.Is(err, flag.ErrHelp):
			return ExitOK
		}
		fmt.Fprintf(stderr, "flowdedup %s: %v\n", name, err)
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "run 'flowdedup %s --help' for usage\n", name)
			return ExitUsage
		}
		return ExitError
	}
	fmt.Fprintf(stderr, "flowdedup: unknown command %q\n\n", name)
	usage(stderr)
	return ExitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "flowdedup: a packet-rate network flow deduplicator built on streaming duplicate filters.")
	fmt.Fprintln(w, "\nUsage: flowdedup COMMAND [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'flowdedup COMMAND --help' for a command's flags and examples.")
}

// newFlagSet returns a flag set that reports errors instead of exiting and
// prints usage to stderr with the given synopsis and examples.
func newFlagSet(name, synopsis, examples string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("flowdedup "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: flowdedup %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
		if examples != "" {
			fmt.Fprintf(stderr, "\nExamples:\n%s", examples)
		}
	}
	return fs
}

// parseFlags parses args and turns flag errors into usage errors; the flag
// package has already printed its message and the usage text.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	return nil
}

// specList is a repeatable string flag (--filter A --filter B).
type specList []string

func (l *specList) String() string { return strings.Join(*l, " ") }
func (l *specList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

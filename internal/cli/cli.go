package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
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

// ranError marks an error a subcommand's own code returned, as opposed to
// one of cobra's (an unknown flag or command), which is always a usage
// error.
type ranError struct{ err error }

func (e ranError) Error() string { return e.err.Error() }
func (e ranError) Unwrap() error { return e.err }

// errNoCommand: flowdedup was run without a command; the usage text has
// been printed.
var errNoCommand = errors.New("no command given")

// command is one `flowdedup NAME`: its help texts and bind, which
// registers its flags (and their shell completions) on cmd and returns the
// function that runs it once cobra has parsed them. To add a subcommand,
// write a function that returns its command (see replayCommand) and list
// it in commands.
type command struct {
	use     string // the name and synopsis, e.g. "replay [flags] FILE..."
	short   string // one line for the list of commands
	long    string // what it does, above the usage
	example string // indented example command lines
	bind    func(cmd *cobra.Command) runFunc
}

// runFunc runs a subcommand on its positional arguments, its flags already
// parsed into the variables bind gave them. A usageError (usagef) exits 2,
// any other error 1.
type runFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// commands lists the subcommands, in the order help lists them.
func commands() []command {
	return []command{
		evalCommand(),
		filtersCommand(),
		replayCommand(),
		runCommand(),
		collectCommand(),
		mergeCommand(),
		genCommand(),
		tuneCommand(),
	}
}

// cobra builds c's cobra.Command. Positional arguments are the
// subcommand's to check (cobra's own checks speak of unknown commands).
func (c command) cobra() *cobra.Command {
	cmd := &cobra.Command{
		Use:     c.use,
		Short:   c.short,
		Long:    c.long,
		Example: strings.TrimRight(c.example, "\n"),
		Args:    cobra.ArbitraryArgs,
	}
	run := c.bind(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := run(cmd.Context(), args, cmd.OutOrStdout(), cmd.ErrOrStderr()); err != nil {
			return ranError{err}
		}
		return nil
	}
	return cmd
}

// Main runs flowdedup with args (without the program name) and returns the
// process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if args == nil {
		args = []string{} // cobra reads os.Args when given nil
	}
	stderr = lockWriter(stderr)
	root := newRoot(args)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	if cmd == nil {
		cmd = root
	}
	name := cmd.CommandPath()
	var ran ranError
	if errors.As(err, &ran) {
		err = ran.err
		var ue usageError
		if !errors.As(err, &ue) {
			fmt.Fprintf(stderr, "%s: %s\n", name, errorText(cmd, err))
			return ExitError
		}
	}
	if errors.Is(err, errNoCommand) {
		return ExitUsage
	}
	fmt.Fprintf(stderr, "%s: %s\n", name, errorText(cmd, err))
	fmt.Fprintf(stderr, "run '%s --help' for usage\n", name)
	return ExitUsage
}

// errorText is err's message for the line "flowdedup NAME: ...", without
// the "NAME: " that a package of the command's name starts its errors with
// (package collect's "collect: bad listen URL"), at the start or after a
// flag's name (pflag's `invalid argument "x" for "--objective" flag: tune:
// objective "x": ...`), which would name the command twice.
func errorText(cmd *cobra.Command, err error) string {
	msg := err.Error()
	prefix := cmd.Name() + ": "
	for strings.HasPrefix(msg, prefix) && len(msg) > len(prefix) {
		msg = msg[len(prefix):]
	}
	for strings.Contains(msg, ": "+prefix) { // each pass shortens msg
		msg = strings.ReplaceAll(msg, ": "+prefix, ": ")
	}
	return msg
}

// Command returns the flowdedup command tree that Main runs, for tools that
// document it (packaging/mkpkg writes the man pages from it).
func Command() *cobra.Command { return newRoot(nil) }

// newRoot builds the flowdedup command with its subcommands; args are the
// command line, for hints in flag errors.
func newRoot(args []string) *cobra.Command {
	root := &cobra.Command{
		Use:   "flowdedup",
		Short: "a packet-rate network flow deduplicator built on streaming duplicate filters",
		Long: `flowdedup: a packet-rate network flow deduplicator built on streaming duplicate filters.

It reads packets, from pcap/pcapng files (replay) or live from an interface (run),
or the flow records routers export, NetFlow v5, v9, IPFIX and sFlow, received as a
collector (collect); keys them by flow (source, destination, pair or 5-tuple) and
writes each key the first time it is seen in its window, with a summary per
window. merge adds many routers' summaries up into network-wide distinct counts;
eval and tune measure the filters and pick one for your traffic.`,
		Version:       version(),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Runs only without a command: cobra finds the subcommands, and
		// calls an unknown one an error itself.
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			if err := cmd.Help(); err != nil {
				return err
			}
			return errNoCommand
		},
	}
	// --version without -v: tcpdump's -v is verbose.
	root.Flags().Bool("version", false, "print the version (module version, commit, Go release) and exit")
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetUsageTemplate(usageTemplate)
	root.SetHelpTemplate(helpTemplate)
	root.SetHelpCommand(helpCommand())
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return flagError(cmd, err, args)
	})
	for _, c := range commands() {
		root.AddCommand(c.cobra())
	}
	return root
}

// usageTemplate is cobra's usage text with the examples before the flags
// (what a reader of --help looks for first), wrapped to 100 columns.
const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} COMMAND [flags]

Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsagesWrapped 100 | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Run '{{.CommandPath}} COMMAND --help' for a command's flags and examples.{{end}}
`

// helpTemplate is --help's text: a command with examples leads with its
// one-line summary, the usage and the examples, and says where its long
// description is (flowdedup help NAME, its man page); the others (the root,
// completion's) lead with their description, as cobra's do.
const helpTemplate = `{{if and .HasParent .HasExample}}{{.CommandPath}}: {{.Short}}{{else}}{{with (or .Long .Short)}}{{. | trimTrailingWhitespaces}}{{end}}{{end}}

{{.UsageString}}{{if and .HasParent .HasExample .Long}}
The full description: 'flowdedup help {{.Name}}' or 'man flowdedup-{{.Name}}'.
{{end}}`

// helpCommand is `flowdedup help [COMMAND]`: the command's long
// description (its man page's), then its usage, examples and flags.
// --help is the short form.
func helpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND]",
		Short: "a command's full description, then its usage, examples and flags",
		Args:  cobra.ArbitraryArgs,
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var names []cobra.Completion
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, sub := range c.Root().Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
					names = append(names, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			target, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return ranError{usagef("no command %q: see 'flowdedup help' for the list", strings.Join(args, " "))}
			}
			target.InitDefaultHelpFlag() // its -h, --help in the flags
			out := c.OutOrStdout()
			if !target.HasParent() || !target.HasExample() || target.Long == "" {
				return target.Help()
			}
			_, err = fmt.Fprintf(out, "%s: %s\n\n%s\n\n%s", target.CommandPath(), target.Short, strings.TrimRight(target.Long, "\n"), target.UsageString())
			return err
		},
	}
}

// flagError adds to a flag error the hint a user of Go's flag package (and
// of flowdedup before it used pflag) needs: long flags take two dashes, and
// pflag reads -key as the short flags -k -e -y.
func flagError(cmd *cobra.Command, err error, args []string) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && len(name) > 1 && cmd.Flags().Lookup(name) != nil {
			return fmt.Errorf("%w (long flags take two dashes: --%s)", err, name)
		}
	}
	return err
}

// complete registers fixed completions for flag name of cmd.
func complete(cmd *cobra.Command, name string, values ...string) {
	_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
}

// noArgs marks a command that takes no positional arguments, for shell
// completion (otherwise file names are offered).
func noArgs(cmd *cobra.Command) {
	cmd.ValidArgsFunction = cobra.NoFileCompletions
}

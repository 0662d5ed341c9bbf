// Package cli implements the flowdedup command line on spf13/cobra and
// pflag: flags anywhere on the line, --flag=value and --flag value, the
// short forms tcpdump users expect (-i, -r, -w, -s, -n), shell completion
// (flowdedup completion bash|zsh|fish|powershell) and --version.
//
// Each subcommand is a command value (commands lists them): its help texts
// and a bind function that registers its flags, usually a Config struct's
// BindFlags(*pflag.FlagSet), and returns the function that runs it. That
// function takes explicit arguments and writers, so tests call Main, or
// the function itself, directly, and cmd/flowdedup stays a thin main.
// Adding a subcommand is a file with a function returning its command and
// a line in commands. replay and run share their flags through
// CaptureConfig.BindFlags: a flag both take is added there once.
//
// replay and run write their outputs through outputs.go: a plain file, or
// a time pattern with one file per period (report/outfile,
// report.RecordFiles and SummaryFiles); plain files reopen on SIGHUP,
// which replay and run catch from their start until the process exits
// (hangup.go). tune wires the tune library.
//
// Main returns the exit code: 0, 1 when the command ran and failed, 2 for
// a usage error (a bad flag, argument or filter spec, or filters larger
// than the machine can hold), with the message and a pointer to --help.
package cli

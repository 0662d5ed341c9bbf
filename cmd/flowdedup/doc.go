// Command flowdedup deduplicates network flows at packet rate with streaming
// duplicate filters. See 'flowdedup help'.
//
// The command is a thin main: it makes a context that SIGINT and SIGTERM
// cancel and hands the arguments to internal/cli, where every subcommand
// lives.
package main

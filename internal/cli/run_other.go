//go:build !linux

package cli

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"
)

// runCommand: live capture uses AF_PACKET and XDP, which only Linux has;
// replay, eval and gen work everywhere.
func runCommand() command {
	return command{
		use:   "run --iface NAME [flags]",
		short: "live capture from an interface (Linux only)",
		bind: func(cmd *cobra.Command) runFunc {
			cmd.DisableFlagParsing = true
			return func(context.Context, []string, io.Writer, io.Writer) error {
				return errors.New("live capture needs Linux (AF_PACKET, XDP); replay, eval and gen work on this system")
			}
		},
	}
}

//go:build !linux || mips || mips64 || ppc64 || s390x

package cli

import (
	"context"
	"errors"
	"io"
	"runtime"

	"github.com/spf13/cobra"
)

// runCommand: live capture uses AF_PACKET and XDP, which only Linux has,
// and its XDP programs are built little-endian only (bpf/gen.go), so big-
// endian Linux (mips, mips64, ppc64, s390x) has no run either; replay,
// merge, tune, eval and gen work everywhere.
func runCommand() command {
	return command{
		use:   "run --iface NAME [flags]",
		short: "live capture from an interface (little-endian Linux only)",
		bind: func(cmd *cobra.Command) runFunc {
			cmd.DisableFlagParsing = true
			return func(context.Context, []string, io.Writer, io.Writer) error {
				return errors.New(noLiveCapture)
			}
		},
	}
}

// noLiveCapture says why this build has no run, and what works.
var noLiveCapture = func() string {
	why := "live capture needs Linux (AF_PACKET, XDP)"
	if runtime.GOOS == "linux" {
		why = "live capture is not built for big-endian " + runtime.GOARCH + ": its XDP programs are built little-endian only"
	}
	return why + "; replay, merge, tune, eval and gen work on this system"
}()

//go:build !linux

package cli

import (
	"context"
	"errors"
	"io"
)

// runLive: live capture uses AF_PACKET, which only Linux has; replay, eval
// and gen work everywhere.
func runLive(context.Context, []string, io.Writer, io.Writer) error {
	return errors.New("live capture needs Linux (AF_PACKET); replay, eval and gen work on this system")
}

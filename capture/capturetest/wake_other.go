//go:build !linux

package capturetest

import "testing"

func closeWakesBlockedNext(t *testing.T, b Backend) {
	t.Skip("capturetest: telling that Next is blocked needs Linux")
}

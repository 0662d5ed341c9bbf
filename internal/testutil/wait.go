package testutil

import (
	"testing"
	"time"
)

// WaitFor waits until cond holds, checking it at once, then after 1 ms,
// and at intervals that double to 10 ms at most (a condition that asks a
// server or reads a file is not asked a thousand times a second), and
// fails tb, naming what it waited for, when it does not hold within limit.
// The limit bounds a test that would hang; it is no timing assumption: on
// a machine that is working, cond holds long before.
func WaitFor(tb testing.TB, what string, limit time.Duration, cond func() bool) {
	tb.Helper()
	if !WaitUntil(limit, cond) {
		tb.Fatalf("waited %v for %s", limit, what)
	}
}

// WaitUntil waits as WaitFor does and reports whether cond held within
// limit, for a test whose own checks afterwards judge what came (a cleanup
// that tries again until the kernel lets go, a wait before a stop that
// flushes the rest).
func WaitUntil(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Millisecond)
	}
	return true
}

// Package soak holds flowdedup's soak tests, which run the built flowdedup
// command for a long stretch of packet time or wall time and check that it
// stays right and stays the same size, as it must on a router left alone
// for months; and the generator of the replay soak's stream.
//
// The replay soak (TestReplaySoak) streams Config.Write's capture through
// a pipe into `flowdedup replay --filter exact --window 1h -`: days of
// hourly windows with up to 10^5 distinct sources each, half of them
// shared with the next hour, packets whose times go back within a window,
// first sightings that come after the next window has begun but within the
// lateness, and late packets, from the last nanosecond of the window just
// closed back to 1999. The generator
// counts, while it writes, what flowdedup must report of every window (by
// the documented rule, with a bitmap of the keys each open window has
// seen), and the test compares each summary and the records with it. The
// generator pauses at each day boundary until the test has read the
// process's resident memory and its Go runtime metrics, and the memory at
// the end must be within 10% of the memory after the first day.
//
// It is short by default (2 days of packet time), so `go test ./...` runs
// it, and long with FLOWDEDUP_SOAK=long (30 days):
//
//	FLOWDEDUP_SOAK=long FLOWDEDUP_REQUIRE_PRIVILEGED=1 go test -count=1 -timeout 60m -v ./internal/soak/
//
// The soak lives in a package of its own, not in internal/cli's tests: it
// runs the built binary as a process (its RSS must be its own, not the
// test binary's), and a package of its own can be run, or left out, by
// itself.
package soak

// Package soak holds flowdedup's soak tests, which run the built flowdedup
// command for a long stretch of packet time or wall time and check that it
// stays right and stays the same size, as it must on a router left alone
// for months; and the generator of the replay soak's stream.
//
// The replay soak (TestReplaySoak) streams Config.Write's capture through
// a pipe into `flowdedup replay --filter exact --window 1h -`: days of
// hourly windows with up to 10^5 distinct sources each, half of them
// shared with the next hour, packets whose times go back within a window,
// first sightings that come after the next window has begun but within
// the lateness, and late packets, from the last nanosecond of the window
// just closed back to 1999. The generator counts, while it writes, what
// flowdedup must report of every window (by the documented rule, with a
// bitmap of the keys each open window has seen), and the test compares
// each summary and the records with it. The generator pauses at each day
// boundary until the test has read the process's resident memory and its
// Go runtime metrics; the memory at the end must be within 10% of the
// memory after the first day, and the goroutine count flat.
//
// The live soak (TestLiveSoak) runs `flowdedup run --mode afpacket` on a
// veth pair in a network namespace the test makes, fed by tcpreplay
// --loop --unique-ip (every loop a new set of flows), scrapes
// process_resident_memory_bytes and go_goroutines every 5 seconds, and
// checks that both stay flat after a warm-up (two GC cycles under
// traffic) and that every frame sent is counted.
//
// The replay soak is short by default (2 days of packet time, a few
// seconds), so `go test ./...` runs it; the live soak runs only when
// asked, since its memory takes minutes to reach its steady state.
// FLOWDEDUP_SOAK=long runs both long (30 days of packet time; 10 minutes
// of traffic):
//
//	FLOWDEDUP_SOAK=long FLOWDEDUP_REQUIRE_PRIVILEGED=1 go test -count=1 -timeout 60m -v ./internal/soak/
//
// They live in a package of their own, not in internal/cli's tests: they
// run the built binary as a process (its RSS must be its own, not the
// test binary's), and a package of their own can be run, or left out, by
// itself. -soak.days, -soak.keys and -soak.live (after -args) set the
// sizes one by one.
package soak

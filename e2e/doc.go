// Package e2e holds flowdedup's end-to-end tests: the flowdedup binary,
// built once and run as a user runs it (several processes at once where a
// fleet of routers is the point), against real servers the tests start
// themselves on loopback: clickhouse-server and nfdump's nfcapd
// (internal/testutil). They check what a user would check: the rows a
// ClickHouse query returns, the flows nfdump reads back, and what
// `flowdedup merge` prints, against exact answers computed from the same
// captures by exact replays.
//
// Tests that need a server that is not installed skip with the reason, and
// fail instead under FLOWDEDUP_REQUIRE_PRIVILEGED=1, as CI runs them.
//
// The long tests (ClickHouse, sFlow, the router platforms, merge's memory)
// run in parallel with each other (t.Parallel), after the short ones: each
// starts its own servers on ports the kernel hands out and works in
// directories of its own, and none asserts on a duration.
//
// BenchmarkReplayExport measures what --export costs a replay (the
// README's figures): see its comment.
package e2e

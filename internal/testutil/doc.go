// Package testutil holds the helpers most of the project's tests share:
// WaitFor, which waits on a condition instead of a sleep; StartProcess,
// the one way a test runs flowdedup (Flowdedup, Release build it) or
// another command and waits on what it says; SkipOrFail and RequireRoot,
// which check that the test process may do what the test needs; PinThread
// and WaitInPoll, which tell when a goroutine has reached a blocking
// poll(2); SyncBuffer; and the loopback UDP helpers FreeUDPPort and
// UDPSocket.
//
// Helpers of one role live in packages of their own below it: netns (the
// privileged tests' network namespaces and veth pairs), testframe (frame
// and packet builders), servers (clickhouse-server, nfcapd) and
// testexporter (softflowd, pmacct), as collect/collecttest holds the
// datagram encoders.
//
// A privileged test runs for real where it can and skips, saying why, where
// it cannot. Setting FLOWDEDUP_REQUIRE_PRIVILEGED=1 (as CI does on a machine
// known to be capable) turns every such skip into a failure, so a broken
// feature cannot hide behind a skip there.
package testutil

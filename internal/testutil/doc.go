// Package testutil holds the helpers of the project's privileged tests: a
// check that the test process may do what the test needs, throwaway network
// namespaces with a veth pair in them, real collectors started on loopback,
// builders of the frames the capture tests send, and WaitInPoll, which
// tells when a goroutine has reached a blocking poll(2) so that a test acts
// on a condition instead of after a sleep.
//
// A privileged test runs for real where it can and skips, saying why, where
// it cannot. Setting FLOWDEDUP_REQUIRE_PRIVILEGED=1 (as CI does on a machine
// known to be capable) turns every such skip into a failure, so a broken
// feature cannot hide behind a skip there.
package testutil

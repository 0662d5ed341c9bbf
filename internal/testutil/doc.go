// Package testutil holds the helpers of the project's privileged tests: a
// check that the test process may do what the test needs, and throwaway
// network namespaces with a veth pair in them.
//
// A privileged test runs for real where it can and skips, saying why, where
// it cannot. Setting FLOWDEDUP_REQUIRE_PRIVILEGED=1 (as CI does on a machine
// known to be capable) turns every such skip into a failure, so a broken
// feature cannot hide behind a skip there.
package testutil

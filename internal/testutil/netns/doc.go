// Package netns makes the throwaway network namespaces of the privileged
// tests (NetNS): each holds a veth pair whose ends are up, and is removed
// when the test ends, so that a test's traffic never leaves it. A test
// that may not make one skips, saying why (testutil.SkipOrFail).
package netns

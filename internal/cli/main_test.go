package cli

import (
	"testing"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// TestMain runs the tests with at least testutil.MinParallel parallel
// tests at once and removes the flowdedup build (testutil.MainParallel).
func TestMain(m *testing.M) { testutil.MainParallel(m) }

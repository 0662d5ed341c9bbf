package cli

import (
	"flag"
	"runtime"
	"strconv"
	"testing"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// minParallel is how many of the tests that call t.Parallel run at once
// when -test.parallel is not given (its default is GOMAXPROCS, 2 on a
// 2-core machine): most of them wait more than they compute, on the
// processes they start (flowdedup, tshark, collectors and exporters, live
// capture in a namespace), so that two at a time left the cores idle.
const minParallel = 4

// TestMain runs the tests with at least minParallel parallel tests at once
// unless -test.parallel says otherwise, and removes the flowdedup build
// (testutil.Main).
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if p := flag.Lookup("test.parallel"); p != nil && !given && runtime.GOMAXPROCS(0) < minParallel {
		p.Value.Set(strconv.Itoa(minParallel))
	}
	testutil.Main(m)
}

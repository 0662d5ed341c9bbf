package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The flowdedup command, built once per test binary and platform.
var bins = struct {
	sync.Mutex
	dir   string
	built map[string]*binBuild // by build environment
}{built: map[string]*binBuild{}}

type binBuild struct {
	once sync.Once
	path string
	err  error
}

// Flowdedup returns the path of the flowdedup command built from this
// checkout, for tests that run it as a process (signals, exit codes, RSS,
// a shell's PATH). It is built once per test binary: later calls return
// the same file. Packages that call it remove the build at the end with
// Main in their TestMain.
func Flowdedup(tb testing.TB) string {
	tb.Helper()
	return FlowdedupFor(tb)
}

// FlowdedupFor is Flowdedup built with env added to the go command's
// environment, such as GOARCH=mips, each environment once.
func FlowdedupFor(tb testing.TB, env ...string) string {
	tb.Helper()
	key := strings.Join(env, " ")
	bins.Lock()
	if bins.dir == "" {
		dir, err := os.MkdirTemp("", "flowdedup-test-bin-")
		if err != nil {
			bins.Unlock()
			tb.Fatal(err)
		}
		bins.dir = dir
	}
	b := bins.built[key]
	if b == nil {
		b = &binBuild{path: filepath.Join(bins.dir, fmt.Sprintf("%d", len(bins.built)), "flowdedup")}
		bins.built[key] = b
	}
	bins.Unlock()
	b.once.Do(func() {
		cmd := exec.Command("go", "build", "-o", b.path, "github.com/flowdedup/flowdedup/cmd/flowdedup")
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = errors.New("go build " + key + ": " + err.Error() + "\n" + string(out))
		}
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

// Main runs the tests of a package that builds flowdedup (Flowdedup) and
// removes the builds afterwards: call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	bins.Lock()
	if bins.dir != "" {
		os.RemoveAll(bins.dir)
	}
	bins.Unlock()
	os.Exit(code)
}

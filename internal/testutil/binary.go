package testutil

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The binaries that make builds once, before any package's tests run, for
// every package to share (see the Makefile's test-bins and test-release):
// each test binary building its own, several at once from an empty build
// cache, was most of a newcomer's first make test.
const (
	// BinEnv names the flowdedup command built from this checkout for this
	// machine, as go build builds it.
	BinEnv = "FLOWDEDUP_TEST_BIN"
	// PkgBuildEnv names make's PKGBUILD directory holding the release
	// binaries (linux_ARCH/flowdedup, built as make dist builds them) and
	// the packaging tools (mkpkg, nfpm).
	PkgBuildEnv = "FLOWDEDUP_TEST_PKGBUILD"
)

// The flowdedup command, built once per test binary and platform when make
// did not build it.
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
// checkout for this machine, for tests that run it as a process (signals,
// exit codes, RSS, a shell's PATH): make test's build ($FLOWDEDUP_TEST_BIN)
// or else one built once per test binary. Packages that call it remove the
// build at the end with Main in their TestMain.
//
// The command is built for the machine the tests run on even when the test
// binary is not (GOARCH=arm under qemu-user, make test-32bit): the child
// process must execute here.
func Flowdedup(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv(BinEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			tb.Fatalf("$%s: %v (make test builds it; unset the variable to build one here)", BinEnv, err)
		}
		return p
	}
	return build(tb, "GOOS=", "GOARCH=", "GOARM=", "GO386=", "GOMIPS=", "GOMIPS64=")
}

// ReleaseArches maps each architecture of the release archives (the
// Makefile's DIST_ARCHES) to the go command's environment that builds it,
// as the Makefile's goenv does.
var ReleaseArches = map[string][]string{
	"amd64":   {"GOARCH=amd64"},
	"arm64":   {"GOARCH=arm64"},
	"armv7":   {"GOARCH=arm", "GOARM=7"},
	"386":     {"GOARCH=386", "GO386=softfloat"},
	"mips":    {"GOARCH=mips", "GOMIPS=softfloat"},
	"mipsle":  {"GOARCH=mipsle", "GOMIPS=softfloat"},
	"mips64":  {"GOARCH=mips64", "GOMIPS64=softfloat"},
	"riscv64": {"GOARCH=riscv64"},
}

// Release returns the path of flowdedup built for Linux on arch, one of
// ReleaseArches, as the release archives hold it: make test-release's build
// ($FLOWDEDUP_TEST_PKGBUILD/linux_ARCH/flowdedup) when it made one, or else
// one built here once per test binary.
func Release(tb testing.TB, arch string) string {
	tb.Helper()
	env, ok := ReleaseArches[arch]
	if !ok {
		tb.Fatalf("testutil.Release: no architecture %q", arch)
	}
	if dir := os.Getenv(PkgBuildEnv); dir != "" {
		p := filepath.Join(dir, "linux_"+arch, "flowdedup")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		tb.Logf("$%s has no %s build: building one", PkgBuildEnv, arch)
	}
	return build(tb, append([]string{"GOOS=linux", "CGO_ENABLED=0"}, env...)...)
}

// build builds flowdedup with env added to the go command's environment,
// each environment once per test binary.
func build(tb testing.TB, env ...string) string {
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
		tb.Logf("building flowdedup (%s) for this test binary: make test builds it once for all", key)
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

// MinParallel is how many of the tests that call t.Parallel MainParallel
// runs at once when -test.parallel is not given (its default is
// GOMAXPROCS, 2 on a 2-core machine): tests that wait more than they
// compute, on the processes they start (flowdedup, tshark, collectors and
// exporters, live capture in a namespace), left the cores idle two at a
// time.
const MinParallel = 4

// MainParallel is Main, running at least MinParallel parallel tests at
// once unless -test.parallel says otherwise.
func MainParallel(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if p := flag.Lookup("test.parallel"); p != nil && !given && runtime.GOMAXPROCS(0) < MinParallel {
		p.Value.Set(strconv.Itoa(MinParallel))
	}
	Main(m)
}

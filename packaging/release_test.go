//go:build linux && release

package packaging

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// The architectures make builds (the Makefile's DIST_ARCHES and, where
// Debian has the architecture, DEB_ARCHES), with what each binary says in
// --version and how it runs here.
var allArches = []arch{
	{"amd64", "amd64", "linux/amd64", ""},
	{"arm64", "arm64", "linux/arm64", "qemu-aarch64"},
	{"armv7", "armhf", "linux/arm", "qemu-arm"},
	// An amd64 kernel runs 386 binaries itself unless it was built without
	// IA-32 emulation (some VMs' are); qemu-i386 cannot run Go's (the
	// runtime dies with "bad g in signal handler"). TestArchiveBinariesRun
	// says which, and checks the ELF header where it cannot run.
	{"386", "i386", "linux/386", ""},
	{"mips", "", "linux/mips", "qemu-mips"},
	{"mipsle", "", "linux/mipsle", "qemu-mipsel"},
	{"mips64", "", "linux/mips64", "qemu-mips64"},
	{"riscv64", "", "linux/riscv64", "qemu-riscv64"},
}

type arch struct {
	name     string // the archive's ARCH
	deb      string // the Debian package's architecture ("" when none is made)
	platform string // GOOS/GOARCH, as --version names it
	qemu     string // the qemu-user emulator ("" runs natively)
}

// archesEnv selects the architectures the release tests build and check:
// a space-separated list of archive ARCHes ($(TEST_ARCHES) in make test,
// which builds their binaries once beforehand), every one when unset. CI
// sets it to all of them.
const archesEnv = "FLOWDEDUP_TEST_ARCHES"

var distArches, debArches = selectArches()

func selectArches() (dist []arch, deb []string) {
	want := strings.Fields(os.Getenv(archesEnv))
	for _, a := range allArches {
		if len(want) > 0 && !slices.Contains(want, a.name) && !slices.Contains(want, "all") {
			continue
		}
		dist = append(dist, a)
		if a.deb != "" {
			deb = append(deb, a.deb)
		}
	}
	return dist, deb
}

// release is the output of one `make package dist`.
type release struct {
	version, commit, epoch string
	dist                   string // the .debs, the archives and SHA256SUMS
	build                  string // make's PKGBUILD: the binaries, mkpkg and nfpm
	// archives reads each architecture's archive once (see entries),
	// held to the end of the test binary: some 250 MB.
	archives map[string]func() ([]entry, error)
}

func (r *release) deb(arch string) string {
	return filepath.Join(r.dist, "flowdedup_"+r.version+"_"+arch+".deb")
}

func (r *release) archive(arch string) string {
	return filepath.Join(r.dist, r.archiveBase(arch)+".tar.gz")
}

func (r *release) archiveBase(arch string) string {
	return "flowdedup_" + r.version + "_linux_" + arch
}

var (
	releaseOnce sync.Once
	built       *release
	buildErr    error
	tempDirs    []string // removed by TestMain
)

// repo is the repository's root (tests run in packaging/).
const repo = ".."

// buildRelease runs `make package dist` once per test binary, into a
// temporary DIST and PKGBUILD (so that a developer's dist/ and bin/ stay as
// they were), and returns what it made. Every architecture's binary is
// built once and shared by its package and its archive, as make does.
func buildRelease(t *testing.T) *release {
	t.Helper()
	needCommand(t, "make", "make")
	needCommand(t, "git", "git")
	needCommand(t, "sha256sum", "coreutils")
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("the release tests run the amd64 build as the reference; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	releaseOnce.Do(func() {
		r := &release{}
		var err error
		if r.version, err = output(repo, "packaging/version.sh"); err != nil {
			buildErr = err
			return
		}
		if r.commit, err = output(repo, "git", "rev-parse", "HEAD"); err != nil {
			buildErr = err
			return
		}
		if r.epoch, err = output(repo, "git", "log", "-1", "--format=%ct"); err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "flowdedup-release-")
		if err != nil {
			buildErr = err
			return
		}
		tempDirs = append(tempDirs, dir)
		r.dist, r.build = filepath.Join(dir, "dist"), filepath.Join(dir, "build")
		if err := checkArches(); err != nil {
			buildErr = err
			return
		}
		if err := seedBuild(r.build); err != nil {
			buildErr = err
			return
		}
		var names []string
		for _, a := range distArches {
			names = append(names, a.name)
		}
		start := time.Now()
		if out, err := makeIn(repo, makeJobs, "package", "dist", "DIST="+r.dist, "PKGBUILD="+r.build,
			"DIST_ARCHES="+strings.Join(names, " "), "DEB_ARCHES="+strings.Join(debArches, " ")); err != nil {
			buildErr = errors.New(err.Error() + "\n" + out)
			return
		}
		t.Logf("make package dist: %.1f s", time.Since(start).Seconds())
		r.archives = map[string]func() ([]entry, error){}
		for _, a := range distArches {
			r.archives[a.name] = sync.OnceValues(func() ([]entry, error) { return readArchive(r.archive(a.name)) })
		}
		built = r
	})
	if buildErr != nil {
		t.Fatalf("make package dist: %v", buildErr)
	}
	return built
}

// checkArches fails on a name in $FLOWDEDUP_TEST_ARCHES that is no
// architecture of the release, and on a selection without amd64, the
// reference the others are compared with.
func checkArches() error {
	for _, w := range strings.Fields(os.Getenv(archesEnv)) {
		if w != "all" && !slices.ContainsFunc(allArches, func(a arch) bool { return a.name == w }) {
			return errors.New("$" + archesEnv + ": no architecture " + strconv.Quote(w))
		}
	}
	if !slices.ContainsFunc(distArches, func(a arch) bool { return a.name == "amd64" }) {
		return errors.New("$" + archesEnv + " must include amd64, the reference build")
	}
	return nil
}

// seedBuild copies into the release's PKGBUILD what make test built
// beforehand ($FLOWDEDUP_TEST_PKGBUILD: the release binaries and the
// packaging tools), so that make's go build finds each up to date (the
// build ID in the file is the one this tree gives it) instead of
// compiling it again. Without the variable make builds them all.
func seedBuild(build string) error {
	from := os.Getenv(testutil.PkgBuildEnv)
	if from == "" {
		return nil
	}
	files := []string{"mkpkg", "nfpm"}
	for _, a := range distArches {
		files = append(files, filepath.Join("linux_"+a.name, "flowdedup"))
	}
	for _, f := range files {
		src := filepath.Join(from, f)
		if _, err := os.Stat(src); err != nil {
			continue // make builds what make test did not
		}
		if err := copyFileErr(src, filepath.Join(build, f)); err != nil {
			return err
		}
	}
	return nil
}

// makeJobs is make's -j for the release builds. Their recipes (a link,
// nfpm's and mkpkg's gzip) are a process each, most of them on one core:
// make alone would leave the other cores idle. Twice as many jobs as
// cores keep them busy while some jobs read or write.
var makeJobs = "-j" + strconv.Itoa(2*runtime.NumCPU())

func TestMain(m *testing.M) {
	flag.Parse()
	// The tests wait on other processes (make, lintian, dpkg, qemu-user),
	// not on Go code, and most of them first on the one release build:
	// every test runs at once unless -parallel says otherwise. (Its
	// default, GOMAXPROCS, would start the five that need the release two
	// at a time on a 2-core machine, lintian and the second build of
	// TestReproducible one after the other.)
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		if err := flag.Set("test.parallel", "32"); err != nil {
			panic(err)
		}
	}
	code := m.Run()
	for _, d := range tempDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// makeIn runs make in dir with a time limit; it returns make's output.
// make starts from a clean slate: not the flags of a make that runs the
// tests (make test), nor a SOURCE_DATE_EPOCH of the caller's, so that it
// derives the time from the commit as it does for a user.
func makeIn(dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", append([]string{"-C", dir}, args...)...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains([]string{"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "SOURCE_DATE_EPOCH", "DIST", "PKGBUILD", "MAINTAINER"}, name)
	})
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// output runs a command in dir and returns its standard output, trimmed.
func output(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", errors.New(name + " " + strings.Join(args, " ") + ": " + err.Error() + ": " + stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

func needCommand(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		testutil.SkipOrFail(t, "%s not installed (Debian package %s; .ci/run installs it)", name, pkg)
	}
	return p
}

// copyTracked copies the files git tracks in the repository, as they are
// in the work tree (uncommitted changes included), to dst, keeping their
// executable bits; dst has no .git.
func copyTracked(t *testing.T, dst string) {
	t.Helper()
	list, err := output(repo, "git", "ls-files", "-z")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range strings.Split(list, "\x00") {
		if name == "" {
			continue
		}
		src := filepath.Join(repo, name)
		info, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree, not yet in git
		}
		if err != nil {
			t.Fatal(err)
		}
		if !info.Mode().IsRegular() {
			t.Fatalf("%s: the tree has a %v, which the copy does not handle", name, info.Mode().Type())
		}
		copyFile(t, src, filepath.Join(dst, name))
	}
}

// copyFile copies the regular file src to dst, a new file, with its
// permissions, making dst's directory.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	if err := copyFileErr(src, dst); err != nil {
		t.Fatal(err)
	}
}

func copyFileErr(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, info.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

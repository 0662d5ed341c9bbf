//go:build linux && release

package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// version.sh names each commit of a history with tags as
// docs/install.md says, and dpkg orders the names as the commits and
// releases follow one another.
func TestVersionScript(t *testing.T) {
	t.Parallel()
	needCommand(t, "git", "git")
	needCommand(t, "dpkg", "dpkg")
	script, err := filepath.Abs("version.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	git := func(date string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org",
			"GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	version := func() string {
		t.Helper()
		v, err := output(dir, script)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	commit := func(date string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte(date), 0o644); err != nil {
			t.Fatal(err)
		}
		git(date, "add", "f")
		git(date, "commit", "-q", "-m", date)
	}
	git("", "init", "-q", "-b", "main")
	var seen []string
	step := func(pattern string) {
		t.Helper()
		v := version()
		if !regexp.MustCompile(`^` + pattern + `$`).MatchString(v) {
			t.Errorf("version %q, want %s", v, pattern)
		}
		if len(seen) > 0 {
			prev := seen[len(seen)-1]
			if err := exec.Command("dpkg", "--compare-versions", prev, "lt", v).Run(); err != nil {
				t.Errorf("dpkg does not order %q before %q", prev, v)
			}
		}
		seen = append(seen, v)
	}
	// Two commits in the same day, then in the next: no tag yet.
	commit("2026-03-04T05:06:07Z")
	step(`0\.0\.0~git20260304050607\.[0-9a-f]{7}`)
	commit("2026-03-04T23:00:00Z")
	step(`0\.0\.0~git20260304230000\.[0-9a-f]{7}`)
	// Uncommitted changes are said, and sort after the clean commit.
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	step(`0\.0\.0~git20260304230000\.[0-9a-f]{7}\+dirty`)
	git("", "checkout", "-q", "f")
	// A release candidate, the release, commits after it, the next one.
	commit("2026-03-05T00:00:00Z")
	git("2026-03-05T00:00:00Z", "tag", "-a", "-m", "rc", "v1.0.0-rc1")
	step(`1\.0\.0~rc1`)
	commit("2026-03-06T00:00:00Z")
	git("2026-03-06T00:00:00Z", "tag", "v1.0.0") // lightweight tags count too
	step(`1\.0\.0`)
	commit("2026-03-07T00:00:00Z")
	step(`1\.0\.0\+git20260307000000\.[0-9a-f]{7}`)
	commit("2026-03-08T00:00:00Z")
	git("2026-03-08T00:00:00Z", "tag", "v1.0.1")
	step(`1\.0\.1`)
	// Tags not of the v<digit> form are not releases.
	commit("2026-03-09T00:00:00Z")
	git("2026-03-09T00:00:00Z", "tag", "nightly")
	step(`1\.0\.1\+git20260309000000\.[0-9a-f]{7}`)

	// Outside a git checkout it fails, saying what to do.
	cmd := exec.Command(script)
	cmd.Dir = t.TempDir()
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "VERSION=") {
		t.Errorf("outside git: %v, %q; want a failure naming VERSION=", err, out)
	}
}

// A plain go build, with no version stamped and no VCS information
// (-buildvcs=false, as a source archive gives), still answers --version,
// saying that the version is unknown.
func TestVersionWithoutMake(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "flowdedup")
	if out, err := exec.Command("go", "build", "-buildvcs=false", "-o", bin, "../cmd/flowdedup").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || !regexp.MustCompile(`^flowdedup unknown version go1\.[0-9.a-z]+ [a-z0-9]+/[a-z0-9]+\n$`).Match(out) {
		t.Errorf("--version: %v, %q", err, out)
	}
}

//go:build linux && release

package packaging

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flowdedup/flowdedup/internal/testutil"
)

// lintian finds no error and no warning in any package: what it would
// say is fixed, or overridden with the reason in
// packaging/deb/lintian-overrides.
func TestDebianPackagesLint(t *testing.T) {
	t.Parallel()
	r := buildRelease(t)
	lintian := needCommand(t, "lintian", "lintian")
	needCommand(t, "dpkg-deb", "dpkg")
	var debs []string
	for _, a := range debArches {
		debs = append(debs, r.deb(a))
		// The control fields make derived: the version and architecture.
		for field, want := range map[string]string{"Package": "flowdedup", "Version": r.version, "Architecture": a} {
			got, err := output(".", "dpkg-deb", "--field", r.deb(a), field)
			if err != nil || got != want {
				t.Errorf("%s: %s is %q (%v), want %q", filepath.Base(r.deb(a)), field, got, err, want)
			}
		}
	}
	// Every check but binaries/spelling, which can say nothing that
	// fails this test: its one tag, spelling-error-in-binary, is of
	// severity info. It matches every string in the binary against
	// lintian's list of misspellings: a third of lintian's time on each
	// package.
	cmd := exec.Command(lintian, append([]string{"--fail-on", "error,warning", "--dont-check-part", "binaries/spelling"}, debs...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var said []string
	for _, line := range strings.Split(stdout.String(), "\n") {
		if strings.HasPrefix(line, "E: ") || strings.HasPrefix(line, "W: ") {
			said = append(said, line)
		}
	}
	if err != nil || len(said) > 0 {
		t.Errorf("lintian: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
}

// The amd64 package installs as an operator installs it (dpkg -i, as
// root) and then: the installed --version names the package's version;
// the unit verifies (its man: documentation included) and is not enabled;
// /etc/default/flowdedup is a conffile; every man page renders without a
// warning and `man flowdedup` finds its page; bash loads the installed
// completion as it does on the first Tab and completes a subcommand; and
// dpkg --purge removes every file it installed, the links `systemctl
// enable` made and the service's state directory too.
func TestDebianPackageInstalls(t *testing.T) {
	t.Parallel()
	r := buildRelease(t)
	for _, c := range []struct{ name, pkg string }{
		{"dpkg", "dpkg"}, {"systemd-analyze", "systemd"}, {"systemctl", "systemd"}, {"man", "man-db"}, {"bash", "bash"},
	} {
		needCommand(t, c.name, c.pkg)
	}
	const bashCompletion = "/usr/share/bash-completion/bash_completion"
	if _, err := os.Stat(bashCompletion); err != nil {
		testutil.SkipOrFail(t, "bash-completion is not installed (Debian package bash-completion; .ci/run installs it)")
	}
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "installing a package needs root (uid %d)", os.Geteuid())
	}
	if v, err := output(".", "dpkg-query", "--show", "--showformat=${Status} ${Version}", "flowdedup"); err == nil && strings.Contains(v, "installed") {
		testutil.SkipOrFail(t, "flowdedup is installed on this machine (%s): the test would replace and purge it; dpkg --purge flowdedup first", v)
	}
	// systemd's StateDirectory= of a DynamicUser= service, which purge
	// removes: the test makes it as systemd would.
	const stateDir, privateDir = "/var/lib/flowdedup", "/var/lib/private/flowdedup"
	for _, d := range []string{stateDir, privateDir} {
		if _, err := os.Lstat(d); err == nil {
			testutil.SkipOrFail(t, "%s exists (outputs of an earlier flowdedup service?): the test's purge would remove it", d)
		}
	}
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	purge := func() { exec.Command("dpkg", "--purge", "flowdedup").Run() }
	t.Cleanup(purge)
	run("dpkg", "--install", r.deb("amd64"))

	if got := run("dpkg-query", "--show", "--showformat=${Version}", "flowdedup"); got != r.version {
		t.Errorf("installed version %q, want %q", got, r.version)
	}
	want := fmt.Sprintf("flowdedup %s (commit %s) %s linux/amd64\n", r.version, r.commit[:12], runtime.Version())
	if got := run("/usr/bin/flowdedup", "--version"); got != want {
		t.Errorf("/usr/bin/flowdedup --version: %q, want %q", got, want)
	}
	if got := run("dpkg-query", "--show", "--showformat=${Conffiles}", "flowdedup"); !strings.Contains(got, "/etc/default/flowdedup ") {
		t.Errorf("conffiles %q lack /etc/default/flowdedup", got)
	}

	const unit = "/usr/lib/systemd/system/flowdedup.service"
	cmd := exec.Command("systemd-analyze", "verify", unit)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, stderr.String())
	}
	// Installing neither enables nor starts the service: the operator sets
	// the interface first. (systemctl --root reads the links, with or
	// without a running systemd.)
	if out, _ := exec.Command("systemctl", "--root=/", "is-enabled", "flowdedup.service").Output(); strings.TrimSpace(string(out)) != "disabled" {
		t.Errorf("systemctl is-enabled flowdedup: %q, want disabled", out)
	}

	installed := strings.Fields(run("dpkg", "--listfiles", "flowdedup"))
	var pages []string
	var rendering sync.WaitGroup
	for _, f := range installed {
		if dir, name := filepath.Split(f); dir == "/usr/share/man/man1/" {
			pages = append(pages, name)
			rendering.Go(func() { checkManPage(t, f) })
		}
	}
	rendering.Wait()
	slices.Sort(pages)
	if !slices.Equal(pages, manPages()) {
		t.Errorf("man pages %q, want %q", pages, manPages())
	}
	if got := strings.TrimSpace(run("man", "--where", "flowdedup")); got != "/usr/share/man/man1/flowdedup.1.gz" {
		t.Errorf("man -w flowdedup: %q", got)
	}

	// What bash does on the first Tab after `flowdedup rep`: load
	// completions/flowdedup through bash-completion, then call the
	// function it registers.
	script := `source ` + bashCompletion + `
_completion_loader flowdedup
fn=$(complete -p flowdedup | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
[ -n "$fn" ] || { echo "no completion function for flowdedup"; exit 1; }
COMP_WORDS=(flowdedup rep) COMP_CWORD=1 COMP_LINE='flowdedup rep' COMP_POINT=13
"$fn" flowdedup rep flowdedup
printf '%s\n' "${COMPREPLY[@]}"`
	bash := exec.Command("bash", "--norc", "-c", script)
	bash.Stderr = nil // bash's compopt complains outside a real completion
	out, err := bash.Output()
	if err != nil || !slices.Equal(strings.Fields(string(out)), []string{"replay"}) {
		t.Errorf("bash completes 'flowdedup rep' to %q (%v), want replay", out, err)
	}

	// Purge, with the service enabled and having written its outputs, as
	// an operator would have it.
	run("systemctl", "--root=/", "--quiet", "enable", "flowdedup.service")
	if err := os.MkdirAll(privateDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(privateDir, "sources-20260101T00.jsonl"), []byte("{}\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("private/flowdedup", stateDir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(stateDir); os.RemoveAll(privateDir) })
	wants := "/etc/systemd/system/multi-user.target.wants/flowdedup.service"
	if _, err := os.Lstat(wants); err != nil {
		t.Fatalf("systemctl enable made no %s: %v", wants, err)
	}
	var files []string
	for _, f := range installed {
		if info, err := os.Lstat(f); err == nil && !info.IsDir() {
			files = append(files, f)
		}
	}
	if len(files) < 10 {
		t.Fatalf("dpkg -L lists only %d files: %q", len(files), installed)
	}
	run("dpkg", "--purge", "flowdedup")
	// deb-systemd-helper's record of the unit's links goes too.
	state := "/var/lib/systemd/deb-systemd-helper-enabled/flowdedup.service.dsh-also"
	for _, f := range append(files, wants, state, "/usr/share/doc/flowdedup", stateDir, privateDir) {
		if _, err := os.Lstat(f); err == nil {
			t.Errorf("%s is left after dpkg --purge", f)
		}
	}
}

// checkManPage renders page as `man -l` does for a reader, at 80 columns,
// with groff's warnings on: it must say nothing on stderr, and show the
// NAME section with the command the page is named after.
func checkManPage(t *testing.T, page string) {
	t.Helper()
	cmd := exec.Command("man", "--warnings", "--local-file", page)
	cmd.Env = append(os.Environ(), "MANWIDTH=80", "LC_ALL=C.UTF-8", "MANPAGER=cat", "PAGER=cat")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	name := strings.TrimSuffix(filepath.Base(page), ".1.gz")
	nameLine := regexp.MustCompile(`(?m)^NAME\n\s+` + regexp.QuoteMeta(name) + `\s+-\s+\S`)
	if err != nil || stderr.Len() > 0 || !nameLine.MatchString(stdout.String()) {
		t.Errorf("man -l %s: %v\n%s\n%.600s", page, err, stderr.String(), stdout.String())
	}
}

//go:build linux && release

package packaging

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowdedup/flowdedup/internal/cli"
)

// shippedShells are the shells the packages install a completion script
// for (nfpm.yaml, the archives' completions/): completion's page of any
// other shell (PowerShell's) would document what a Linux package lacks.
var shippedShells = []string{"bash", "fish", "zsh"}

// manPages are the pages make generates: flowdedup(1), one per command
// that help lists, and completion's of the shipped shells.
func manPages() []string {
	root := cli.Command()
	root.InitDefaultCompletionCmd()
	pages := []string{"flowdedup.1.gz"}
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand() {
			continue
		}
		pages = append(pages, "flowdedup-"+c.Name()+".1.gz")
		if c.Name() != "completion" {
			continue
		}
		for _, shell := range shippedShells {
			pages = append(pages, "flowdedup-completion-"+shell+".1.gz")
		}
	}
	slices.Sort(pages)
	return pages
}

// entry is one member of an archive.
type entry struct {
	name     string
	mode     int64
	uid, gid int
	modTime  time.Time
	data     []byte
}

// readArchive returns the entries of a tar.gz, in order.
func readArchive(path string) ([]entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tr := tar.NewReader(zr)
	var es []entry
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return es, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, h.Name, err)
		}
		es = append(es, entry{h.Name, h.Mode, h.Uid, h.Gid, h.ModTime, data})
	}
}

// entries returns the entries of arch's archive, in order: TestArchives
// and TestArchiveBinariesRun share one reading of each.
func (r *release) entries(t *testing.T, arch string) []entry {
	t.Helper()
	es, err := r.archives[arch]()
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// Every archive verifies against SHA256SUMS, and holds, under one
// directory named as the archive, the binary, the unit, its settings, a
// man page per command, the completions, LICENSE, README and the notices
// of the Go modules in the binary: directories and the binary mode 0755,
// the rest 0644, in name order.
func TestArchives(t *testing.T) {
	t.Parallel()
	r := buildRelease(t)
	check := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	check.Dir = r.dist
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum --check SHA256SUMS: %v\n%s", err, out)
	}
	sums, err := os.ReadFile(filepath.Join(r.dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(sums), "\n"); n != len(distArches) {
		t.Errorf("SHA256SUMS has %d lines, want one per archive (%d):\n%s", n, len(distArches), sums)
	}
	epoch, _ := strconv.ParseInt(r.epoch, 10, 64)
	want := []string{"", "LICENSE", "README.md", "THIRD-PARTY-NOTICES", "completions/", "completions/_flowdedup",
		"completions/flowdedup", "completions/flowdedup.fish", "flowdedup", "flowdedup.env", "flowdedup.service", "man/"}
	for _, p := range manPages() {
		want = append(want, "man/"+p)
	}
	for _, a := range distArches {
		if !strings.Contains(string(sums), "  "+filepath.Base(r.archive(a.name))+"\n") {
			t.Errorf("SHA256SUMS does not list %s", filepath.Base(r.archive(a.name)))
		}
		es := r.entries(t, a.name)
		var names []string
		for _, e := range es {
			if e.uid != 0 || e.gid != 0 || e.modTime.Unix() != epoch {
				t.Errorf("%s: %s is owned by %d:%d, dated %v: want 0:0 and SOURCE_DATE_EPOCH %d", a.name, e.name, e.uid, e.gid, e.modTime, epoch)
			}
			name := strings.TrimPrefix(e.name, r.archiveBase(a.name)+"/")
			if name == r.archiveBase(a.name)+"/" {
				name = ""
			}
			names = append(names, name)
			wantMode := int64(0o644)
			if name == "" || strings.HasSuffix(name, "/") || name == "flowdedup" {
				wantMode = 0o755
			}
			if e.mode != wantMode {
				t.Errorf("%s: %s has mode %o, want %o", a.name, e.name, e.mode, wantMode)
			}
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s holds\n%q\nwant\n%q", a.name, names, want)
		}
		for _, e := range es {
			// cobra is in every build; cilium/ebpf only in those with
			// live capture, which the big-endian ones have not.
			if strings.HasSuffix(e.name, "/THIRD-PARTY-NOTICES") {
				has := func(s string) bool { return bytes.Contains(e.data, []byte(s)) }
				bigEndian := a.name == "mips" || a.name == "mips64"
				if !has("Go "+runtime.Version()) || !has("github.com/spf13/cobra") || has("github.com/cilium/ebpf") == bigEndian {
					t.Errorf("%s: THIRD-PARTY-NOTICES does not name the Go release, cobra and (little-endian builds only) cilium/ebpf:\n%.500s", a.name, e.data)
				}
			}
		}
	}
}

// A second build from a copy of the tree in another directory (no .git:
// the version, commit and time are given as make derives them) gives the
// same bytes: a Debian package, an archive and its line of SHA256SUMS.
//
// The second build compiles nothing anew: the go command's build cache is
// keyed by the content of each compilation's inputs, which -trimpath keeps
// the directory out of, so the compiled packages would be the same either
// way. What runs again is every step that make adds: the link with the
// version stamps, mkpkg's man pages, completions, changelog and notices,
// nfpm, tar and gzip, sha256sum, in another directory at a later time,
// which is where a time, an order or a path would get into the bytes.
// Compiling twice would only retest the Go toolchain's own
// reproducibility, at a cost of minutes per platform.
//
// One architecture, not all eight: every architecture's package and
// archive are made by the same two recipes from the same mkpkg docs
// output, with only GOARCH, its variant (GOARM, GOMIPS, GO386) and the
// names changed, and what differs between their binaries is the Go
// toolchain's code for the platform, whose reproducibility is again the
// toolchain's own. A time, an order or a path that make, mkpkg or nfpm let
// into the bytes would be in any architecture's. armhf's recipes have the
// most in them: a cross build, with a variant (GOARM=7), for a Debian
// architecture that Go names otherwise (armv7). All eight again would run
// the same steps seven times more, for as much CPU as the first build.
func TestReproducible(t *testing.T) {
	t.Parallel()
	r := buildRelease(t)
	// armv7 (armhf) when make test built it, else amd64.
	debArch, distArch := "amd64", "amd64"
	if slices.ContainsFunc(distArches, func(a arch) bool { return a.name == "armv7" }) {
		debArch, distArch = "armhf", "armv7"
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	copyTracked(t, src)
	dist, build := filepath.Join(dir, "dist"), filepath.Join(dir, "build")
	// The packaging tools are the first build's. make runs go build for
	// them all the same, which links a binary again unless the build ID in
	// it, a hash of every input of its compilation and link, is the one
	// this tree gives it. Their bytes get into no package, only their
	// output, which is made anew; linking them again would take about 4 s
	// of CPU, as much as the architecture's link and package.
	for _, tool := range []string{"mkpkg", "nfpm"} {
		copyFile(t, filepath.Join(r.build, tool), filepath.Join(build, tool))
	}
	start := time.Now()
	out, err := makeIn(src, makeJobs, "package", "dist", "DEB_ARCHES="+debArch, "DIST_ARCHES="+distArch,
		"DIST="+dist, "PKGBUILD="+build,
		"VERSION="+r.version, "COMMIT="+r.commit, "SOURCE_DATE_EPOCH="+r.epoch)
	if err != nil {
		t.Fatalf("make package dist in a copy of the tree: %v\n%s", err, out)
	}
	t.Logf("second make package dist (%s): %.1f s", debArch, time.Since(start).Seconds())

	files := []string{filepath.Base(r.deb(debArch)), filepath.Base(r.archive(distArch))}
	got, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range got {
		names = append(names, e.Name())
	}
	if want := append([]string{"SHA256SUMS"}, files...); !slices.Equal(names, slices.Sorted(slices.Values(want))) {
		t.Errorf("the second build made %q, want %q", names, want)
	}
	for _, f := range files {
		a, err := os.ReadFile(filepath.Join(r.dist, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dist, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between the two builds (%d and %d bytes)", f, len(a), len(b))
		}
	}
	// The second SHA256SUMS is the first's line for its archive.
	sums, err := os.ReadFile(filepath.Join(r.dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, line := range strings.SplitAfter(string(sums), "\n") {
		if strings.HasSuffix(line, "  "+filepath.Base(r.archive(distArch))+"\n") {
			want = line
		}
	}
	if got, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS")); err != nil || want == "" || string(got) != want {
		t.Errorf("the second SHA256SUMS (%v):\n%s\nwant the first's line for %s:\n%s", err, got, distArch, want)
	}
}

// Each archive's binary runs on its platform (under qemu-user here): it
// names the version, commit and platform the archive was built for, and
// replays a capture to the same records and summaries as the amd64
// build. Each binary runs once for each, the platforms side by side.
func TestArchiveBinariesRun(t *testing.T) {
	t.Parallel()
	r := buildRelease(t)
	dir := t.TempDir()
	binary := func(t *testing.T, arch string) string {
		t.Helper()
		for _, e := range r.entries(t, arch) {
			if e.name == r.archiveBase(arch)+"/flowdedup" {
				p := filepath.Join(dir, "flowdedup-"+arch)
				if err := os.WriteFile(p, e.data, 0o755); err != nil {
					t.Fatal(err)
				}
				return p
			}
		}
		t.Fatalf("%s has no flowdedup", r.archive(arch))
		return ""
	}
	capture, err := filepath.Abs("../testdata/pcaps/zipf.pcap.gz")
	if err != nil {
		t.Fatal(err)
	}
	replay := func(t *testing.T, prefix []string) (records, summaries string) {
		t.Helper()
		d := t.TempDir()
		out, sum := filepath.Join(d, "out.jsonl"), filepath.Join(d, "summary.jsonl")
		// One worker: with more, records of different workers interleave
		// in no fixed order.
		if o, err := runOn(prefix, "replay", "--workers", "1", "--key", "5tuple", "--window", "1m", "--filter", "qht:mem=64KiB",
			"--seed", "3", "--observer", "r1", "--summary-sketch", "--out", out, "--summary", sum, capture); err != nil {
			t.Fatalf("%q replay: %v\n%s", prefix, err, o)
		}
		rec, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		s, err := os.ReadFile(sum)
		if err != nil {
			t.Fatal(err)
		}
		return string(rec), string(s)
	}
	// amd64's replay is the reference; its subtest checks --version only.
	amd64 := binary(t, "amd64")
	wantRecords, wantSummaries := replay(t, []string{amd64})
	if wantRecords == "" || !strings.Contains(wantSummaries, `"sketch":"`) {
		t.Fatalf("the amd64 build wrote no records or no sketch:\n%s", wantSummaries)
	}
	for _, a := range distArches {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			prefix := []string{amd64}
			if a.name != "amd64" {
				prefix = []string{binary(t, a.name)}
			}
			if a.qemu != "" {
				prefix = append([]string{needCommand(t, a.qemu, "qemu-user")}, prefix...)
			} else if a.name != "amd64" {
				if err := runsHere(prefix[0]); err != nil {
					// 386 on a kernel without IA-32 emulation, where no
					// emulator runs Go's 386 runtime either: the binary is
					// checked as far as it can be without running it.
					t.Logf("%s cannot run on this machine (%v): checking its ELF header and build settings instead", a.name, err)
					checkELF(t, prefix[0], a)
					return
				}
			}
			got, err := runOn(prefix, "--version")
			want := fmt.Sprintf("flowdedup %s (commit %s) %s %s\n", r.version, r.commit[:12], runtime.Version(), a.platform)
			if err != nil || got != want {
				t.Errorf("--version: %v, printed %q, want %q", err, got, want)
			}
			if a.name == "amd64" {
				return
			}
			records, summaries := replay(t, prefix)
			if records != wantRecords || summaries != wantSummaries {
				t.Errorf("replay differs from amd64's: records equal %v, summaries equal %v\namd64:\n%s\n%s:\n%s",
					records == wantRecords, summaries == wantSummaries, wantSummaries, a.name, summaries)
			}
		})
	}
}

// runOn runs the command prefix with args, with a time limit, and returns
// its standard output (standard error too when it fails).
func runOn(prefix []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append(slices.Clone(prefix), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

// runsHere runs bin --version; the error says why it cannot run.
func runsHere(bin string) error {
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// elfMachines are the ELF class and machine of each architecture that may
// have to be checked without running (a.qemu == "").
var elfMachines = map[string]struct {
	class   elf.Class
	machine elf.Machine
	goenv   []string // build settings that go version -m must show
}{
	"386": {elf.ELFCLASS32, elf.EM_386, []string{"GOARCH=386", "GO386=softfloat", "CGO_ENABLED=0", "GOOS=linux", "-trimpath=true"}},
}

// checkELF checks a binary that cannot run here: a static little-endian
// ELF executable of a's class and machine, built by this Go release with
// the release's settings (go version -m).
func checkELF(t *testing.T, bin string, a arch) {
	t.Helper()
	want, ok := elfMachines[a.name]
	if !ok {
		t.Fatalf("%s: no ELF description to check it by", a.name)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Class != want.class || f.Machine != want.machine || f.Data != elf.ELFDATA2LSB || f.Type != elf.ET_EXEC {
		t.Errorf("%s: ELF %v %v %v %v, want %v %v ELFDATA2LSB ET_EXEC", a.name, f.Class, f.Machine, f.Data, f.Type, want.class, want.machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: has an interpreter (dynamically linked); the release binaries are static", a.name)
		}
	}
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m %s: %v", bin, err)
	}
	info := string(out)
	if !strings.Contains(info, ": "+runtime.Version()+"\n") {
		t.Errorf("%s: go version -m does not name %s:\n%s", a.name, runtime.Version(), info)
	}
	for _, s := range want.goenv {
		if !strings.Contains(info, "\tbuild\t"+s+"\n") {
			t.Errorf("%s: go version -m has no build setting %s:\n%s", a.name, s, info)
		}
	}
}

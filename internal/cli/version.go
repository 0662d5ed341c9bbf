package cli

import (
	"cmp"
	"runtime"
	"runtime/debug"
	"strings"
)

// stampedVersion and stampedCommit are the release version and the full
// commit hash, set when make builds flowdedup:
//
//	go build -ldflags "-X github.com/flowdedup/flowdedup/internal/cli.stampedVersion=1.2.0 -X ...stampedCommit=0123..."
//
// make takes them from git (packaging/version.sh), so that the Debian
// package's version and --version are the same string, and so that the
// commit is named whether or not the go command stamped its own VCS
// information (it does not with -buildvcs=false, which the release builds
// use so that their bytes depend on the source alone).
var stampedVersion, stampedCommit string

// unknownVersion is what --version says when nothing gave the build a
// version: a plain `go build` of a tree with no VCS information
// (-buildvcs=false, or a source archive without .git).
const unknownVersion = "unknown version"

// version describes this build for --version: the version, the commit,
// its time and whether the tree had changes when the toolchain stamped
// them (go build does unless -buildvcs=false), and the Go release and
// platform.
func version() string {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = &debug.BuildInfo{GoVersion: runtime.Version()}
	}
	return formatVersion(stampedVersion, stampedCommit, info, platform)
}

// formatVersion is version's text for a binary made for platform, e.g.
//
//	flowdedup 1.2.0 (commit 0123456789ab, 2026-01-02T03:04:05Z, modified) go1.26.1 linux/amd64
//
// The version and commit are stamped when make stamped them; otherwise the main
// module's version from the build info: a tag for `go install ...@v1.2.0`,
// a pseudo-version that the go command derives from the commit for a
// `go build` in a checkout. "(devel)" or nothing says unknownVersion.
func formatVersion(stamped, commit string, info *debug.BuildInfo, platform string) string {
	v := stamped
	if v == "" {
		v = info.Main.Version
	}
	if v == "" || v == "(devel)" {
		v = unknownVersion
	}
	var vcs []string
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := cmp.Or(settings["vcs.revision"], commit); rev != "" {
		vcs = append(vcs, "commit "+rev[:min(len(rev), 12)])
	}
	if t := settings["vcs.time"]; t != "" {
		vcs = append(vcs, t)
	}
	if settings["vcs.modified"] == "true" {
		vcs = append(vcs, "modified")
	}
	var b strings.Builder
	b.WriteString("flowdedup " + v)
	if len(vcs) > 0 {
		b.WriteString(" (" + strings.Join(vcs, ", ") + ")")
	}
	b.WriteString(" " + info.GoVersion + " " + platform)
	return b.String()
}

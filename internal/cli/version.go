package cli

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// version describes this build for --version: the module version (a tag
// when installed with `go install ...@vX.Y.Z`, "(devel)" for a build from
// a checkout), the commit, its time and whether the tree had changes when
// the toolchain stamped them (go build does unless -buildvcs=false), and
// the Go release and platform.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "flowdedup (no build information) " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	}
	return formatVersion(info, runtime.GOOS+"/"+runtime.GOARCH)
}

// formatVersion is version's text for the build info of a binary made for
// platform, e.g.
//
//	flowdedup v1.2.0 (commit 0123456789ab, 2026-01-02T03:04:05Z, modified) go1.26.1 linux/amd64
func formatVersion(info *debug.BuildInfo, platform string) string {
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var vcs []string
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
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

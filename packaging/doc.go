// Package packaging holds what makes flowdedup's Debian packages and
// release archives (make package, make dist; docs/install.md) and the
// tests that check them. It has no Go API.
//
//   - version.sh: the version make stamps into the binary and names the
//     packages with, from git describe, in a form dpkg orders.
//   - nfpm.yaml: the Debian package, built by nfpm (a tool in go.mod);
//     deb/ has its maintainer scripts, copyright and lintian overrides.
//   - mkpkg/: the man pages and shell completions (from the command tree),
//     the Debian changelog, the licences of the Go modules linked into a
//     binary, and reproducible tar.gz archives.
//
// The tests build every package and archive as make does and check them as
// an operator would meet them: lintian finds no error or warning; the amd64
// package installs (dpkg -i, as root), its unit verifies, every man page
// renders, bash completes from the installed script, the installed
// --version names the package's version, and dpkg --purge leaves none of
// its files; the archives verify against SHA256SUMS, and a package and
// an archive come out the same bytes when built again from a copy of the
// tree elsewhere; and each archive's binary, run under qemu-user, names
// its version and replays a capture to the same output as the amd64 build,
// and the routers' builds (ARMv7, big-endian MIPS) give the amd64 build's
// records and summaries byte for byte on every test capture.
//
// The tests are behind the build tag "release": make test-release builds
// the release binaries and packaging tools once and runs them (go test
// -tags release ./packaging/ builds what it needs itself); make test and
// go test ./... leave them out, since their builds of the whole tree per
// architecture were most of a first make test. CI runs both.
package packaging

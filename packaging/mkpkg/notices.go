package main

import (
	"bytes"
	"debug/buildinfo"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"golang.org/x/mod/module"
)

// noticesMain writes to -out the licences of the code statically linked
// into the Go binary -bin besides flowdedup's own: the Go standard library
// and runtime, and each module its build information lists, with every
// licence and NOTICE file at the module's root (Apache-2.0 asks for the
// NOTICE file to travel with a binary). A module without a licence file
// is an error: the binary could not be distributed as it is.
func noticesMain(args []string) error {
	fs := flag.NewFlagSet("notices", flag.ContinueOnError)
	bin := fs.String("bin", "", "the Go binary")
	out := fs.String("out", "", "the output file (gzipped when its name ends in .gz)")
	if err := parse(fs, args, "bin", "out"); err != nil {
		return err
	}
	info, err := buildinfo.ReadFile(*bin)
	if err != nil {
		return err
	}
	env, err := exec.Command("go", "env", "GOROOT", "GOMODCACHE").Output()
	if err != nil {
		return fmt.Errorf("go env: %w", err)
	}
	goroot, modcache, _ := strings.Cut(strings.TrimSpace(string(env)), "\n")

	var b bytes.Buffer
	fmt.Fprintf(&b, "%s is a statically linked Go program. Besides flowdedup's own code\n", filepath.Base(*bin))
	fmt.Fprintf(&b, "(BSD-2-Clause; see LICENSE, or copyright in a Debian package) it\n")
	fmt.Fprintf(&b, "contains the Go standard library and runtime (%s) and the Go modules\n", info.GoVersion)
	fmt.Fprintf(&b, "below, each under the licence that follows its name.\n")
	if err := appendLicences(&b, "Go "+info.GoVersion+" (standard library and runtime)", goroot); err != nil {
		return err
	}
	deps := slices.Clone(info.Deps)
	slices.SortFunc(deps, func(a, b *debug.Module) int { return strings.Compare(a.Path, b.Path) })
	for _, m := range deps {
		if m.Replace != nil {
			m = m.Replace
		}
		dir, err := moduleDir(modcache, m.Path, m.Version)
		if err != nil {
			return err
		}
		if err := appendLicences(&b, m.Path+" "+m.Version, dir); err != nil {
			return err
		}
	}
	if strings.HasSuffix(*out, ".gz") {
		return writeGzip(*out, b.Bytes())
	}
	return os.WriteFile(*out, b.Bytes(), 0o644)
}

// moduleDir is where the go command keeps the source of path@version.
func moduleDir(modcache, path, version string) (string, error) {
	p, err := module.EscapePath(path)
	if err != nil {
		return "", err
	}
	v, err := module.EscapeVersion(version)
	if err != nil {
		return "", err
	}
	return filepath.Join(modcache, p+"@"+v), nil
}

// appendLicences appends, under a heading naming what, the licence and
// notice files at the root of dir.
func appendLicences(b *bytes.Buffer, what, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var names []string
	for _, e := range entries {
		n := strings.ToUpper(e.Name())
		if !e.IsDir() && (strings.HasPrefix(n, "LICENSE") || strings.HasPrefix(n, "LICENCE") ||
			strings.HasPrefix(n, "COPYING") || strings.HasPrefix(n, "NOTICE")) {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("%s: no licence file in %s", what, dir)
	}
	slices.Sort(names)
	fmt.Fprintf(b, "\n%s\n%s\n", strings.Repeat("=", 72), what)
	for _, n := range names {
		text, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "%s %s\n\n%s", strings.Repeat("-", 8), n, text)
		if len(text) > 0 && text[len(text)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return nil
}

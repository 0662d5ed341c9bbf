package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/flowdedup/flowdedup/internal/cli"
)

// completions are the scripts `flowdedup completion SHELL` prints, by the
// file name each shell looks for (the directory is the package's: bash's
// completions/, zsh's vendor-completions/, fish's vendor_completions.d/).
var completions = []struct{ shell, file string }{
	{"bash", "flowdedup"},
	{"zsh", "_flowdedup"},
	{"fish", "flowdedup.fish"},
}

// docsMain writes into -out: man/*.1.gz, a page per command;
// completions/, a script per shell; changelog.gz, the Debian changelog.
func docsMain(args []string) error {
	fs := flag.NewFlagSet("docs", flag.ContinueOnError)
	version := fs.String("version", "", "the version the pages and changelog name")
	commit := fs.String("commit", "", "the commit built (full hash)")
	maintainer := fs.String("maintainer", "", `the changelog's signer, "Name <address>"`)
	out := fs.String("out", "", "output directory")
	var date epochFlag
	fs.Var(&date, "date", "the pages' and changelog's date, seconds since 1970 (SOURCE_DATE_EPOCH)")
	if err := parse(fs, args, "version", "commit", "maintainer", "out", "date"); err != nil {
		return err
	}
	// The command tree differs by platform: big-endian and non-Linux
	// builds have a run without flags. The pages describe the Linux
	// little-endian one, so they are made there.
	if runtime.GOOS != "linux" || binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		return fmt.Errorf("run on little-endian Linux: the man pages describe that build's commands (this is %s/%s)", runtime.GOOS, runtime.GOARCH)
	}
	for _, d := range []string{"man", "completions"} {
		if err := os.MkdirAll(filepath.Join(*out, d), 0o755); err != nil {
			return err
		}
	}
	if err := writeManPages(filepath.Join(*out, "man"), *version, date.t); err != nil {
		return err
	}
	for _, c := range completions {
		var stdout, stderr bytes.Buffer
		if code := cli.Main(context.Background(), []string{"completion", c.shell}, &stdout, &stderr); code != cli.ExitOK {
			return fmt.Errorf("flowdedup completion %s: exit %d: %s", c.shell, code, stderr.String())
		}
		if err := os.WriteFile(filepath.Join(*out, "completions", c.file), stdout.Bytes(), 0o644); err != nil {
			return err
		}
	}
	log, err := changelog(*version, *commit, *maintainer, date.t)
	if err != nil {
		return err
	}
	return writeGzip(filepath.Join(*out, "changelog.gz"), log)
}

// writeManPages writes a page for each command that help lists (the root,
// its subcommands, completion's shells the packages ship a script for),
// named by the command's path with dashes: flowdedup.1.gz,
// flowdedup-replay.1.gz, ...
func writeManPages(dir, version string, date time.Time) error {
	root := cli.Command()
	root.InitDefaultCompletionCmd()
	hideUnshippedShells(root)
	var walk func(*cobra.Command) error
	walk = func(c *cobra.Command) error {
		c.DisableAutoGenTag = true // a "HISTORY: generated on <date>" section
		header := doc.GenManHeader{
			Title:   strings.ToUpper(strings.ReplaceAll(c.CommandPath(), " ", "-")),
			Section: "1",
			Date:    &date,
			Source:  "flowdedup " + version,
			Manual:  "flowdedup manual",
		}
		var page bytes.Buffer
		if err := doc.GenMan(c, &header, &page); err != nil {
			return fmt.Errorf("man page of %q: %w", c.CommandPath(), err)
		}
		name := strings.ReplaceAll(c.CommandPath(), " ", "-") + ".1.gz"
		if err := writeGzip(filepath.Join(dir, name), page.Bytes()); err != nil {
			return err
		}
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
				continue
			}
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(root)
}

// hideUnshippedShells hides the subcommands of root's completion command
// for shells the packages ship no script for (PowerShell's), so that they
// get no page, nor a line in completion's SEE ALSO: a Linux package that
// documents `flowdedup completion powershell` installs nothing for it.
func hideUnshippedShells(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		for _, shell := range c.Commands() {
			if !slices.ContainsFunc(completions, func(s struct{ shell, file string }) bool { return s.shell == shell.Name() }) {
				shell.Hidden = true
			}
		}
	}
}

// changelog is the Debian changelog of a package of version built from
// commit: one entry, since the project keeps its history in git rather
// than in a changelog file.
func changelog(version, commit, maintainer string, date time.Time) ([]byte, error) {
	if !strings.Contains(maintainer, "<") || !strings.HasSuffix(maintainer, ">") {
		return nil, errors.New(`-maintainer: want "Name <address>"`)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "flowdedup (%s) unstable; urgency=medium\n\n", version)
	fmt.Fprintf(&b, "  * flowdedup %s, built from commit\n    %s.\n", version, commit)
	fmt.Fprintf(&b, "    Its changes are that commit's history:\n")
	fmt.Fprintf(&b, "    https://github.com/flowdedup/flowdedup/commits/%s\n", commit)
	fmt.Fprintf(&b, "\n -- %s  %s\n", maintainer, date.Format(time.RFC1123Z))
	return b.Bytes(), nil
}

// writeGzip writes data to path gzipped at the highest level (as lintian
// expects of man pages and changelogs), with no name or time in the
// header, so that the bytes depend on data alone.
func writeGzip(path string, data []byte) error {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

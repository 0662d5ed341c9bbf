// Command mkpkg makes the files of flowdedup's packages that are not in the
// repository as they are: the man pages and shell completions (from the
// command tree itself), the Debian changelog, the licences of the Go
// modules linked into a binary, and reproducible tar.gz archives. make
// package and make dist run it (see the Makefile and docs/install.md):
//
//	mkpkg docs -version V -commit HASH -date EPOCH -maintainer M -out DIR
//	mkpkg notices -bin BINARY -out FILE
//	mkpkg tar -date EPOCH -prefix NAME -out FILE.tar.gz DIR
//
// Every output depends only on its inputs: times come from -date (make
// passes SOURCE_DATE_EPOCH, the commit's time by default), gzip streams
// carry no name or time, archive entries are sorted and owned by root.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "docs":
		err = docsMain(os.Args[2:])
	case "notices":
		err = noticesMain(os.Args[2:])
	case "tar":
		err = tarMain(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mkpkg %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: mkpkg docs|notices|tar [flags] (see packaging/mkpkg/main.go)")
	os.Exit(2)
}

// epochFlag is a -date flag: seconds since 1970, as SOURCE_DATE_EPOCH.
type epochFlag struct{ t time.Time }

func (e *epochFlag) String() string { return strconv.FormatInt(e.t.Unix(), 10) }

func (e *epochFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("want seconds since 1970 (SOURCE_DATE_EPOCH), got %q", s)
	}
	e.t = time.Unix(n, 0).UTC()
	return nil
}

// parse parses fs's flags from args and checks that each of required was
// given.
func parse(fs *flag.FlagSet, args []string, required ...string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, r := range required {
		if !set[r] {
			return fmt.Errorf("-%s is required", r)
		}
	}
	return nil
}

//go:build ignore

// checkdocs checks the documentation a new user reads: README.md is at
// most 250 lines, and every relative link of README.md and docs/ (inline
// links and images, outside code) names a file or directory that exists
// and, with #anchor, a heading of that Markdown file, as GitHub makes
// anchors of headings; no page names the design notes or the shared
// directory outside the repository (forbidden below).
//
// Run it from the repository root:
//
//	go run scripts/checkdocs.go
//
// It prints each broken link as FILE:LINE: and exits 1 if there is one.
package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

const maxReadmeLines = 250

// link matches an inline link or image, [text](target) or ![alt](target),
// with an optional "title"; the text may hold `code` but no brackets.
var link = regexp.MustCompile(`!?\[[^\[\]]*\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)

// codeSpan matches inline code, whose text is not a link.
var codeSpan = regexp.MustCompile("`+[^`]*`+")

// forbidden are names no page may hold, spelt in two parts so that this
// file does not hold them either (git grep finds none in the tree).
var forbidden = []string{"DESIGN" + ".md", ".." + "/shared"}

func main() {
	var pages []string
	pages = append(pages, "README.md")
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "checkdocs:", err)
		os.Exit(2)
	}
	anchors := map[string]map[string]bool{} // by page, read once
	bad := 0
	report := func(page string, line int, format string, args ...any) {
		fmt.Printf("%s:%d: %s\n", page, line, fmt.Sprintf(format, args...))
		bad++
	}
	for _, page := range pages {
		lines, err := readLines(page)
		if err != nil {
			fmt.Fprintln(os.Stderr, "checkdocs:", err)
			os.Exit(2)
		}
		if page == "README.md" && len(lines) > maxReadmeLines {
			report(page, len(lines), "%d lines, more than %d", len(lines), maxReadmeLines)
		}
		var code codeBlocks
		for i, l := range lines {
			for _, f := range forbidden {
				if strings.Contains(l, f) {
					report(page, i+1, "names %s", f)
				}
			}
			if code.skip(l) {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(l, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				file := page
				if path != "" {
					file = filepath.Join(filepath.Dir(page), path)
					if _, err := os.Stat(file); err != nil {
						report(page, i+1, "link %s: no file %s", target, file)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(file, ".md") {
					report(page, i+1, "link %s: an anchor in a file that is not Markdown", target)
					continue
				}
				if anchors[file] == nil {
					a, err := headingAnchors(file)
					if err != nil {
						fmt.Fprintln(os.Stderr, "checkdocs:", err)
						os.Exit(2)
					}
					anchors[file] = a
				}
				if !anchors[file][anchor] {
					report(page, i+1, "link %s: %s has no heading with anchor #%s", target, file, anchor)
				}
			}
		}
	}
	if bad > 0 {
		fmt.Printf("checkdocs: %d problems in %d pages\n", bad, len(pages))
		os.Exit(1)
	}
	fmt.Printf("checkdocs: %d pages, README.md within %d lines, every relative link resolves\n", len(pages), maxReadmeLines)
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, sc.Err()
}

// codeBlocks follows a page's fenced code blocks line by line.
type codeBlocks struct{ fence string } // the open block's fence, "" outside

// skip says whether l is a fence or inside a fenced block, where links and
// headings are not Markdown's.
func (c *codeBlocks) skip(l string) bool {
	if f, ok := fenceOf(l); ok {
		switch {
		case c.fence == "":
			c.fence = f
		case strings.HasPrefix(f, c.fence):
			c.fence = ""
		}
		return true
	}
	return c.fence != ""
}

// fenceOf returns the fence (``` or ~~~, as long as written) that opens
// or closes a code block on line l.
func fenceOf(l string) (string, bool) {
	t := strings.TrimLeft(l, " ")
	if len(l)-len(t) > 3 {
		return "", false
	}
	for _, c := range []string{"`", "~"} {
		n := len(t) - len(strings.TrimLeft(t, c))
		if n >= 3 {
			return strings.Repeat(c, n), true
		}
	}
	return "", false
}

// headingAnchors returns the anchors GitHub gives the ATX headings of a
// Markdown file: the heading's text without its Markdown (code spans and
// links keep their text), lower-cased, every character that is not a
// letter, a digit, a space, '-' or '_' dropped, spaces made '-'; a
// repeated anchor gets -1, -2, ...
func headingAnchors(path string) (map[string]bool, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	var code codeBlocks
	for _, l := range lines {
		if code.skip(l) || !strings.HasPrefix(l, "#") {
			continue
		}
		text := strings.TrimLeft(l, "#")
		if !strings.HasPrefix(text, " ") {
			continue
		}
		text = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(text), "#"))
		text = link.ReplaceAllStringFunc(text, func(s string) string {
			s = strings.TrimPrefix(s, "!")
			return s[1:strings.Index(s, "](")]
		})
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors, nil
}

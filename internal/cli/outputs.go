package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/report"
	"github.com/flowdedup/flowdedup/report/outfile"
)

// outputHelp is the part of replay's and run's help on --out, --summary,
// --retain and SIGHUP.
var outputHelp = `Output files: --out (-w) and --summary take a PATH, - (standard output, standard
error) or a time PATTERN, a file name with strftime-like conversions that writes
one file per period, e.g. -w 'sources-%Y%m%dT%H.jsonl' --window 1h. The
conversions:
` + wrap(outfile.Conversions, 80, "    ") + `
They are expanded in UTC from each window's start, allowed in the file name only
(not in its directory), and a pattern needs --window. Each file is written as
NAME.tmp and renamed to NAME when the last window of its period closes (and at
the end of the run), so a reader never sees a partial file; an existing NAME is
never overwritten (NAME.1 is taken instead). After a crash the open period is
left as NAME.tmp, which the next run to write that period keeps as NAME.partial,
saying so on stderr.
--retain N keeps the files of the newest N periods of each pattern, by the time
in their names (NAME and its NAME.1 copies are one period), and says on stderr
what it removes.

SIGHUP reopens the plain --out and --summary files, the logrotate convention:
after the file is moved away, 'kill -HUP' makes the next records go to a new
file at PATH, none lost or written twice. Pattern outputs ignore it, and it
never stops the run.`

// wrap breaks s into lines of at most width bytes, each after indent.
func wrap(s string, width int, indent string) string {
	var b strings.Builder
	line := 0
	for _, w := range strings.Fields(s) {
		switch {
		case line == 0:
			b.WriteString(indent)
			line = len(indent)
		case line+1+len(w) > width:
			b.WriteString("\n" + indent)
			line = len(indent)
		default:
			b.WriteByte(' ')
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	return b.String()
}

// output is --out or --summary as checked: standard output or error ("-"),
// none (""), a plain file, or a time pattern.
type output struct {
	flag    string // "out" or "summary"
	path    string // as given; a plain file's name with %% read as %
	pattern *outfile.Pattern
}

// parseOutput checks the value of --flag. A path with a time conversion is
// a pattern, and with retain > 0 its names must sort in time; any other
// path names a plain file, with %% read as % so that one syntax holds for
// both.
func parseOutput(flag, path string, retain int) (output, error) {
	o := output{flag: flag, path: path}
	if path == "" || path == "-" {
		return o, nil
	}
	p, err := outfile.ParsePattern(path)
	if err != nil {
		return o, usagef("--%s: %w", flag, err)
	}
	if !p.HasTime() {
		o.path = p.Expand(time.Time{})
		return o, nil
	}
	if _, err := outfile.NewFiles(p, retain, nil); err != nil {
		return o, usagef("--retain %d with --%s: %w", retain, flag, err)
	}
	o.pattern = &p
	return o, nil
}

// checkOutputs parses --out and --summary and checks them with --retain
// and --window.
func (c *CaptureConfig) checkOutputs() error {
	if c.Retain < 0 {
		return usagef("--retain must not be negative")
	}
	var err error
	if c.out, err = parseOutput("out", c.Out, c.Retain); err != nil {
		return err
	}
	if c.summary, err = parseOutput("summary", c.Summary, c.Retain); err != nil {
		return err
	}
	for _, o := range []output{c.out, c.summary} {
		if o.pattern != nil && c.Window == 0 {
			return usagef("--%s %q is a time pattern, one file per period of windows: it needs --window (e.g. --window 1h)", o.flag, o.path)
		}
	}
	if c.Retain > 0 && c.out.pattern == nil && c.summary.pattern == nil {
		return usagef("--retain %d keeps the newest files of a time pattern: give --out or --summary one, e.g. -w 'flows-%%Y%%m%%dT%%H.jsonl'", c.Retain)
	}
	// Two writers would interleave in one file; /dev/null takes both.
	if c.out.path != "-" && c.out.path != "" && c.out.path != os.DevNull && c.out.path == c.summary.path {
		return usagef("--out and --summary both name %q: give each its own file", c.out.path)
	}
	return nil
}

// outputs builds the sinks of --out and --summary, records first, so that
// a window's records reach their file before its summary is written.
// Notices of pattern outputs (a left-over temporary file kept, a file
// removed by --retain) go to stderr. observers, when not nil, names the
// records' observers (collect's exporters), which the record files write.
func (s *session) outputs(stdout, stderr io.Writer, observers report.ObserverNames) ([]record.Destination, error) {
	cfg := s.cfg
	var sinks []record.Destination
	if cfg.out.pattern != nil {
		files, err := s.files(cfg.out, stderr)
		if err != nil {
			return nil, err
		}
		rf, err := report.NewRecordFiles(files, cfg.Format, cfg.Key)
		if err != nil {
			return nil, err
		}
		if observers != nil {
			rf.SetObservers(observers)
		}
		if keysSegments(cfg.Decap) {
			rf.SetSegments()
		}
		sinks = append(sinks, rf)
	} else {
		w, err := s.create(cfg.out.path, stdout, stderr)
		if err != nil {
			return nil, err
		}
		rw, err := report.NewRecordWriter(w, cfg.Format, cfg.Key)
		if err != nil {
			return nil, err
		}
		if observers != nil {
			rw.SetObservers(observers) // a new writer: cannot fail
		}
		if keysSegments(cfg.Decap) {
			rw.SetSegments() // a new writer: cannot fail
		}
		sinks = append(sinks, rw)
	}
	switch {
	case cfg.summary.pattern != nil:
		files, err := s.files(cfg.summary, stderr)
		if err != nil {
			return nil, err
		}
		sinks = append(sinks, report.NewSummaryFiles(files))
	case cfg.summary.path != "":
		w, err := s.create(cfg.summary.path, stderr, stderr)
		if err != nil {
			return nil, err
		}
		sinks = append(sinks, report.NewSummaryWriter(w))
	}
	return sinks, nil
}

// keysSegments reports whether keys of a run decapsulating as d can have a
// segment (flow.Key.Segment): inside VXLAN or Geneve, without novni. The
// csv records then have a vni column.
func keysSegments(d flow.Decap) bool {
	return d.Tunnels&(flow.TunnelVXLAN|flow.TunnelGeneve) != 0 && !d.NoSegment
}

// files makes the directory of a pattern output, so that one that cannot
// be made fails the run at its start rather than at its first window, and
// returns the pattern's Files.
func (s *session) files(o output, notice io.Writer) (*outfile.Files, error) {
	if err := os.MkdirAll(o.pattern.Dir(), 0o755); err != nil {
		return nil, fmt.Errorf("--%s %s: %w", o.flag, o.pattern, err)
	}
	return outfile.NewFiles(*o.pattern, s.cfg.Retain, linePrefixer{w: notice, prefix: s.prefix()})
}

// linePrefixer writes each line it is given with prefix before it, all in
// one Write: outfile's notices, which carry no name, as the command's.
type linePrefixer struct {
	w      io.Writer
	prefix string
}

func (l linePrefixer) Write(p []byte) (int, error) {
	var b []byte
	for line := range bytes.Lines(p) {
		b = append(append(b, l.prefix...), line...)
	}
	if _, err := l.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}

// create opens path for writing ("-" is std): a plain file is created (or
// truncated) and reopened at its path on SIGHUP, with a notice on stderr.
func (s *session) create(path string, std, stderr io.Writer) (io.Writer, error) {
	if path == "-" {
		return std, nil
	}
	f, err := outfile.Create(path)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, onHangup(f, stderr), f)
	return f, nil
}

// closerFunc is a function as an io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

var _ io.Closer = closerFunc(nil)

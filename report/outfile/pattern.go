package outfile

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrPattern wraps every error of ParsePattern.
var ErrPattern = errors.New("outfile: bad file name pattern")

// Conversions lists the conversions a Pattern knows, for help texts.
const Conversions = "%Y year, %m month, %d day, %H hour, %M minute, %S second (two digits each but %Y), %j day of the year (3 digits), %F = %Y-%m-%d, %s Unix seconds, %% a literal %"

// A Pattern is a file path whose file name holds strftime-like time
// conversions (Conversions), expanded in UTC, as window times are:
// "flows-%Y%m%dT%H.jsonl" names the file of the hour starting 2026-11-25
// 10:00 UTC "flows-20261125T10.jsonl". Conversions are allowed in the last
// path element only, so that every file of a pattern is in one directory.
// The zero Pattern is invalid.
//
// Window times are Unix ns, which reach from 1677-09-21 to 2262-04-11, so
// every window, before 1970 and at the epoch included, gets a name of
// four-digit years that sorts and reads back (retention) as any other:
// the window [-60s, 0) of --window 1m is "flows-19691231T23.jsonl", and
// %s is negative before 1970 ("u--60.jsonl"). Expand takes any time.Time
// without failing: a year before 0 is written with its sign (-0001) and
// one after 9999 with all its digits (12345); such names are not read
// back by retention, and no window has them.
type Pattern struct {
	raw   string
	dir   string // the directory part, without conversions ("" for the current one)
	parts []part // the file name
	units unit   // the conversions used
	// ambiguous: %s, whose width varies, touches another conversion, or
	// another %s with only digits between, so a name cannot be split back
	// into its fields.
	ambiguous bool
}

// part is a literal run of the file name or one conversion.
type part struct {
	lit  string
	conv byte // 0 for a literal
}

// unit is a set of time fields a pattern names.
type unit uint8

const (
	unitYear unit = 1 << iota
	unitMonth
	unitDay
	unitYearDay
	unitHour
	unitMinute
	unitSecond
	unitUnix
)

// ParsePattern parses s. A pattern without any conversion is valid: it
// names one plain file (HasTime reports false).
func ParsePattern(s string) (Pattern, error) {
	if s == "" {
		return Pattern{}, fmt.Errorf("%w: empty", ErrPattern)
	}
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return Pattern{}, fmt.Errorf("%w %q: not valid UTF-8 text", ErrPattern, s)
	}
	dir, name := filepath.Split(s)
	if strings.Contains(strings.ReplaceAll(dir, "%%", ""), "%") {
		return Pattern{}, fmt.Errorf("%w %q: time conversions are allowed in the file name only, not in its directory", ErrPattern, s)
	}
	if name == "" {
		return Pattern{}, fmt.Errorf("%w %q: names a directory, not a file", ErrPattern, s)
	}
	p := Pattern{raw: s, dir: strings.ReplaceAll(dir, "%%", "%")}
	var lit strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '%' {
			lit.WriteByte(c)
			continue
		}
		if i+1 == len(name) {
			return Pattern{}, fmt.Errorf("%w %q: it ends with a lone %%", ErrPattern, s)
		}
		i++
		c = name[i]
		var u unit
		switch c {
		case '%':
			lit.WriteByte('%')
			continue
		case 'Y':
			u = unitYear
		case 'm':
			u = unitMonth
		case 'd':
			u = unitDay
		case 'j':
			u = unitYearDay
		case 'H':
			u = unitHour
		case 'M':
			u = unitMinute
		case 'S':
			u = unitSecond
		case 's':
			u = unitUnix
		case 'F':
			u = unitYear | unitMonth | unitDay
		default:
			return Pattern{}, fmt.Errorf("%w %q: unknown conversion %%%c (known: %s)", ErrPattern, s, c, Conversions)
		}
		if lit.Len() > 0 {
			p.parts = append(p.parts, part{lit: lit.String()})
			lit.Reset()
		}
		p.parts = append(p.parts, part{conv: c})
		p.units |= u
	}
	if lit.Len() > 0 {
		p.parts = append(p.parts, part{lit: lit.String()})
	}
	for i := 1; i < len(p.parts); i++ {
		a, b := p.parts[i-1].conv, p.parts[i].conv
		if a != 0 && b != 0 && (a == 's' || b == 's') {
			p.ambiguous = true
		}
		// Two %s apart by digits only ("%s1%s") cannot be split either.
		if i+1 < len(p.parts) && a == 's' && b == 0 && p.parts[i+1].conv == 's' && strings.Trim(p.parts[i].lit, "0123456789-") == "" {
			p.ambiguous = true
		}
	}
	return p, nil
}

// String returns the pattern as it was given. A pattern without time
// conversions names the file Expand returns, with %% read as %.
func (p Pattern) String() string { return p.raw }

// HasTime reports whether the pattern holds a time conversion, so that it
// names one file per period rather than one file.
func (p Pattern) HasTime() bool { return p.units != 0 }

// Dir returns the directory of the pattern's files ("." for the current
// one).
func (p Pattern) Dir() string {
	if p.dir == "" {
		return "."
	}
	return filepath.Clean(p.dir)
}

// Sortable reports whether the time a file name gives is unambiguous, so
// that the files of the pattern can be put in time order (retention needs
// it): Unix seconds, or a year with every coarser field of the finest one
// it names (%Y%m%d%H is sortable, %d%H and %Y%d are not). %s must not touch
// another conversion (%s%H cannot be split).
func (p Pattern) Sortable() bool {
	if p.ambiguous {
		return false
	}
	if p.units&unitUnix != 0 {
		return true
	}
	if p.units&unitYear == 0 {
		return false
	}
	day := p.units&unitYearDay != 0 || p.units&(unitMonth|unitDay) == unitMonth|unitDay
	switch {
	case p.units&unitSecond != 0:
		return day && p.units&(unitHour|unitMinute) == unitHour|unitMinute
	case p.units&unitMinute != 0:
		return day && p.units&unitHour != 0
	case p.units&unitHour != 0:
		return day
	case p.units&(unitDay|unitYearDay) != 0:
		return day
	}
	return true // year, or year and month
}

// Expand returns the path of the file of time t (taken in UTC).
func (p Pattern) Expand(t time.Time) string {
	t = t.UTC()
	b := make([]byte, 0, len(p.dir)+len(p.raw)+16)
	b = append(b, p.dir...)
	for _, pt := range p.parts {
		switch pt.conv {
		case 0:
			b = append(b, pt.lit...)
		case 'Y':
			b = appendInt(b, t.Year(), 4)
		case 'm':
			b = appendInt(b, int(t.Month()), 2)
		case 'd':
			b = appendInt(b, t.Day(), 2)
		case 'j':
			b = appendInt(b, t.YearDay(), 3)
		case 'H':
			b = appendInt(b, t.Hour(), 2)
		case 'M':
			b = appendInt(b, t.Minute(), 2)
		case 'S':
			b = appendInt(b, t.Second(), 2)
		case 's':
			b = strconv.AppendInt(b, t.Unix(), 10)
		case 'F':
			b = appendInt(b, t.Year(), 4)
			b = append(b, '-')
			b = appendInt(b, int(t.Month()), 2)
			b = append(b, '-')
			b = appendInt(b, t.Day(), 2)
		}
	}
	return string(b)
}

// appendInt appends n zero-padded to width digits (a negative year gets
// its sign before the padding; file names of years before 0 or after 9999
// are not read back by retention).
func appendInt(b []byte, n, width int) []byte {
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	s := strconv.Itoa(n)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// matcher recognises the file names of a pattern, with the ".N" suffix
// that Files.Commit inserts when a name is taken, and reads their times.
type matcher struct {
	re     *regexp.Regexp
	fields []byte // the conversion of each capture group, then the suffix group
}

// matcher builds the name matcher: each conversion becomes a group of
// digits, and an optional ".N" may sit where Commit puts it (before the
// extension of the last part, see suffixed).
func (p Pattern) matcher() matcher {
	var m matcher
	var re strings.Builder
	re.WriteString("^")
	name := p.parts
	ext := extAt(name)
	for i, pt := range name {
		if i == ext.part {
			re.WriteString(regexp.QuoteMeta(pt.lit[:ext.at]))
			re.WriteString(`(?:\.([0-9]+))?`)
			re.WriteString(regexp.QuoteMeta(pt.lit[ext.at:]))
			continue
		}
		switch pt.conv {
		case 0:
			re.WriteString(regexp.QuoteMeta(pt.lit))
			continue
		case 'Y':
			re.WriteString(`([0-9]{4})`)
		case 'j':
			re.WriteString(`([0-9]{3})`)
		case 's':
			re.WriteString(`(-?[0-9]+)`)
		case 'F':
			re.WriteString(`([0-9]{4}-[0-9]{2}-[0-9]{2})`)
		default:
			re.WriteString(`([0-9]{2})`)
		}
		m.fields = append(m.fields, pt.conv)
	}
	if ext.part == len(name) {
		re.WriteString(`(?:\.([0-9]+))?`)
	}
	re.WriteString("$")
	m.re = regexp.MustCompile(re.String())
	return m
}

// extPos is where a suffix goes in a file name: in part, before byte at.
type extPos struct{ part, at int }

// extAt finds where Commit inserts ".N": before the extension, when the
// last part of the name is a literal holding a dot ("flows-%H.jsonl" ->
// "flows-10.1.jsonl"); otherwise at the end (part == len(parts)).
func extAt(parts []part) extPos {
	if n := len(parts); n > 0 && parts[n-1].conv == 0 {
		if i := strings.IndexByte(parts[n-1].lit, '.'); i >= 0 && !(n == 1 && i == 0) {
			return extPos{part: n - 1, at: i}
		}
	}
	return extPos{part: len(parts)}
}

// suffixed returns the path of the file of t with ".n" inserted where the
// matcher expects it.
func (p Pattern) suffixed(t time.Time, n int) string {
	path := p.Expand(t)
	parts := p.parts
	ext := extAt(parts)
	suffix := "." + strconv.Itoa(n)
	if ext.part == len(parts) {
		return path + suffix
	}
	tail := len(parts[ext.part].lit) - ext.at // bytes of the last literal after the insertion point
	return path[:len(path)-tail] + suffix + path[len(path)-tail:]
}

// parse reads the time and suffix of a file name (not a path) of the
// pattern; ok is false when name is not one.
func (m matcher) parse(name string) (t time.Time, suffix int, ok bool) {
	g := m.re.FindStringSubmatch(name)
	if g == nil {
		return time.Time{}, 0, false
	}
	year, month, day, yday, hour, min, sec := 1970, 1, 1, 0, 0, 0, 0
	var unix int64
	hasUnix := false
	for i, conv := range m.fields {
		s := g[i+1]
		if conv == 's' { // int64: Unix seconds pass 2^31 in 2038
			u, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return time.Time{}, 0, false
			}
			unix, hasUnix = u, true
			continue
		}
		n, err := strconv.Atoi(s)
		if conv != 'F' && err != nil {
			return time.Time{}, 0, false
		}
		switch conv {
		case 'Y':
			year = n
		case 'm':
			month = n
		case 'd':
			day = n
		case 'j':
			yday = n
		case 'H':
			hour = n
		case 'M':
			min = n
		case 'S':
			sec = n
		case 'F':
			d, err := time.Parse("2006-01-02", s)
			if err != nil {
				return time.Time{}, 0, false
			}
			year, month, day = d.Year(), int(d.Month()), d.Day()
		}
	}
	if s := g[len(g)-1]; s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return time.Time{}, 0, false
		}
		suffix = n
	}
	if hasUnix {
		return time.Unix(unix, 0).UTC(), suffix, true
	}
	if yday > 0 {
		month, day = 1, yday
	}
	return time.Date(year, time.Month(month), day, hour, min, sec, 0, time.UTC), suffix, true
}

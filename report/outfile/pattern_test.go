package outfile

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExpand(t *testing.T) {
	at := time.Date(2026, 11, 5, 7, 8, 9, 500, time.UTC)
	for _, c := range []struct{ pattern, want string }{
		{"flows-%Y%m%dT%H%M.jsonl", "flows-20261105T0708.jsonl"},
		{"/var/lib/fd/src-%F-%H.csv", "/var/lib/fd/src-2026-11-05-07.csv"},
		{"d/%j-%S", "d/309-09"},
		{"at-%s", "at-1793862489"},
		{"100%%-%H.txt", "100%-07.txt"},
		{"plain.jsonl", "plain.jsonl"},
		{"a%%b", "a%b"},
		{"x%%y/%H", "x%y/07"},
	} {
		p, err := ParsePattern(c.pattern)
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", c.pattern, err)
		}
		// Expand takes any zone and names the UTC time.
		if got := p.Expand(at.In(time.FixedZone("X", 5*3600))); got != c.want {
			t.Errorf("%q.Expand = %q, want %q", c.pattern, got, c.want)
		}
	}
}

// Every time a window can have (Unix ns: 1677-09-21 to 2262-04-11)
// expands to a name of four-digit years, before 1970 and at the epoch
// too, and %s to negative seconds before 1970; times beyond Unix ns (no
// window has them) still expand without a panic, a year before 0 with
// its sign and one after 9999 with all its digits.
func TestExpandAnyTime(t *testing.T) {
	for _, c := range []struct {
		at             time.Time
		ymdhm, unix, f string
	}{
		{time.Unix(0, -60e9), "19691231T2359", "-60", "1969-12-31"},
		{time.Unix(0, -1), "19691231T2359", "-1", "1969-12-31"},
		{time.Unix(0, 0), "19700101T0000", "0", "1970-01-01"},
		{time.Unix(0, math.MinInt64), "16770921T0012", "-9223372037", "1677-09-21"},
		{time.Unix(0, math.MaxInt64), "22620411T2347", "9223372036", "2262-04-11"},
		{time.Date(-1, 3, 4, 5, 6, 0, 0, time.UTC), "-00010304T0506", "-62193380040", "-0001-03-04"},
		{time.Date(12345, 1, 2, 3, 4, 0, 0, time.UTC), "123450102T0304", "327403479840", "12345-01-02"},
	} {
		for pattern, want := range map[string]string{"f-%Y%m%dT%H%M.jsonl": "f-" + c.ymdhm + ".jsonl", "u-%s": "u-" + c.unix, "d-%F": "d-" + c.f} {
			p, err := ParsePattern(pattern)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Expand(c.at); got != want {
				t.Errorf("%q.Expand(%v) = %q, want %q", pattern, c.at, got, want)
			}
		}
	}
}

func TestParsePatternErrors(t *testing.T) {
	for _, c := range []struct{ pattern, says string }{
		{"", "empty"},
		{"flows-%Q.jsonl", "unknown conversion %Q"},
		{"flows-%", "lone %"},
		{"%Y/flows-%H", "file name only"},
		{"dir/", "names a directory"},
		{"f-%Y\xfd", "UTF-8"},
	} {
		_, err := ParsePattern(c.pattern)
		if !errors.Is(err, ErrPattern) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("ParsePattern(%q) = %v, want ErrPattern saying %q", c.pattern, err, c.says)
		}
	}
}

func TestSortable(t *testing.T) {
	for _, c := range []struct {
		pattern string
		want    bool
	}{
		{"f-%Y%m%dT%H", true}, {"f-%F", true}, {"f-%Y-%j-%H%M", true}, {"f-%s", true},
		{"f-%Y", true}, {"f-%Y%m", true}, {"f-%Y%m%d%H%M%S", true},
		{"f-%d%H", false}, {"f-%Y%d", false}, {"f-%Y%m%d%M", false}, {"f-%H", false}, {"f-%F-%S", false}, {"f-%s%H", false}, {"f-%s-%H", true},
		{"f-%s1%s", false}, {"f-%s-1%s", false}, {"f-%s.%s", true},
	} {
		p, err := ParsePattern(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Sortable(); got != c.want {
			t.Errorf("%q.Sortable() = %v, want %v", c.pattern, got, c.want)
		}
	}
}

// finest truncates t to the finest field the pattern names.
func finest(p Pattern, t time.Time) time.Time {
	t = t.UTC()
	switch {
	case p.units&(unitSecond|unitUnix) != 0:
		return t.Truncate(time.Second)
	case p.units&unitMinute != 0:
		return t.Truncate(time.Minute)
	case p.units&unitHour != 0:
		return t.Truncate(time.Hour)
	case p.units&(unitDay|unitYearDay) != 0:
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	case p.units&unitMonth != 0:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
}

// Every name Expand or a collision suffix makes is read back by the matcher
// as its period's time and suffix, for sortable patterns; names that are
// not the pattern's (temporary, partial, other) are not matched.
func TestMatcherRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, pattern := range []string{"flows-%Y%m%dT%H%M.jsonl", "s-%F.csv", "x%Y-%j-%H%M%S", "u-%s.jsonl", "%Y%m", "a.b.%Y%m%d%H.tar.gz"} {
		p, err := ParsePattern(pattern)
		if err != nil {
			t.Fatal(err)
		}
		m := p.matcher()
		for range 500 {
			at := time.Unix(r.Int64N(4102444800), 0) // 1970 to 2100
			if r.IntN(2) == 0 {
				at = time.Unix(0, int64(r.Uint64())).Truncate(time.Second) // any time a window can have, 1677 to 2262
			}
			for _, suffix := range []int{0, 1, 12} {
				name := p.Expand(at)
				if suffix > 0 {
					name = p.suffixed(at, suffix)
				}
				got, gotSuffix, ok := m.parse(filepath.Base(name))
				if !ok || !got.Equal(finest(p, at)) || gotSuffix != suffix {
					t.Fatalf("%q: %q parsed as %v, %d, %v; want %v, %d", pattern, name, got, gotSuffix, ok, finest(p, at), suffix)
				}
				for _, other := range []string{name + TempSuffix, p.Expand(at) + PartialSuffix, p.Expand(at) + PartialSuffix + ".1", "x" + filepath.Base(name)} {
					if _, _, ok := m.parse(filepath.Base(other)); ok {
						t.Fatalf("%q: %q matched as a committed file", pattern, other)
					}
				}
			}
		}
	}
}

func TestSuffixedPlacement(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	for _, c := range []struct{ pattern, want string }{
		{"flows-%H.jsonl", "flows-03.2.jsonl"},
		{"flows-%H", "flows-03.2"},
		{"d/f.%Y%m%d%H", "d/f.2026010203.2"},
		{"f-%H.tar.gz", "f-03.2.tar.gz"},
	} {
		p, _ := ParsePattern(c.pattern)
		if got := p.suffixed(at, 2); got != c.want {
			t.Errorf("%q suffixed = %q, want %q", c.pattern, got, c.want)
		}
	}
}

// ParsePattern never panics; a pattern it accepts expands, and for a
// sortable one the expansion reads back.
func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{"flows-%Y%m%dT%H.jsonl", "%", "%%", "a/%F/b", "%s%s", "x.%Y%m.y", "%Y%j%H%M%S", ".%Y"} {
		f.Add(s, int64(1793862489))
	}
	// Window times before 1970, at the epoch, and at the ends of Unix ns.
	for _, unix := range []int64{-60, -1, 0, -9223372036, 9223372036} {
		f.Add("s-%Y%m%dT%H%M%S.jsonl", unix)
		f.Add("u-%s.jsonl", unix)
	}
	f.Fuzz(func(t *testing.T, s string, unix int64) {
		p, err := ParsePattern(s)
		if err != nil {
			return
		}
		unix %= math.MaxInt64 / int64(time.Second) // the seconds of Unix ns, before 1970 too: every window's time
		at := time.Unix(unix, 0)
		name := p.Expand(at)
		if !p.HasTime() || !p.Sortable() || strings.ContainsRune(name, '/') && filepath.Dir(name) != p.Dir() {
			return
		}
		if got, _, ok := p.matcher().parse(filepath.Base(name)); !ok || !got.Equal(finest(p, at)) {
			t.Fatalf("%q: %q read back as %v, %v; want %v", s, name, got, ok, finest(p, at))
		}
	})
}

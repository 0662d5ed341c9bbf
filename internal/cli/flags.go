package cli

import (
	"errors"
	"flag"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// errDuration is the message of every duration flag that does not parse:
// time.ParseDuration's own ("unknown unit \"x\" in duration \"1x\"") does
// not say what would have been right.
var errDuration = errors.New("want a duration such as 30s, 5m, 1h (units ns, us, ms, s, m, h)")

// durationValue is a time.Duration flag whose parse error says what a
// duration looks like. set, when not nil, records that the flag was given.
type durationValue struct {
	p   *time.Duration
	set *bool
}

var _ pflag.Value = durationValue{}

func durationFlag(fs *pflag.FlagSet, p *time.Duration, name, usage string) {
	fs.Var(durationValue{p: p}, name, usage)
}

// String is the value, or "0" for none, which help does not print as a
// default.
func (d durationValue) String() string {
	if d.p == nil || *d.p == 0 {
		return "0"
	}
	return d.p.String()
}

func (d durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errDuration
	}
	*d.p = v
	if d.set != nil {
		*d.set = true
	}
	return nil
}

func (durationValue) Type() string { return "duration" }

// seedFlag is a uint64 flag that remembers whether it was given.
type seedFlag struct {
	v   uint64
	set bool
}

var _ pflag.Value = (*seedFlag)(nil)

func (s *seedFlag) String() string {
	if !s.set {
		return ""
	}
	return strconv.FormatUint(s.v, 10)
}

func (s *seedFlag) Set(v string) error {
	n, err := strconv.ParseUint(v, 0, 64)
	if err != nil {
		return errors.New("not an unsigned 64-bit integer")
	}
	s.v, s.set = n, true
	return nil
}

func (*seedFlag) Type() string { return "uint64" }

// typed gives a standard flag.Value (one a library defines without pflag's
// Type method) the type name help shows when its usage names none.
type typed struct {
	flag.Value
	typ string
}

func (t typed) Type() string { return t.typ }

// addGoFlags adds to fs the flags bind registers on a standard
// flag.FlagSet (a library's Config.BindFlags, such as
// afpacket.Config's), with the short forms in short (flag name ->
// letter) and duration flags whose errors say what a duration looks like.
func addGoFlags(fs *pflag.FlagSet, bind func(*flag.FlagSet), short map[string]string) {
	gfs := flag.NewFlagSet("", flag.ContinueOnError)
	bind(gfs)
	gfs.VisitAll(func(gf *flag.Flag) {
		pf := pflag.PFlagFromGoFlag(gf)
		if g, ok := gf.Value.(flag.Getter); ok {
			if _, isDur := g.Get().(time.Duration); isDur {
				pf.Value = goDuration{gf.Value}
			}
		}
		pf.Shorthand = short[gf.Name]
		fs.AddFlag(pf)
	})
}

// goDuration is a standard duration flag with errDuration as its error.
type goDuration struct{ flag.Value }

func (d goDuration) Set(s string) error {
	if _, err := time.ParseDuration(s); err != nil {
		return errDuration
	}
	return d.Value.Set(s)
}

func (goDuration) Type() string { return "duration" }

// orList writes names as "a, b, c or d".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

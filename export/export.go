package export

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/flowdedup/flowdedup/export/clickhouse"
	"github.com/flowdedup/flowdedup/export/ipfix"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/record"
)

// ErrScheme: an --export URL whose scheme no destination serves.
var ErrScheme = errors.New("export: unknown destination scheme")

// Options are what every destination of a run shares.
type Options struct {
	// Kind is the key kind of the records (--key).
	Kind flow.KeyKind
	// Prefix is the prefix lengths of keys by network (--prefix); the
	// zero Mask for hosts. ClickHouse's kind column says it.
	Prefix flow.Mask
	// Observer names this observation point (--observer), for the
	// destinations that store it with each record.
	Observer string
	// ObservationDomain is the IPFIX observation domain ID
	// (--observation-domain) of this run's records: an IPFIX
	// destination's Queue gives it to every batch
	// (QueueConfig.Domain), so that the batches it spools keep it,
	// and batches spooled by an earlier run go out under that run's.
	ObservationDomain uint32
	// Spool, when not nil, keeps what a destination cannot take yet on
	// disk (--spool, --spool-max).
	Spool *Spool
	// DrainTimeout bounds how long closing a Queue tries to deliver what is
	// queued (--export-drain); zero means DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Notices receives the destinations' state changes, a line each
	// (stderr), and the warning about a password written in a URL; nil
	// says nothing.
	Notices io.Writer
	// Wait makes a destination that is up but slower than the run slow
	// the run down rather than lose records (QueueConfig.Wait):
	// replay sets it, live capture does not.
	Wait bool
	// Env is where a destination finds a password its URL does not hold
	// (clickhouse.URL.Config): the zero value is the process's
	// environment and files.
	Env clickhouse.Env
}

// opener makes the Destination of a URL and says how its Queue batches.
type opener func(raw string, o *Options) (record.Destination, QueueConfig, error)

// destination is what a scheme serves: check parses a URL (and reads the
// secrets it names) without making anything, open makes its Destination.
type destination struct {
	check func(raw string, env clickhouse.Env) error
	open  opener
}

// openers maps each scheme to its destination: the one place a destination
// is added.
var openers = map[string]destination{
	ipfix.SchemeUDP:   {checkIPFIX, openIPFIX},
	ipfix.SchemeTCP:   {checkIPFIX, openIPFIX},
	clickhouse.Scheme: {checkClickHouse, openClickHouse},
}

// Schemes returns the URL schemes Open serves, sorted.
func Schemes() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for s := range openers {
			if !yield(s) {
				return
			}
		}
	})
}

// Open opens the --export destination rawURL: it makes the Destination of its
// scheme (which does not connect yet, or does not mind a destination that
// is down) and returns it in a running Queue named Dest(rawURL). A
// malformed URL, a scheme no destination serves (ErrScheme, listing those
// that are) and a Config the destination refuses are errors.
func Open(rawURL string, o Options) (*Queue, error) {
	d, err := lookup(rawURL)
	if err != nil {
		return nil, err
	}
	dst, qc, err := d.open(rawURL, &o)
	if err != nil {
		return nil, err
	}
	qc.Spool = o.Spool
	qc.DrainTimeout = o.DrainTimeout
	qc.Notices = o.Notices
	qc.Wait = o.Wait
	q, err := NewQueue(Dest(rawURL), dst, qc)
	if err != nil {
		dst.Close()
		return nil, err
	}
	return q, nil
}

// Check reports whether Open would take rawURL with Options whose Env is
// env: a URL of a scheme some destination serves, in the form that
// destination wants, whose password file (if it names one) can be read.
// It connects, resolves and sends nothing, so that a command line can be
// refused (a usage error) before a run starts; its errors are Open's for
// the same URL (ErrScheme, ipfix.ErrURL, clickhouse.ErrURL,
// clickhouse.ErrPasswordFile).
func Check(rawURL string, env clickhouse.Env) error {
	d, err := lookup(rawURL)
	if err != nil {
		return err
	}
	return d.check(rawURL, env)
}

// lookup returns the destination of rawURL's scheme, or ErrScheme.
func lookup(rawURL string) (destination, error) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok {
		return destination{}, fmt.Errorf("%w: %q: want SCHEME://HOST:PORT[/PATH], with one of the schemes %s", ErrScheme, rawURL, strings.Join(Schemes(), ", "))
	}
	d, ok := openers[strings.ToLower(scheme)]
	if !ok {
		return destination{}, fmt.Errorf("%w %q in %q (known: %s)", ErrScheme, scheme, Dest(rawURL), strings.Join(Schemes(), ", "))
	}
	return d, nil
}

// OpenAll opens every URL (see Open). The same destination given twice is
// an error, and so is any Open's: the Queues opened before it are closed.
func OpenAll(rawURLs []string, o Options) ([]*Queue, error) {
	var qs []*Queue
	seen := make(map[string]bool)
	fail := func(err error) ([]*Queue, error) {
		for _, q := range qs {
			q.Close()
		}
		return nil, err
	}
	for _, raw := range rawURLs {
		d := Dest(raw)
		if seen[d] {
			return fail(fmt.Errorf("export: %s is given twice", d))
		}
		seen[d] = true
		q, err := Open(raw, o)
		if err != nil {
			return fail(err)
		}
		qs = append(qs, q)
	}
	return qs, nil
}

// Dest returns the name of the destination rawURL in summaries, metrics,
// notices and the spool: SCHEME://HOST[:PORT][/PATH], without the
// credentials, query or fragment a URL may carry. A URL that does not
// parse is returned without what precedes its last '@' (a password may
// hold '/', '?' or '#', which is why it does not parse) and without what
// follows a '?' or '#' after that.
func Dest(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		s := rawURL
		scheme, rest, ok := strings.Cut(s, "://")
		if ok {
			if at := strings.LastIndex(rest, "@"); at >= 0 {
				rest = rest[at+1:]
			}
			s = scheme + "://" + rest
		}
		if i := strings.IndexAny(s, "?#"); i >= 0 {
			s = s[:i]
		}
		return s
	}
	return (&url.URL{Scheme: strings.ToLower(u.Scheme), Host: u.Host, Path: u.Path}).String()
}

func checkIPFIX(raw string, _ clickhouse.Env) error {
	_, err := ipfix.ParseURL(raw)
	return err
}

func openIPFIX(raw string, o *Options) (record.Destination, QueueConfig, error) {
	cfg, err := ipfix.ParseURL(raw)
	if err != nil {
		return nil, QueueConfig{}, err
	}
	cfg.Kind = o.Kind
	cfg.ObservationDomain = o.ObservationDomain
	e, err := ipfix.New(cfg)
	if err != nil {
		return nil, QueueConfig{}, err
	}
	// The report defaults: batches of 1024 records (about 15 messages on a
	// 1500-byte path), out within a second. The batches carry this run's
	// domain, through the spool.
	return e, QueueConfig{Domain: record.Domain{ID: o.ObservationDomain, Valid: true}}, nil
}

// ClickHouse batching: ClickHouse asks for inserts of 1,000 to 100,000
// rows, at most about one a second (each insert makes a part on disk that
// the server merges later; many small ones make it refuse inserts, "too
// many parts"). Batches of 65536 rows (4.5 MiB in memory, a 4.5 MiB spool
// file) made at least 2 s apart keep a run under one insert a second up
// to 32768 distinct flows a second, and far under the part limits above
// that; a trickle of records still reaches the table within 2 s. Memory
// holds 4 such batches (the default bound).
const (
	clickHouseBatchSize = 1 << 16
	clickHouseBatchAge  = 2 * time.Second
)

func checkClickHouse(raw string, env clickhouse.Env) error {
	_, _, err := clickHouseConfig(raw, env)
	return err
}

// clickHouseConfig parses raw and looks its password up in env; exposed
// says that raw holds the password.
func clickHouseConfig(raw string, env clickhouse.Env) (cfg clickhouse.Config, exposed bool, err error) {
	u, err := clickhouse.ParseURL(raw)
	if err != nil {
		return clickhouse.Config{}, false, err
	}
	cfg, err = u.Config(env)
	if err != nil {
		return clickhouse.Config{}, false, fmt.Errorf("export %s: %w", Dest(raw), err)
	}
	return cfg, u.Password != "", nil
}

// ExposedPassword is the warning Open writes to Options.Notices, once, for
// a URL that holds a password, after "flowdedup: export DEST: ".
const ExposedPassword = "the password is written in the --export URL, where every user of this host can read it (ps, /proc/PID/cmdline, systemctl show): " +
	"put it in a file readable by this user alone and add ?" + clickhouse.PasswordFileParam + "=PATH to the URL (with systemd: LoadCredential= and " +
	clickhouse.PasswordFileParam + "=${" + clickhouse.CredentialsDirVar + "}/NAME), or set " + clickhouse.PasswordEnv + " and leave the password out"

func openClickHouse(raw string, o *Options) (record.Destination, QueueConfig, error) {
	cfg, exposed, err := clickHouseConfig(raw, o.Env)
	if err != nil {
		return nil, QueueConfig{}, err
	}
	if exposed && o.Notices != nil {
		io.WriteString(o.Notices, "flowdedup: export "+Dest(raw)+": warning: "+ExposedPassword+"\n")
	}
	cfg.Kind, cfg.Prefix = o.Kind, o.Prefix
	cfg.Observer = o.Observer
	e, err := clickhouse.New(cfg)
	if err != nil {
		return nil, QueueConfig{}, err
	}
	return e, QueueConfig{BatchSize: clickHouseBatchSize, BatchAge: clickHouseBatchAge, MaxQueued: 4 * clickHouseBatchSize}, nil
}

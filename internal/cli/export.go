package cli

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowdedup/flowdedup/export"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/units"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/flowdedup/flowdedup/export/clickhouse"
	"github.com/flowdedup/flowdedup/report"
	"github.com/flowdedup/flowdedup/sketch"
)

// DefaultSpoolMax bounds the --spool directory unless --spool-max says
// otherwise: about 15 million spooled records (68 bytes each on disk), a
// ClickHouse that is down for an hour at 4000 distinct flows a second.
const DefaultSpoolMax = 1 << 30

// ExportConfig holds the export and network-wide count flags replay and
// run share (docs/architecture.md#export).
type ExportConfig struct {
	URLs              []string      // --export, repeatable
	Observer          string        // --observer; "" until check: the host name
	Spool             string        // --spool DIR; "" keeps everything in memory
	SpoolMax          int64         // --spool-max, bytes
	Drain             time.Duration // --export-drain
	ObservationDomain uint32        // --observation-domain
	SketchSeed        sketchSeed    // --sketch-seed
	SummarySketch     bool          // --summary-sketch: pipeline.Config.KeepSketch

	spoolMaxSet bool
	// env is where a clickhouse:// URL's password is looked up when the
	// URL holds none: the process's environment and files.
	env clickhouse.Env
}

// newExportConfig returns the defaults.
func newExportConfig() ExportConfig {
	return ExportConfig{
		SpoolMax:   DefaultSpoolMax,
		Drain:      export.DefaultDrainTimeout,
		SketchSeed: sketchSeed(sketch.DefaultSeed),
		env:        clickhouse.OSEnv(),
	}
}

// exportHelp is the --export flag's usage: the schemes, and the collector
// commands a user can paste to try them.
const exportHelp = "also send every distinct-flow record (and window summary, where the destination takes them) to `URL`, batched, off the workers' path; repeatable. " +
	"ipfix://HOST:PORT (IPFIX over UDP) or ipfix+tcp://HOST:PORT, e.g. to nfdump's collector started with 'nfcapd -w /tmp/flows -p 4739': --export ipfix://127.0.0.1:4739; " +
	"clickhouse://[USER@]HOST:PORT/DB (the HTTP interface; the flows and windows tables are created if missing), e.g. --export clickhouse://127.0.0.1:8123/flows. " +
	"USER's password comes from the file PATH of the query ?password_file=PATH (its trailing newline dropped), else from $" + clickhouse.PasswordEnv + ", else is empty, " +
	"e.g. --export 'clickhouse://writer@ch:8123/db?password_file=pw'; under systemd, LoadCredential=NAME:FILE and password_file=${CREDENTIALS_DIRECTORY}/NAME. " +
	"USER:PASSWORD@ in the URL works too, but every user of the host sees it (ps), and flowdedup warns. " +
	"A destination that is down is retried (and spooled with --spool); what cannot be delivered is counted by reason (the summaries' export_dropped, and the run totals that end the --summary output); replay then exits 1, run says it on stderr"

// bind registers the flags on fs.
func (c *ExportConfig) bind(fs *pflag.FlagSet) {
	fs.StringArrayVar(&c.URLs, "export", nil, exportHelp)
	fs.StringVar(&c.Observer, "observer", c.Observer, "`NAME` of this observation point (router) in every summary and exported record, e.g. --observer edge-fra1; routers merged by 'flowdedup merge' or queried together in ClickHouse need distinct names (default: the host name)")
	fs.StringVar(&c.Spool, "spool", c.Spool, "keep what an export destination cannot take yet in `DIR` (created, mode 0700), and send it when the destination is back, in this run or the next, e.g. --spool /var/spool/flowdedup; without it a destination down for long loses records (counted as queue_full)")
	fs.Var(sizeValue{p: &c.SpoolMax, set: &c.spoolMaxSet}, "spool-max", "bound the --spool directory to `SIZE` (B, KiB, MiB, GiB or TiB), e.g. --spool-max 20GiB; what does not fit is counted as spool_full")
	fs.Var(durationValue{p: &c.Drain}, "export-drain", "at the end of the run, go on delivering what the export destinations have not taken yet for at most `D`, e.g. --export-drain 1m; what is left goes to the spool, or is counted as shutdown")
	fs.Uint32Var(&c.ObservationDomain, "observation-domain", c.ObservationDomain, "IPFIX observation domain ID `N` in every message header (collectors tell exporters apart by address and domain), e.g. --observation-domain 7")
	fs.Var(&c.SketchSeed, "sketch-seed", "hash seed `N` of the distinct-count sketches (distinct_estimate): routers whose summaries are merged share it; decimal or 0x hex, e.g. --sketch-seed 0x5eed; the default is public, so a fleet that fears crafted keys sets a secret one on every router")
	fs.BoolVar(&c.SummarySketch, "summary-sketch", c.SummarySketch, "put each window's sketch (base64, up to about 12 KiB) in its summary and ClickHouse row, for 'flowdedup merge' and network-wide estimates")
}

// check validates the flags and fills in the host name.
func (c *ExportConfig) check() error {
	seen := make(map[string]bool, len(c.URLs))
	for _, u := range c.URLs {
		if err := export.Check(u, c.env); err != nil {
			return usageError{err}
		}
		d := export.Dest(u)
		if seen[d] {
			return usagef("--export %s is given twice: each destination gets every record once", d)
		}
		seen[d] = true
	}
	if c.Spool == "" && c.spoolMaxSet {
		return usagef("--spool-max needs --spool DIR: without a spool nothing is kept on disk")
	}
	if c.Drain <= 0 {
		return usagef("--export-drain must be positive, e.g. 1s")
	}
	if c.Observer == "" {
		if h, err := os.Hostname(); err == nil {
			c.Observer = h
		}
	}
	if len(c.Observer) > record.MaxObserverLen {
		return usagef("--observer is %d bytes, at most %d", len(c.Observer), record.MaxObserverLen)
	}
	return nil
}

// openExports opens the spool (when asked for) and the export Queues, and
// says on stderr, in one line, which spooled destinations this run does not
// export to. The spool is closed with the session, after the Reporter has
// closed the Queues. A replay (not live) waits for a destination that is
// up but slower than it (export.Options.Wait): it loses nothing by
// waiting, as a live capture would.
func (s *session) openExports(cfg *CaptureConfig, live bool, stderr io.Writer) ([]*export.Queue, error) {
	c := &cfg.Export
	if len(c.URLs) == 0 && c.Spool == "" {
		return nil, nil
	}
	o := export.Options{
		Kind: cfg.Key, Prefix: cfg.Prefix, Observer: c.Observer, ObservationDomain: c.ObservationDomain,
		DrainTimeout: c.Drain, Notices: stderr, Wait: !live, Env: c.env,
	}
	if c.Spool != "" {
		sp, err := export.OpenSpool(c.Spool, c.SpoolMax)
		if err != nil {
			return nil, fmt.Errorf("--spool: %w", err)
		}
		s.closers = append(s.closers, sp)
		o.Spool = sp
	}
	qs, err := export.OpenAll(c.URLs, o)
	if err != nil {
		return nil, err
	}
	if o.Spool != nil {
		if left := o.Spool.Unclaimed(); len(left) > 0 {
			var parts []string
			for _, d := range slices.Sorted(maps.Keys(left)) {
				parts = append(parts, fmt.Sprintf("%s (%d files)", d, left[d]))
			}
			fmt.Fprintf(stderr, "flowdedup: spool %s holds what earlier runs could not deliver to destinations this run does not export to, kept for a run that does: %s\n",
				c.Spool, strings.Join(parts, ", "))
		}
	}
	return qs, nil
}

// exportLoss returns nil when the exports of a run lost nothing (t is the
// Reporter's run totals; nil: the Reporter was not closed), and otherwise
// an error that says how many records and window summaries were not
// delivered, by destination and reason, and what keeps them: replay fails
// with it (exit 1); run and collect, daemons whose exit status stays 0
// when stopped by a signal, say it on stderr (session.run does both).
// Delivered later from the spool is not lost.
func exportLoss(t *report.RunTotals, c *ExportConfig) error {
	if t == nil || t.Lost() == 0 {
		return nil
	}
	reasons := map[string]bool{}
	var dests []string
	for _, st := range t.Exports {
		var n uint64
		var by []string
		for _, r := range export.DropReasons {
			if d := st.Dropped[r]; d > 0 {
				n += d
				by = append(by, fmt.Sprintf("%s %d", r, d))
				reasons[r] = true
			}
		}
		if n > 0 {
			dests = append(dests, fmt.Sprintf("%s %d (%s)", st.Dest, n, strings.Join(by, ", ")))
		}
	}
	msg := fmt.Sprintf("%d records and window summaries were not delivered: %s", t.Lost(), strings.Join(dests, ", "))
	switch {
	case c.Spool == "" && (reasons[export.DropQueueFull] || reasons[export.DropShutdown]):
		msg += "; --spool DIR keeps what a destination cannot take on disk and sends it when it is back, in this run or the next"
	case reasons[export.DropSpoolFull]:
		msg += fmt.Sprintf("; the spool %s was full: a larger --spool-max (now %s) keeps more", c.Spool, units.FormatBytes(c.SpoolMax))
	}
	switch {
	case reasons[export.DropRejected] && c.Spool != "":
		msg += "; what a destination rejected is said above, and kept in its rejected directory of the spool " + c.Spool + " while the spool has room"
	case reasons[export.DropRejected]:
		msg += "; what a destination rejected is said above (with --spool DIR it is kept for inspection)"
	}
	if reasons[export.DropSpoolCorrupt] {
		msg += "; unreadable spool files were moved aside (see above)"
	}
	return errors.New(msg)
}

// registerExports adds the export Queues' metrics to reg, labelled with the
// filter as the pipeline's are.
func registerExports(reg *prometheus.Registry, filter string, qs []*export.Queue) {
	if len(qs) > 0 {
		prometheus.WrapRegistererWith(prometheus.Labels{"filter": filter}, reg).MustRegister(export.NewCollector(qs))
	}
}

// asExports gives the Reporter the export Queues.
func asExports(qs []*export.Queue) []record.Export {
	ex := make([]record.Export, len(qs))
	for i, q := range qs {
		ex[i] = q
	}
	return ex
}

// closeQueues closes export Queues the Reporter never took charge of.
func closeQueues(qs []*export.Queue) {
	for _, q := range qs {
		q.Close()
	}
}

// lockWriter returns w safe for the concurrent writes of a run: the export
// Queues' notices come from goroutines of their own, while summaries
// (--summary -) and the command's lines are written by others. An
// *os.File is returned as it is: each Write is one system call, and
// startProgress looks for a terminal behind it.
func lockWriter(w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok {
		return w
	}
	return &lockedWriter{w: w}
}

// sketchSeed is the --sketch-seed flag: a uint64, decimal or 0x hex,
// never 0 (which pipeline.Config takes for "the default").
type sketchSeed uint64

var _ pflag.Value = (*sketchSeed)(nil)

func (s *sketchSeed) String() string { return fmt.Sprintf("%#x", uint64(*s)) }

func (s *sketchSeed) Set(v string) error {
	n, err := strconv.ParseUint(v, 0, 64)
	switch {
	case err != nil:
		return errors.New("want an unsigned 64-bit integer, decimal or 0x hex")
	case n == 0:
		return errors.New("0 is not a seed: leave the flag out for the default")
	}
	*s = sketchSeed(n)
	return nil
}

func (*sketchSeed) Type() string { return "uint64" }

// sizeValue is a SIZE flag in bytes (units.ParseBytes); set, when not nil,
// records that the flag was given.
type sizeValue struct {
	p   *int64
	set *bool
}

var _ pflag.Value = sizeValue{}

func (v sizeValue) String() string {
	if v.p == nil {
		return ""
	}
	return units.FormatBytes(*v.p)
}

func (v sizeValue) Set(s string) error {
	n, err := units.ParseBytes(s)
	if err != nil {
		return err
	}
	*v.p = n
	if v.set != nil {
		*v.set = true
	}
	return nil
}

func (sizeValue) Type() string { return "size" }

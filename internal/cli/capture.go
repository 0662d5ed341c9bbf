package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/filters"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/record"
	"github.com/flowdedup/flowdedup/report"
	"github.com/flowdedup/flowdedup/units"
)

// DefaultFilter is the filter replay and run use unless told otherwise:
// QHT with 4 buckets of 12-bit fingerprints (asymptotic FPR k/S =
// 4/4095 ≈ 0.1%), one core's L2 per shard. Not QQHTD: it inserts every
// packet, duplicates too, into a row's 4-slot FIFO, so on real traffic a
// heavy hitter sharing a row pushes the other keys out and they are
// reported again (seen on zipf.pcap.gz: 1-3 extra keys per window of ~300,
// where QHT matches the exact count). The papers' own benchmark setting
// (1 bucket, 3 bits) aims at a 25% FPR, not at reporting flows; a spec
// that leaves buckets or fpbits out gets the product's values too
// (filters.WithProductDefaults).
const DefaultFilter = "qht:mem=auto,buckets=4,fpbits=12"

// DefaultLateness is how long a window stays open after its end when
// --lateness is not given, but at most one window. Packet time goes back
// by up to about a second in the captures this is for: a pcapng file
// whose interfaces dumpcap wrote from separate buffers, flushed every few
// hundred milliseconds; AF_PACKET rings handed over by block timeout and
// poll interval (10 ms, 100 ms) and read by readers a loaded machine
// deschedules. 5s covers that several times over. Its cost is memory and
// delay, not accuracy: a worker keeps a filter for each window that can
// be open, ceil(lateness/window)+1, so 2 filters whenever the window is at
// least 5s (hence the cap at one window: a short window does not multiply
// the memory by surprise), and each window's summary and records are
// final 5s after its end. Files merged out of order by hours are beyond
// any lateness: their old packets are counted as late, never put in the
// wrong window.
const DefaultLateness = 5 * time.Second

// CaptureConfig holds the flags replay and run share (the common flags of
// docs/architecture.md#the-command-line). Flags both will gain (exports, per-window files) belong here.
type CaptureConfig struct {
	// parsers is replay's --parsers, resolved (pipeline.Config.Parsers).
	parsers  int
	Key      flow.KeyKind
	Prefix   flow.Mask  // --prefix: keys by network; zero for hosts
	Decap    flow.Decap // --decap (replay): the tunnels keyed inside; zero for the outermost header
	Filter   string
	Workers  int
	Window   time.Duration
	Lateness time.Duration // DefaultLateness, capped at Window, unless given
	Out      string
	Format   string
	Summary  string
	Retain   int // newest files of each time-pattern output kept; 0 all
	Metrics  string
	Seed     seedFlag
	Pin      bool
	Numeric  bool // -n: accepted for tcpdump habit; keys are always numeric
	Export   ExportConfig
	Profile  ProfileConfig // --cpuprofile, --memprofile: of the whole session
	// Spread is --spread (SIDE[:N], repeatable), SpreadCounters
	// --spread-counters; checked into spread.
	Spread         []string
	SpreadCounters int

	latenessSet bool
	// lateDefault is the lateness of a run that does not give one, at most
	// one window; 0 means DefaultLateness (collect's is a window).
	lateDefault time.Duration

	// Set by check.
	spec         string // the filter spec in effect: canonical, product defaults in
	open         int    // windows open at once, each with a filter per worker
	out, summary output // --out and --summary parsed
	spread       report.SpreadConfig

	// damagedFiles, set by replay, counts the capture files found
	// damaged, for the run totals (report.Config.DamagedFiles).
	damagedFiles func() map[string]uint64
}

// newCaptureConfig returns the defaults of replay and run.
func newCaptureConfig() CaptureConfig {
	return CaptureConfig{
		Key:     flow.KeySrc,
		Filter:  DefaultFilter,
		Workers: runtime.NumCPU(),
		Out:     "-",
		Format:  "jsonl",
		Export:  newExportConfig(),
	}
}

// BindFlags registers the shared flags on fs, with c's values as their
// defaults.
func (c *CaptureConfig) BindFlags(fs *pflag.FlagSet) {
	fs.TextVar(&c.Key, "key", c.Key, "flow `KIND`: src | dst | pair | 5tuple")
	fs.TextVar(&c.Prefix, "prefix", c.Prefix, prefixUsage)
	fs.StringVar(&c.Filter, "filter", c.Filter, "duplicate filter `SPEC` of each worker's shard; mem= is per shard, and parameters the spec leaves out take the product defaults 'flowdedup filters' lists")
	fs.IntVar(&c.Workers, "workers", c.Workers, fmt.Sprintf("worker shards, each owning one filter per open window; the default is the number of CPUs, the most %d per CPU", maxWorkersPerCPU))
	durationFlag(fs, &c.Window, "window", "landmark window `D`, e.g. 1h: each key is reported at most once per window and filters are cleared at its end (0: one window for the whole run)")
	fs.Var(durationValue{p: &c.Lateness, set: &c.latenessSet}, "lateness", fmt.Sprintf("allowed lateness `D`: a window closes when the newest packet time passes its end plus D, so packets whose time goes back by up to D (pcapng interfaces interleaved, several capture rings) are still counted in their own window; older ones are counted as late. Each worker keeps ceil(D/window)+1 filters (default %s, at most one --window: 2 filters)", DefaultLateness))
	fs.StringVarP(&c.Out, "out", "w", c.Out, "distinct-flow records `PATH` (- = stdout), or a time pattern for one file per period, e.g. 'flows-%Y%m%dT%H.jsonl' (UTC, conversions in the file name only, %% for a literal %; see Output files above); SIGHUP reopens a plain file")
	fs.StringVar(&c.Format, "format", c.Format, "record format: jsonl | csv | text")
	fs.StringVar(&c.Summary, "summary", c.Summary, "write one JSON summary per closed window to `PATH` (- = stderr), or to a time pattern's files as --out")
	fs.IntVar(&c.Retain, "retain", c.Retain, "keep the files of the newest `N` periods of each time-pattern output, removing older ones as new ones are finished (0 = keep all); a file and the NAME.1, NAME.2 copies a rerun writes beside it are one period; needs names that sort in time, e.g. %Y%m%dT%H")
	fs.StringVar(&c.Metrics, "metrics", c.Metrics, "serve Prometheus metrics on `ADDR`, e.g. 127.0.0.1:9100 (default off)")
	fs.Var(&c.Seed, "seed", "hash key `N` (default: random per run, so nobody can craft colliding keys; set it to reproduce a run)")
	fs.BoolVar(&c.Pin, "pin", c.Pin, "pin each worker and reader to its own CPU")
	fs.BoolVarP(&c.Numeric, "numeric", "n", c.Numeric, "accepted for tcpdump habit (-n, -nn): addresses and ports are always written as numbers")
	c.bindSpread(fs)
	c.Export.bind(fs)
	c.Profile.BindFlags(fs)
}

// prefixUsage is the help of --prefix, shared by every command that keys
// packets.
const prefixUsage = "key addresses by their networks: `V4LEN[,V6LEN]` prefix lengths (0-32, 0-128; V6LEN 128 when left out), e.g. 24,64; records print CIDR text such as 10.1.2.0/24 (default: hosts)"

// completeCaptureFlags registers the shell completions of the shared flags.
func completeCaptureFlags(cmd *cobra.Command) {
	complete(cmd, "key", "src", "dst", "pair", "5tuple")
	complete(cmd, "format", report.Formats...)
	complete(cmd, "filter", filters.Names()...)
	complete(cmd, "spread", "src", "dst", "src:10", "dst:10")
}

// check validates the flags, fills in the defaults that depend on others,
// and refuses, before anything is allocated, filters that need more memory
// than budget or more workers than this machine should run.
func (c *CaptureConfig) check(budget memoryBudget) error {
	if !c.Key.IsValid() {
		return usagef("--key: want src, dst, pair or 5tuple")
	}
	if c.Workers < 1 {
		return usagef("--workers must be at least 1")
	}
	if n := maxWorkers(); c.Workers > n {
		return usagef("--workers %d: more than %d per CPU (%d here): a worker wants a CPU of its own, and more of them only take turns",
			c.Workers, maxWorkersPerCPU, n)
	}
	if c.Window < 0 {
		return usagef("--window must not be negative")
	}
	if c.Lateness < 0 {
		return usagef("--lateness must not be negative")
	}
	switch {
	case c.latenessSet && c.Window == 0:
		return usagef("--lateness needs --window: without windows the whole run is one window and no packet is late")
	case !c.latenessSet:
		c.Lateness = min(cmp.Or(c.lateDefault, DefaultLateness), c.Window)
	}
	c.open = 1
	if c.Window > 0 {
		c.open = int((c.Lateness+c.Window-1)/c.Window) + 1
	}
	if c.open > pipeline.MaxOpenWindows {
		return usagef("--lateness %v with --window %v keeps %d windows open: at most %d (a lateness of up to %v)",
			c.Lateness, c.Window, c.open, pipeline.MaxOpenWindows, (pipeline.MaxOpenWindows-1)*c.Window)
	}
	if !slices.Contains(report.Formats, c.Format) {
		return usagef("--format %q: want jsonl, csv or text", c.Format)
	}
	if err := c.checkOutputs(); err != nil {
		return err
	}
	if err := c.Export.check(); err != nil {
		return err
	}
	spec, err := filters.WithProductDefaults(c.Filter)
	if err != nil {
		return usageError{fmt.Errorf("--filter: %w", err)}
	}
	if err := checkFootprint(spec, c.Workers, c.open, budget); err != nil {
		return err
	}
	// One filter, within the budget: New checks the values and gives the
	// canonical spec (mem=auto resolved).
	f, err := filters.New(spec, 0)
	if err != nil {
		return usageError{fmt.Errorf("--filter: %w", err)}
	}
	c.spec = f.String()
	if !c.Seed.set {
		c.Seed.v = randomSeed()
	}
	return c.checkSpread()
}

// describe says what the filters are, for the line printed at start.
func (c *CaptureConfig) describe() string {
	s := fmt.Sprintf("filter %s, %d workers", c.spec, c.Workers)
	if !c.Prefix.IsZero() {
		s += fmt.Sprintf(", keys by network (IPv4 /%d, IPv6 /%d)", c.Prefix.Bits(false), c.Prefix.Bits(true))
	}
	if c.Window > 0 {
		s += fmt.Sprintf(", window %v, lateness %v (%d windows open)", c.Window, c.Lateness, c.open)
	}
	if per, bounded, err := filters.Footprint(c.spec); err == nil && bounded {
		s += ", up to " + units.Approx(uint64(per)*uint64(c.Workers)*uint64(c.open)) + " of filters"
	}
	return s + c.describeSpread()
}

// session is one replay, run or collect: profiles started, outputs opened,
// pipeline built.
type session struct {
	cfg         *CaptureConfig
	pipe        *pipeline.Pipeline
	reporter    *report.Reporter
	closers     []io.Closer
	stderr      io.Writer
	live        bool
	name        string       // sessionMode.name
	stopProfile func() error // nil once stopped
}

// prefix begins the session's notices: "flowdedup replay: ", or
// "flowdedup: " for a session without a name.
func (s *session) prefix() string {
	if s.name == "" {
		return "flowdedup: "
	}
	return "flowdedup " + s.name + ": "
}

// sessionMode says how a session runs its pipeline and what the command
// adds to its reports.
type sessionMode struct {
	// name is the command (replay, run, collect), which begins the
	// notices of the session's outputs ("flowdedup replay: removed ...").
	name string
	// live: the source is live (run, collect); a full ring drops and
	// counts rather than waits, unless wait (collect, whose socket
	// buffers hold what comes meanwhile and count what they cannot).
	live, wait bool
	// wallClock closes windows by the wall clock (run); without it,
	// windows follow the packets' (records') times. idleWallClock closes
	// them by the wall clock on idle ticks only (collect:
	// pipeline.Config.IdleWallClock).
	wallClock, idleWallClock bool
	// observers names the records' observers (collect's exporters:
	// report.Config.Observers); annotate adds to each summary
	// (report.Config.Annotate); metrics are registered beside the
	// pipeline's.
	observers report.ObserverNames
	annotate  func(*record.Summary)
	metrics   []prometheus.Collector
}

// openSession starts the profiles cfg asks for, opens the outputs and
// builds the pipeline as mode says. The profiles run until the session is
// closed (session.run closes it).
func openSession(ctx context.Context, cfg *CaptureConfig, mode sessionMode, stdout, stderr io.Writer) (*session, error) {
	live := mode.live
	s := &session{cfg: cfg, stderr: stderr, live: live, name: mode.name}
	var err error
	if s.stopProfile, err = cfg.Profile.start(); err != nil {
		return nil, err
	}
	sinks, err := s.outputs(stdout, stderr, mode.observers)
	if err != nil {
		s.close()
		return nil, err
	}
	exports, err := s.openExports(cfg, live, stderr)
	if err != nil {
		s.close()
		return nil, err
	}
	var gauges *report.WindowGauges
	if cfg.Metrics != "" {
		// The window gauges are fed the summaries the summary file gets,
		// after it; the pipeline they read the open window's count of is
		// made below, before any scrape.
		gauges = report.NewWindowGauges(cfg.Key, func() pipeline.Stats { return s.pipe.Stats() })
		sinks = append(sinks, gauges)
	}
	s.reporter, err = report.New(report.Config{Format: cfg.Format, Kind: cfg.Key, Prefix: cfg.Prefix, Destinations: sinks, Totals: stderr, Filter: cfg.spec,
		Observer: cfg.Export.Observer, Exports: asExports(exports), DamagedFiles: cfg.damagedFiles, Observers: mode.observers, Annotate: mode.annotate,
		Spread: cfg.spread})
	if err != nil {
		closeQueues(exports)
		s.close()
		return nil, err
	}
	s.pipe, err = pipeline.New(pipeline.Config{
		Workers: cfg.Workers, Parsers: cfg.parsers, Filter: cfg.spec, Key: cfg.Key, Prefix: cfg.Prefix, Decap: cfg.Decap,
		Seed: cfg.Seed.v, FilterSeed: cfg.Seed.v,
		Window: cfg.Window, Lateness: cfg.Lateness, Live: live, Wait: mode.wait, WallClockWindows: mode.wallClock, IdleWallClock: mode.idleWallClock, Pin: cfg.Pin,
		SketchSeed: uint64(cfg.Export.SketchSeed), KeepSketch: cfg.Export.SummarySketch,
		NoEstimate: cfg.summary.pattern == nil && cfg.summary.path == "" && cfg.Metrics == "" && len(exports) == 0, // no summary written, exported or gauged: none reads the estimate
	}, s.reporter)
	if err != nil {
		closeQueues(exports)
		s.close()
		return nil, err
	}
	if cfg.Metrics != "" {
		reg := metricsRegistry(s.pipe.Stats, cfg.spec)
		registerExports(reg, cfg.spec, exports)
		prometheus.WrapRegistererWith(prometheus.Labels{"filter": cfg.spec}, reg).MustRegister(gauges)
		for _, m := range mode.metrics {
			prometheus.WrapRegistererWith(prometheus.Labels{"filter": cfg.spec}, reg).MustRegister(m)
		}
		addr, err := report.Serve(ctx, cfg.Metrics, reg)
		if err != nil {
			closeQueues(exports)
			s.close()
			return nil, err
		}
		fmt.Fprintf(stderr, "flowdedup: metrics on http://%s/metrics\n", addr)
	}
	return s, nil
}

// metricsRegistry gathers the pipeline's counters, each labelled with the
// filter in effect (filter="qht:mem=1MiB,buckets=4,fpbits=12"), so that
// dashboards tell runs of different filters apart, and the Go runtime's
// and the process's metrics.
func metricsRegistry(stats func() pipeline.Stats, filter string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	prometheus.WrapRegistererWith(prometheus.Labels{"filter": filter}, reg).MustRegister(report.NewCollector(stats))
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// close closes the outputs and stops the profiles.
func (s *session) close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c.Close())
	}
	if s.stopProfile != nil {
		errs = append(errs, s.stopProfile())
		s.stopProfile = nil
	}
	return errors.Join(errs...)
}

// run drives the pipeline over sources, with a progress line on a
// terminal, and closes the outputs. The pipeline closes the reporter.
// When an export destination lost records (exportLoss), a replay fails
// with that error; a live run (run, collect: daemons, which exit 0 when
// stopped by a signal) says it on stderr.
func (s *session) run(ctx context.Context, sources ...capture.Source) error {
	stopProgress := startProgress(s.stderr, s.pipe)
	err := s.pipe.Run(ctx, sources...)
	stopProgress()
	if cerr := s.close(); err == nil {
		err = cerr
	}
	if lerr := exportLoss(s.reporter.Totals(), &s.cfg.Export); lerr != nil {
		if !s.live {
			return errors.Join(err, lerr)
		}
		fmt.Fprintf(s.stderr, "%s%v\n", s.prefix(), lerr)
	}
	return err
}

// startProgress prints packets, rate and distinct keys once a second on
// stderr when it is a terminal, and returns the function that stops it.
func startProgress(w io.Writer, p *pipeline.Pipeline) func() {
	f, ok := w.(*os.File)
	if !ok {
		return func() {}
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		start := time.Now()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var lastPkts uint64
		last := start
		for {
			select {
			case <-done:
				fmt.Fprint(f, "\r\033[K")
				return
			case now := <-tick.C:
				st := p.Stats()
				rate := float64(st.Packets-lastPkts) / now.Sub(last).Seconds() / 1e6
				lastPkts, last = st.Packets, now
				fmt.Fprintf(f, "\r\033[Kpackets %d  %.2f Mpps  distinct %d  malformed %d  dropped %d  elapsed %s",
					st.Packets, rate, st.Distinct, st.Malformed, st.Dropped, now.Sub(start).Truncate(time.Second))
			}
		}
	}()
	return func() { close(done); <-stopped }
}

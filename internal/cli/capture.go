package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/flowdedup/flowdedup/capture"
	"github.com/flowdedup/flowdedup/filters"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/pipeline"
	"github.com/flowdedup/flowdedup/report"
)

// DefaultFilter is the filter replay and run use unless told otherwise:
// QHT with 4 buckets of 12-bit fingerprints (asymptotic FPR k/S =
// 4/4095 ≈ 0.1%), one core's L2 per shard. Not QQHTD: it inserts every
// packet, duplicates too, into a row's 4-slot FIFO, so on real traffic a
// heavy hitter sharing a row pushes the other keys out and they are
// reported again (seen on zipf.pcap.gz: 1-3 extra keys per window of ~300,
// where QHT matches the exact count). The papers' own benchmark setting
// (1 bucket, 3 bits) aims at a 25% FPR, not at reporting flows.
const DefaultFilter = "qht:mem=auto,buckets=4,fpbits=12"

// CaptureConfig holds the flags replay and run share (DESIGN.md section 5).
type CaptureConfig struct {
	Key     flow.KeyKind
	Filter  string
	Workers int
	Window  time.Duration
	Out     string
	Format  string
	Summary string
	Metrics string
	Seed    seedFlag
	Pin     bool
}

// BindFlags registers the shared flags on fs.
func (c *CaptureConfig) BindFlags(fs *flag.FlagSet) {
	c.Key = flow.KeySrc
	fs.TextVar(&c.Key, "key", flow.KeySrc, "flow `KIND`: src | dst | pair | 5tuple")
	fs.StringVar(&c.Filter, "filter", DefaultFilter, "duplicate filter `SPEC` of each worker's shard (see 'flowdedup filters'); mem= is per shard")
	fs.IntVar(&c.Workers, "workers", runtime.NumCPU(), "worker shards, each owning one filter; the default is the number of CPUs")
	fs.DurationVar(&c.Window, "window", 0, "landmark window, e.g. 1h: each key is reported at most once per window and filters are cleared at its end (0: one window for the whole run)")
	fs.StringVar(&c.Out, "out", "-", "distinct-flow records `PATH` (- = stdout)")
	fs.StringVar(&c.Format, "format", "jsonl", "record format: jsonl | csv | text")
	fs.StringVar(&c.Summary, "summary", "", "write one JSON summary per closed window to `PATH` (- = stderr)")
	fs.StringVar(&c.Metrics, "metrics", "", "serve Prometheus metrics on `ADDR`, e.g. 127.0.0.1:9100 (default off)")
	fs.Var(&c.Seed, "seed", "hash key `N` (default: random per run, so nobody can craft colliding keys; set it to reproduce a run)")
	fs.BoolVar(&c.Pin, "pin", false, "pin each worker and reader to its own CPU")
}

func (c *CaptureConfig) check() error {
	if !c.Key.IsValid() {
		return usagef("--key: want src, dst, pair or 5tuple")
	}
	if c.Workers < 1 {
		return usagef("--workers must be at least 1")
	}
	if c.Window < 0 {
		return usagef("--window must not be negative")
	}
	if !slices.Contains(report.Formats, c.Format) {
		return usagef("--format %q: want jsonl, csv or text", c.Format)
	}
	if _, err := filters.New(c.Filter, 0); err != nil {
		return usageError{fmt.Errorf("--filter: %w", err)}
	}
	if !c.Seed.set {
		c.Seed.v = randomSeed()
	}
	return nil
}

// session is one replay or run: outputs opened, pipeline built.
type session struct {
	cfg      *CaptureConfig
	pipe     *pipeline.Pipeline
	reporter *report.Reporter
	closers  []io.Closer
	stderr   io.Writer
}

// openSession opens the outputs and builds the pipeline. live selects the
// live backpressure policy (drop and count) and wall-clock windows.
func openSession(ctx context.Context, cfg *CaptureConfig, live bool, stdout, stderr io.Writer) (*session, error) {
	s := &session{cfg: cfg, stderr: stderr}
	out, err := s.create(cfg.Out, stdout)
	if err != nil {
		return nil, err
	}
	var summary io.Writer
	if cfg.Summary != "" {
		if summary, err = s.create(cfg.Summary, stderr); err != nil {
			s.close()
			return nil, err
		}
	}
	s.reporter, err = report.New(report.Config{Out: out, Format: cfg.Format, Kind: cfg.Key, Summary: summary, Totals: stderr})
	if err != nil {
		s.close()
		return nil, err
	}
	s.pipe, err = pipeline.New(pipeline.Config{
		Workers: cfg.Workers, Filter: cfg.Filter, Key: cfg.Key,
		Seed: cfg.Seed.v, FilterSeed: cfg.Seed.v,
		Window: cfg.Window, Live: live, WallClockWindows: live, Pin: cfg.Pin,
	}, s.reporter)
	if err != nil {
		s.close()
		return nil, err
	}
	if cfg.Metrics != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(report.NewCollector(s.pipe.Stats), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		addr, err := report.Serve(ctx, cfg.Metrics, reg)
		if err != nil {
			s.close()
			return nil, err
		}
		fmt.Fprintf(stderr, "flowdedup: metrics on http://%s/metrics\n", addr)
	}
	return s, nil
}

// create opens path for writing ("-" is std).
func (s *session) create(path string, std io.Writer) (io.Writer, error) {
	if path == "-" {
		return std, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, f)
	return f, nil
}

func (s *session) close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// run drives the pipeline over sources, with a progress line on a
// terminal, and closes the outputs. The pipeline closes the reporter.
func (s *session) run(ctx context.Context, sources ...capture.Source) error {
	stopProgress := startProgress(s.stderr, s.pipe)
	err := s.pipe.Run(ctx, sources...)
	stopProgress()
	if cerr := s.close(); err == nil {
		err = cerr
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

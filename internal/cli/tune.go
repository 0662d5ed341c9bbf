package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flowdedup/flowdedup/filters"
	"github.com/flowdedup/flowdedup/flow"
	"github.com/flowdedup/flowdedup/tune"
	"github.com/flowdedup/flowdedup/units"
)

// DefaultTuneSeed is tune's --seed unless given: a fixed one, unlike
// replay's random default, so that the same command gives the same ranking
// and the figures it prints can be checked with `replay --seed`. The seeds
// of a run are this one and those eval.RunSeed derives from it, printed
// with the results.
const DefaultTuneSeed = 1

// TuneConfig holds the flags of `flowdedup tune`.
type TuneConfig struct {
	Samples   []string
	Key       flow.KeyKind
	Prefix    flow.Mask
	Decap     flow.Decap
	Window    time.Duration
	Workers   int
	Mem       string
	Objective tune.Objective
	Plot      string
	Format    string
	Seed      uint64
	Seeds     int
	Budget    time.Duration
}

// newTuneConfig returns tune's defaults: those of replay where they
// overlap (key, workers), so that the sample is sharded as replay would.
func newTuneConfig() TuneConfig {
	return TuneConfig{
		Key:     flow.KeySrc,
		Workers: runtime.NumCPU(),
		Format:  "text",
		Seed:    DefaultTuneSeed,
		Seeds:   tune.DefaultSeeds,
		Budget:  tune.DefaultBudget,
	}
}

// BindFlags registers the tune flags on fs.
func (c *TuneConfig) BindFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&c.Samples, "sample", nil, "sample `FILE` (pcap, pcapng, gzip; repeatable; the files are read in order as one capture, as replay reads them), or a stream spec, a sample of its own: uniform:n=N,universe=U | zipf:n=N,universe=U,s=S | distinct:n=N | file:PATH | pcap:PATH[,key=KIND][,prefix=V4LEN[,V6LEN]][,decap=LIST]")
	fs.TextVar(&c.Key, "key", c.Key, "flow `KIND` of the captures: src | dst | pair | 5tuple (replay's --key)")
	fs.TextVar(&c.Prefix, "prefix", c.Prefix, prefixUsage+" (replay's --prefix)")
	fs.TextVar(&c.Decap, "decap", c.Decap, decapUsage+"; of the captures, as replay's --decap (a pcap: spec's decap= overrides it)")
	durationFlag(fs, &c.Window, "window", "landmark window `D` of packet time, as replay's --window (0: one window)")
	fs.IntVar(&c.Workers, "workers", c.Workers, fmt.Sprintf("worker shards the keys are dealt to, each with its own filter of --mem, as replay's --workers; the default is replay's, the number of CPUs (at most %d per CPU)", maxWorkersPerCPU))
	fs.StringVar(&c.Mem, "mem", c.Mem, "state of each shard's filter, as --filter's mem= takes it, e.g. 64KiB, 1MiB, auto (required)")
	fs.TextVar(&c.Objective, "objective", c.Objective, "what the ranking minimises, `OBJ`: min-errors (wrong records per key) | min-fnr:fpr<=X (FNR, FPR at most X on every seed) | min-fpr:fnr<=X; X a rate or a percentage, e.g. 'min-fnr:fpr<=1%'")
	fs.StringVar(&c.Plot, "plot", c.Plot, "draw FNR against FPR of every ranked filter to `PATH` (.svg or .png)")
	fs.StringVar(&c.Format, "format", c.Format, "output format: text (a ranked table and the pick) | json (everything)")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "first seed `N` (hash keys and filter randomness, as replay's --seed); the others are derived from it, and all are printed")
	fs.IntVar(&c.Seeds, "seeds", c.Seeds, "seeds each finalist runs with; their spread is the confidence statement")
	durationFlag(fs, &c.Budget, "budget", "time `D` the search may take; what it cannot finish is left out and counted")
}

const tuneLong = `Picks the duplicate filter, and its parameters, for your traffic, window and
memory per core: it replays the sample exactly as 'flowdedup replay' would shard it
(--workers shards of --mem each, the same windows and seeds), runs every filter
family over a grid of its parameters against the exact answer, and prints a ranked
table (FPR, FNR, errors, ns per key; mean ± sd over the seeds), the pick as a spec
ready for --filter, the errors 'replay --seed S' makes with it, and how sure the
pick is over the runner-up.

The grid is searched coarse to fine: every point on a thinned sample with one
seed, then the best of each family and replay's default filter on the whole
sample with every seed, in parallel over the CPUs, within --budget.

Runs are reproducible: --seed has a fixed default (1), and the seeds used are
printed. tune models replay without lateness (a packet older than the open
window is late): on captures whose time goes back, give replay --lateness 0 to
reproduce its figures exactly.`

const tuneExamples = `  flowdedup tune --sample testdata/pcaps/zipf.pcap.gz --key 5tuple --window 1m --mem 64KiB
  flowdedup tune --key src --window 1h --mem 1MiB --objective 'min-fnr:fpr<=0.1%' day1.pcap day2.pcap
  flowdedup tune --sample zipf:n=1000000,universe=1000000,s=1.1 --mem 64KiB --workers 1 --plot tune.svg
  flowdedup tune --sample capture.pcapng --mem 256KiB --format json > tune.json
  flowdedup tune --decap erspan --key src --window 1h --mem 1MiB mirror.pcap    # the hosts inside a mirror session
`

func tuneCommand() command {
	return command{
		use:     "tune --mem SIZE [--sample] FILE... [flags]",
		short:   "pick the filter and parameters for a sample of your traffic, window and memory",
		long:    tuneLong,
		example: tuneExamples,
		bind: func(cmd *cobra.Command) runFunc {
			cfg := newTuneConfig()
			cfg.BindFlags(cmd.Flags())
			complete(cmd, "key", "src", "dst", "pair", "5tuple")
			complete(cmd, "format", "text", "json")
			complete(cmd, "objective", "min-errors", "min-fnr:fpr<=", "min-fpr:fnr<=")
			return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				return runTune(ctx, &cfg, args, stdout, stderr)
			}
		},
	}
}

// check validates the flags that tune.Run would only refuse after reading
// the sample, and those it does not know (format, plot, memory budget).
func (c *TuneConfig) check(budget memoryBudget) error {
	if len(c.Samples) == 0 {
		return usagef("no sample given: --sample FILE, or FILE as an argument")
	}
	if c.Mem == "" {
		return usagef("--mem is required: the state of each shard's filter, e.g. --mem 64KiB")
	}
	bits, err := filters.ParseMem(c.Mem)
	if err != nil {
		return usagef("--mem %q: %v", c.Mem, err)
	}
	if !c.Key.IsValid() {
		return usagef("--key: want src, dst, pair or 5tuple")
	}
	if c.Workers < 1 {
		return usagef("--workers must be at least 1")
	}
	if n := maxWorkers(); c.Workers > n {
		return usagef("--workers %d: more than %d per CPU (%d here): replay would refuse it too", c.Workers, maxWorkersPerCPU, n)
	}
	if c.Window < 0 {
		return usagef("--window must not be negative")
	}
	if c.Seeds < 1 {
		return usagef("--seeds must be at least 1")
	}
	if c.Budget <= 0 {
		return usagef("--budget must be positive, e.g. 60s")
	}
	if c.Format != "text" && c.Format != "json" {
		return usagef("--format %q: want text or json", c.Format)
	}
	if c.Plot != "" {
		if ext := strings.ToLower(filepath.Ext(c.Plot)); ext != ".svg" && ext != ".png" {
			return usagef("--plot %q: want a .svg or .png path", c.Plot)
		}
	}
	// tune runs a filter of --mem per worker on each CPU at once.
	par := runtime.NumCPU()
	if limit, known := budget.limit(); known {
		if need := uint64(bits/8) * uint64(c.Workers) * uint64(par); need > limit {
			return usagef("--mem %s: tune runs %d filters at once (%d workers x %d CPUs), %s, more than the %s this machine can give (%s)",
				c.Mem, c.Workers*par, c.Workers, par, units.Approx(need), units.Approx(limit), budget)
		}
	}
	return nil
}

// runTune tunes on cfg.Samples and the sample files given as arguments.
func runTune(ctx context.Context, cfg *TuneConfig, args []string, stdout, stderr io.Writer) error {
	cfg.Samples = append(cfg.Samples, args...)
	if err := cfg.check(systemMemory()); err != nil {
		return err
	}
	decap := ""
	if cfg.Decap.Tunnels != 0 {
		decap = ", decap " + cfg.Decap.String()
	}
	fmt.Fprintf(stderr, "flowdedup tune: %s, key %s%s, window %v, %d workers, %s per shard, objective %s, seed %d (%d seeds), budget %v\n",
		strings.Join(cfg.Samples, " "), flow.KeySpec{Kind: cfg.Key, Mask: cfg.Prefix}, decap, cfg.Window, cfg.Workers, cfg.Mem, cfg.Objective, cfg.Seed, cfg.Seeds, cfg.Budget)
	res, err := tune.Run(ctx, tune.Config{
		Samples: cfg.Samples, Key: cfg.Key, Prefix: cfg.Prefix, Decap: cfg.Decap, Window: cfg.Window, Workers: cfg.Workers, Mem: cfg.Mem,
		Objective: cfg.Objective, Seeds: cfg.Seeds, Seed: cfg.Seed, Budget: cfg.Budget,
	})
	switch {
	case errors.Is(err, tune.ErrNoResult) && res != nil:
		// What did finish is worth seeing: the references, the search.
		if werr := writeTune(res, cfg.Format, stdout); werr != nil {
			return werr
		}
		return fmt.Errorf("no filter finished within --budget %v: give it more time, a shorter sample or fewer --seeds", cfg.Budget)
	case err != nil:
		for _, e := range []error{tune.ErrConfig, tune.ErrObjective, tune.ErrNoSample} {
			if errors.Is(err, e) {
				return usageError{err}
			}
		}
		if isSpecError(err) {
			return usageError{err}
		}
		return err
	}
	if err := writeTune(res, cfg.Format, stdout); err != nil {
		return err
	}
	if cfg.Plot != "" {
		if err := res.Plot(cfg.Plot); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "flowdedup tune: figure in %s\n", cfg.Plot)
	}
	return nil
}

func writeTune(res *tune.Result, format string, w io.Writer) error {
	if format == "json" {
		return res.WriteJSON(w)
	}
	return res.WriteText(w)
}

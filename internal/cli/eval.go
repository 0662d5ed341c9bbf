package cli

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flowdedup/flowdedup/eval"
	"github.com/flowdedup/flowdedup/filters"
	"github.com/flowdedup/flowdedup/flow"
)

// EvalConfig holds the flags of `flowdedup eval`.
type EvalConfig struct {
	Filters []string
	Stream  string
	Runs    int
	Warmup  int
	Seed    seedFlag
	Format  string
	Mems    string // comma-separated sizes to sweep every filter over
	Plot    string // figure path (.svg or .png); FPR goes to eval.FPRPath
	Decap   flow.Decap
}

// BindFlags registers the eval flags on fs.
func (c *EvalConfig) BindFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&c.Filters, "filter", nil, "filter `SPEC` to evaluate, name[:key=value,...], with the papers' defaults for the parameters it leaves out; repeat to compare several on the same stream (see 'flowdedup filters')")
	fs.StringVar(&c.Stream, "stream", "", "stream `SPEC`: distinct:n=N | uniform:n=N,universe=U | zipf:n=N,universe=U,s=S | file:PATH (one key per line) | pcap:PATH[,key=KIND][,prefix=V4LEN[,V6LEN]][,decap=LIST] (a capture keyed as replay keys it)")
	fs.TextVar(&c.Decap, "decap", c.Decap, decapUsage+"; of a pcap: stream, as replay's --decap (its decap= overrides it); other streams carry no packets")
	fs.IntVar(&c.Runs, "runs", c.Runs, "independent runs to average, each with its own seed derived from --seed")
	fs.IntVar(&c.Warmup, "warmup", 0, "leading elements observed but not counted (lets filters reach their stable state)")
	fs.Var(&c.Seed, "seed", "base `seed` for hashing and random streams (default: random, printed with the results)")
	fs.StringVar(&c.Format, "format", c.Format, "output format: text | json (one object per line) | csv")
	fs.StringVar(&c.Mems, "mem", "", "sweep every filter over memory `LIST`, comma-separated sizes (8KiB,16KiB,...,1MiB): each spec's mem= is replaced once per size; filters without mem (exact) run once")
	fs.StringVar(&c.Plot, "plot", "", "draw FNR against memory, one line per filter family, to `PATH` (.svg or .png), and FPR to PATH with -fpr before the extension")
}

const evalLong = `Runs each filter over the same stream of keys and counts its errors against the
exact answer: false positives (an unseen key answered "duplicate": FPR over the
distinct keys) and false negatives (a seen key answered "unseen": FNR over the
duplicates), with the time per element. Parameters a spec leaves out take the
papers' defaults, so that eval reproduces the papers (replay and run take the
product defaults instead: see 'flowdedup filters').`

const evalExamples = `  flowdedup eval --filter qht:mem=64KiB --filter sbf:mem=64KiB,fps=0.1 \
      --stream uniform:n=1000000,universe=1048576
  flowdedup eval --filter lru:mem=1MiB --stream zipf:n=1e6,universe=1e7,s=0.9 --runs 5 --format json
  flowdedup eval --filter exact --filter bloom:mem=8KiB,k=3 --stream file:keys.txt --seed 1
  flowdedup eval --filter qht --filter sbf --mem 8KiB,64KiB,512KiB \
      --stream uniform:n=1000000,universe=1048576 --seed 1 --plot fnr-vs-memory.svg
  flowdedup eval --filter qht:mem=64KiB --filter exact --stream pcap:mirror.pcap,key=src --decap erspan
`

func evalCommand() command {
	return command{
		use:     "eval --filter SPEC [--filter SPEC...] --stream SPEC [flags]",
		short:   "compare filters' error rates and speed on a synthetic or recorded stream",
		long:    evalLong,
		example: evalExamples,
		bind: func(cmd *cobra.Command) runFunc {
			cfg := EvalConfig{Runs: 1, Format: "text"}
			fs := cmd.Flags()
			cfg.BindFlags(fs)
			complete(cmd, "filter", filters.Names()...)
			complete(cmd, "format", eval.Formats...)
			noArgs(cmd)
			return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				return runEval(ctx, &cfg, fs.Changed("mem"), args, stdout, stderr)
			}
		},
	}
}

// runEval evaluates as cfg says; memSet tells whether --mem was given (an
// empty --mem is a mistake, not "no sweep").
func runEval(ctx context.Context, cfg *EvalConfig, memSet bool, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	if len(cfg.Filters) == 0 {
		return usagef("at least one --filter is required")
	}
	if cfg.Stream == "" {
		return usagef("--stream is required")
	}
	if !slices.Contains(eval.Formats, cfg.Format) {
		return usagef("--format %q: want one of text, json, csv", cfg.Format)
	}
	var mems []string
	if memSet {
		var err error
		if mems, err = eval.ParseMems(cfg.Mems); err != nil {
			return usagef("--mem: %v", err)
		}
		for _, spec := range cfg.Filters {
			if ok, err := eval.TakesMem(spec); err == nil && !ok {
				fmt.Fprintf(stderr, "flowdedup eval: note: %s has no mem=; evaluated once, not swept\n", spec)
			}
		}
	}
	if cfg.Plot != "" {
		if len(mems) == 0 {
			return usagef("--plot draws a memory sweep: give --mem too")
		}
		if ext := strings.ToLower(filepath.Ext(cfg.Plot)); ext != ".svg" && ext != ".png" {
			return usagef("--plot %q: want a .svg or .png path", cfg.Plot)
		}
	}
	if !cfg.Seed.set {
		cfg.Seed.v = randomSeed()
	}
	results, err := eval.Run(ctx, eval.Config{
		Filters: cfg.Filters, Mems: mems, Stream: cfg.Stream, Runs: cfg.Runs, Warmup: cfg.Warmup, Seed: cfg.Seed.v, Decap: cfg.Decap,
	})
	if err != nil {
		if isSpecError(err) {
			return usageError{err}
		}
		return err
	}
	if err := eval.Write(stdout, cfg.Format, results); err != nil {
		return err
	}
	if cfg.Plot != "" {
		return eval.Plot(results, cfg.Plot)
	}
	return nil
}

func isSpecError(err error) bool {
	for _, e := range []error{filters.ErrSyntax, filters.ErrUnknownFilter, filters.ErrUnknownParam,
		filters.ErrBadParam, filters.ErrTooSmall, eval.ErrStreamSpec} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// randomSeed draws a seed nobody can predict: hashes keyed with it resist
// crafted collisions (QHT paper, Sec. 7).
func randomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return binary.LittleEndian.Uint64(b[:])
}

package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/flowdedup/flowdedup/filters"
)

func filtersCommand() command {
	return command{
		use:   "filters",
		short: "list the filters and their parameters",
		long: `Lists the filter families a --filter or eval spec names, their papers and their
parameters with their defaults.`,
		example: "  flowdedup filters\n",
		bind: func(cmd *cobra.Command) runFunc {
			noArgs(cmd)
			return runFilters
		},
	}
}

func runFilters(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	fmt.Fprintln(stdout, `Filter specs: name[:key=value,...], e.g. qht:mem=64KiB,buckets=4,fpbits=8
mem takes bit, B, KiB, MiB, GiB suffixes (mem=65536bit == mem=8KiB) or auto (one CPU's L2 cache).

Defaults: replay and run give a parameter a spec leaves out the product default
(the first value listed), chosen to lose fewer keys: a false positive is a flow
never reported, a false negative a flow reported again. eval keeps the papers'
defaults (in parentheses where they differ), so that it reproduces the papers.`)
	for _, f := range filters.Families() {
		fmt.Fprintf(stdout, "\n%s — %s\n  %s\n", f.Name, f.About, f.Paper)
		if len(f.Params) == 0 {
			fmt.Fprintln(stdout, "  (no parameters)")
			continue
		}
		product := map[string]filters.Param{}
		for _, p := range filters.ProductDefaults(f.Name) {
			product[p.Name] = p
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, p := range f.Params {
			def := p.Default
			if def == "" {
				def = "-"
			}
			help := p.Help
			if pd, ok := product[p.Name]; ok {
				def = fmt.Sprintf("%s (papers: %s)", pd.Default, def)
				help += "; product default: " + pd.Help
			}
			fmt.Fprintf(tw, "  %s\tdefault %s\t%s\n", p.Name, def, help)
		}
		tw.Flush()
	}
	return nil
}

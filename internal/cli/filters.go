package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/flowdedup/flowdedup/filters"
)

func runFilters(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("filters", "", "  flowdedup filters\n", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	fmt.Fprintln(stdout, "Filter specs: name[:key=value,...], e.g. qht:mem=64KiB,buckets=4,fpbits=8")
	fmt.Fprintln(stdout, "mem takes bit, B, KiB, MiB, GiB suffixes (mem=65536bit == mem=8KiB) or auto (one CPU's L2 cache).")
	for _, f := range filters.Families() {
		fmt.Fprintf(stdout, "\n%s — %s\n  %s\n", f.Name, f.About, f.Paper)
		if len(f.Params) == 0 {
			fmt.Fprintln(stdout, "  (no parameters)")
			continue
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, p := range f.Params {
			def := p.Default
			if def == "" {
				def = "-"
			}
			fmt.Fprintf(tw, "  %s\tdefault %s\t%s\n", p.Name, def, p.Help)
		}
		tw.Flush()
	}
	return nil
}

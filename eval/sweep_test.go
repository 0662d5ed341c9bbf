package eval

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/flowdedup/flowdedup/filters"
)

func TestWithMem(t *testing.T) {
	for _, c := range []struct{ spec, mem, want string }{
		{"qht", "64KiB", "qht:mem=64KiB"},                          // added
		{"qht:mem=8KiB,fpbits=3", "1MiB", "qht:mem=1MiB,fpbits=3"}, // replaced
		{" SBF : p=5 , k=2 , mem=auto ", "16KiB", "sbf:mem=16KiB,k=2,p=5"},
		{"bloom:k=3", "524288bit", "bloom:mem=64KiB,k=3"}, // canonical unit
		{"bloom", "100bit", "bloom:mem=100bit"},
	} {
		got, err := WithMem(c.spec, c.mem)
		if err != nil || got != c.want {
			t.Errorf("WithMem(%q, %q) = %q, %v; want %q", c.spec, c.mem, got, err, c.want)
		}
		if _, err := filters.ParseSpec(got); err != nil {
			t.Errorf("WithMem(%q, %q) = %q does not parse back: %v", c.spec, c.mem, got, err)
		}
	}
	for _, c := range []struct{ spec, mem string }{
		{"qht", "8kb"}, {"qht", "-1KiB"}, {"qht", "0"}, {"qht", "lots"}, {"qht", "0.5bit"},
		{"lru:entries=100", "8KiB"},
	} {
		if _, err := WithMem(c.spec, c.mem); !errors.Is(err, filters.ErrBadParam) {
			t.Errorf("WithMem(%q, %q) error %v, want ErrBadParam", c.spec, c.mem, err)
		}
	}
	if _, err := WithMem("qht:mem", "8KiB"); !errors.Is(err, filters.ErrSyntax) {
		t.Errorf("WithMem of a malformed spec: %v, want ErrSyntax", err)
	}
}

func TestParseMems(t *testing.T) {
	got, err := ParseMems("8KiB, 16KiB,1MiB")
	if err != nil || !slices.Equal(got, []string{"8KiB", "16KiB", "1MiB"}) {
		t.Errorf("ParseMems = %q, %v", got, err)
	}
	for _, bad := range []string{"", "8KiB,", "8KiB,,16KiB", "8kb", "8KiB,x"} {
		if _, err := ParseMems(bad); err == nil {
			t.Errorf("ParseMems(%q) succeeded", bad)
		}
	}
}

func TestSweep(t *testing.T) {
	got, err := Sweep([]string{"qht:fpbits=3", "exact", "bloom:mem=1MiB"}, []string{"8KiB", "16KiB"})
	want := []string{"qht:mem=8KiB,fpbits=3", "qht:mem=16KiB,fpbits=3", "exact", "bloom:mem=8KiB", "bloom:mem=16KiB"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Sweep = %q, %v; want %q", got, err, want)
	}
	if _, err := Sweep([]string{"nosuch"}, []string{"8KiB"}); !errors.Is(err, filters.ErrUnknownFilter) {
		t.Errorf("Sweep of an unknown filter: %v, want ErrUnknownFilter", err)
	}
	if got, _ := Sweep([]string{"qht"}, nil); !slices.Equal(got, []string{"qht"}) {
		t.Errorf("Sweep with no mems = %q, want the specs unchanged", got)
	}
}

func TestRunSweep(t *testing.T) {
	mems := []string{"8KiB", "32KiB", "128KiB"}
	cfg := Config{
		Filters: []string{"qht", "bloom:k=2", "exact"}, Mems: mems,
		Stream: "uniform:n=20000,universe=30000", Runs: 2, Seed: 7,
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2*len(mems)+1 {
		t.Fatalf("%d results, want %d", len(res), 2*len(mems)+1)
	}
	for i, r := range res {
		// Every filter and size saw the same stream in every run.
		if r.Distinct != res[0].Distinct || r.Duplicates != res[0].Duplicates || r.Elements != res[0].Elements {
			t.Errorf("%s saw %v distinct, %v duplicates; %s saw %v, %v", r.Filter, r.Distinct, r.Duplicates,
				res[0].Filter, res[0].Distinct, res[0].Duplicates)
		}
		if i < 2*len(mems) {
			// Filters round their state down to whole cells, never up.
			want, _ := filters.ParseMem(mems[i%len(mems)])
			if !strings.Contains(r.Filter, "mem="+mems[i%len(mems)]) || r.MemoryBits > want || r.MemoryBits < want/2 {
				t.Errorf("%s: %d bits, want it swept to %s", r.Filter, r.MemoryBits, mems[i%len(mems)])
			}
		}
	}
	if res[len(res)-1].Filter != "exact" || res[len(res)-1].FNR != 0 {
		t.Errorf("last result %+v, want exact once with no errors", res[len(res)-1])
	}
	// More memory must not make a Bloom filter's false positives worse.
	if b := res[len(mems) : 2*len(mems)]; b[0].FPR < b[len(b)-1].FPR {
		t.Errorf("bloom FPR rose with memory: %v then %v", b[0].FPR, b[len(b)-1].FPR)
	}
	// A sweep equals the expanded filter list evaluated directly.
	specs, _ := Sweep(cfg.Filters, mems)
	direct, err := Run(context.Background(), Config{Filters: specs, Stream: cfg.Stream, Runs: 2, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	for i := range direct {
		if direct[i].Filter != res[i].Filter || direct[i].FNR != res[i].FNR || direct[i].FPR != res[i].FPR {
			t.Errorf("direct %+v differs from swept %+v", direct[i], res[i])
		}
	}
}

package tune

import (
	"errors"
	"testing"
)

// FuzzParseObjective: any input parses or fails with ErrObjective, never
// panics, and what parses prints back to itself.
func FuzzParseObjective(f *testing.F) {
	for _, s := range []string{"min-errors", "min-fnr:fpr<=0.01", "min-fpr:fnr<=5%", "MIN-FNR : fpr <= 1e-3", "min-fnr:fpr<=",
		"min-fpr:fnr<=1.0000001", "min-fnr:fpr<=-0", "min-fnr:fpr<=Inf", "min-fnr:fpr<=%", ":", "min-errors:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseObjective(s)
		if err != nil {
			if !errors.Is(err, ErrObjective) {
				t.Fatalf("ParseObjective(%q): %v does not wrap ErrObjective", s, err)
			}
			return
		}
		if o.Goal > MinFPR || o.Bound < 0 || o.Bound > 1 || (o.Goal == MinErrors && o.Bound != 0) {
			t.Fatalf("ParseObjective(%q) = %+v", s, o)
		}
		back, err := ParseObjective(o.String())
		if err != nil || back != o {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, o, o.String(), back, err)
		}
	})
}

package filters

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestWithProductDefaults(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"qht", "qht:buckets=4,fpbits=12"},
		{"qht:mem=64KiB", "qht:mem=64KiB,buckets=4,fpbits=12"},
		{" QHT:mem=64KiB ", "QHT:mem=64KiB,buckets=4,fpbits=12"},
		{"qhtd:mem=64KiB,buckets=2", "qhtd:mem=64KiB,buckets=2,fpbits=12"},
		{"qqhtd:fpbits=2", "qqhtd:fpbits=2,buckets=3"}, // at most 2^2-1 buckets
		{"cuckoo:fpbits=16", "cuckoo:fpbits=16,buckets=4"},
		{"qht:buckets=1,fpbits=3", "qht:buckets=1,fpbits=3"}, // the papers' setting, asked for
		{"sqf", "sqf:buckets=4,r=12,rprime=10"},
		{"isqf:tables=2", "isqf:tables=2,buckets=4,r=12,rprime=10"},
		{"sqf:r=4", "sqf:r=4,buckets=4,rprime=2"},
		{"sqf:rprime=1", "sqf:rprime=1,buckets=4,r=3"},
		{"sqf:r=2", "sqf:r=2,buckets=3,rprime=1"}, // S = 4 signatures: 3 buckets
		{"sbf", "sbf:fps=0.01"},
		{"sbf:p=5", "sbf:p=5"}, // p and fps exclude each other
		{"rsbf:mem=1MiB", "rsbf:mem=1MiB,fpr=0.01"},
		{"rsbf:k=2", "rsbf:k=2"}, // k and fpr exclude each other
		{"bloom", "bloom:k=4"},
		{"a2:mem=8KiB", "a2:mem=8KiB,fpr=0.01"},
		{"bsbf", "bsbf:k=4"},
		{"bsbfsd:k=1", "bsbfsd:k=1"},
		{"rlbsbf", "rlbsbf:k=4"},
		{"fpbuffer:entries=10", "fpbuffer:entries=10,q=0"},
		{"fpbuffer:q=0.1", "fpbuffer:q=0.1"},
		{"bdbf:mem=64KiB,window=6000", "bdbf:mem=64KiB,window=6000"},
		{"lru:mem=1MiB", "lru:mem=1MiB"},
		{"fpsbf", "fpsbf"},
		{"exact", "exact"},
	} {
		got, err := WithProductDefaults(c.spec)
		if err != nil || got != c.want {
			t.Errorf("WithProductDefaults(%q) = %q, %v; want %q", c.spec, got, err, c.want)
		}
	}
	for _, c := range []struct {
		spec string
		want error
	}{
		{"nosuch", ErrUnknownFilter},
		{"qht:bogus=1", ErrUnknownParam},
		{"qht:", ErrSyntax},
		{"", ErrSyntax},
	} {
		if _, err := WithProductDefaults(c.spec); !errors.Is(err, c.want) {
			t.Errorf("WithProductDefaults(%q): error %v, want %v", c.spec, err, c.want)
		}
	}
	// A bad value is New's to report, with the spec's own words.
	for _, spec := range []string{"qht:fpbits=x", "sqf:r=0", "bdbf:mem=lots"} {
		got, err := WithProductDefaults(spec)
		if err != nil {
			t.Fatalf("%q: %v", spec, err)
		}
		if _, err := New(got, 1); !errors.Is(err, ErrBadParam) {
			t.Errorf("New(%q): %v, want ErrBadParam", got, err)
		}
	}
}

// Every family's product spec builds, and the filter built takes the
// product's values (its canonical spec says so).
func TestProductDefaultsBuild(t *testing.T) {
	for _, fam := range Families() {
		for _, spec := range []string{fam.Name, fam.Name + ":mem=64KiB"} {
			if fam.Name == "exact" && spec != "exact" {
				continue
			}
			full, err := WithProductDefaults(spec)
			if err != nil {
				t.Fatalf("%q: %v", spec, err)
			}
			f, err := New(full, 1)
			if err != nil {
				t.Fatalf("New(%q): %v", full, err)
			}
			for _, p := range ProductDefaults(fam.Name) {
				if !fam.knows(p.Name) {
					t.Errorf("%s: product default for unknown parameter %q", fam.Name, p.Name)
				}
				if _, err := strconv.ParseFloat(p.Default, 64); err != nil {
					continue // a rule, not a value (bdbf's window)
				}
				want := p.Name + "=" + p.Default
				if w, ok := derived[fam.Name+" "+want]; ok {
					want = w
				}
				if !strings.Contains(f.String()+",", want+",") {
					t.Errorf("%s: %s does not carry %s", full, f, want)
				}
			}
		}
	}
}

// derived are the canonical forms of product defaults a filter turns into
// another parameter: SBF's P from Eq. 17 for FPS 0.01 and Max=1, K=2
// (P = 19), RSBF's k = round((1 + ln(0.01)/ln(1-1/e))/2) = round(5.52) = 6.
var derived = map[string]string{
	"sbf fps=0.01":  "p=19",
	"rsbf fpr=0.01": "k=6",
}

func mustProduct(t *testing.T, spec string) string {
	t.Helper()
	s, err := WithProductDefaults(spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// bdbf's product window is the largest with an FPR of at most 1% with W
// keys alive, by the Bloom formula (1-e^(-kW/m))^k on the k and m of the
// filter built: checked on the filter itself, not on the sizing code.
func TestBDBFProductWindow(t *testing.T) {
	fpr := func(f *BDBF) float64 {
		k, w, m := float64(f.K()), float64(f.Window()), float64(f.Counters())
		return math.Pow(1-math.Exp(-k*w/m), k)
	}
	for _, mem := range []string{"8KiB", "64KiB", "1MiB", "8MiB"} {
		spec := mustProduct(t, "bdbf:mem="+mem)
		f, err := New(spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		b := f.(*BDBF)
		if got := fpr(b); got > bdbfProductFPR {
			t.Errorf("%s: FPR %.4f with W keys alive, want <= %g", spec, got, bdbfProductFPR)
		}
		// A window 5% longer is past the target: the window is the largest,
		// to within the rounding of k.
		longer, _ := New("bdbf:mem="+mem+",window="+strconv.Itoa(b.Window()*105/100+1), 1)
		if got := fpr(longer.(*BDBF)); got <= bdbfProductFPR {
			t.Errorf("%s: a 5%% longer window still has FPR %.4f <= %g: the product window is not the largest", spec, got, bdbfProductFPR)
		}
		if b.Window() < 100 {
			t.Errorf("%s: window %d", spec, b.Window())
		}
	}
}

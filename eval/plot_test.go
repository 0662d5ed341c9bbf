package eval

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"image"
	_ "image/png" // image.Decode reads the PNG figure
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func sweepResults(t *testing.T) []Result {
	t.Helper()
	res, err := Run(context.Background(), Config{
		Filters: []string{"qht", "sbf", "sbf:blocked=1", "bloom:k=2", "lru"}, Mems: []string{"8KiB", "16KiB", "64KiB"},
		Stream: "uniform:n=5000,universe=8000", Runs: 1, Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestPlotSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fnr.svg")
	if err := Plot(sweepResults(t), path); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, FPRPath(path)} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			t.Fatalf("%s is empty", p)
		}
		dec := xml.NewDecoder(bytes.NewReader(b))
		root := ""
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s is not valid XML: %v", p, err)
			}
			if se, ok := tok.(xml.StartElement); ok && root == "" {
				root = se.Name.Local
			}
		}
		if root != "svg" {
			t.Errorf("%s: root element %q, want svg", p, root)
		}
		// The rate axis is in percent, as the text table.
		if !bytes.Contains(b, []byte(">FNR %<")) && !bytes.Contains(b, []byte(">FPR %<")) {
			t.Errorf("%s: no axis label FNR %% or FPR %%", p)
		}
		// sbf and its blocked layout share memory sizes: two lines.
		for _, name := range []string{"qht", "sbf", "sbf:blocked=1", "bloom", "lru"} {
			if !bytes.Contains(b, []byte(">"+name+"<")) {
				t.Errorf("%s: legend lacks %s", p, name)
			}
		}
	}
}

func TestPlotPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fnr.png")
	if err := Plot(sweepResults(t), path); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, FPRPath(path)} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		img, format, err := image.Decode(f)
		f.Close()
		if err != nil || format != "png" {
			t.Fatalf("%s: %v (format %q)", p, err, format)
		}
		if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
			t.Errorf("%s: %v, too small", p, b)
		}
	}
}

func TestPlotErrors(t *testing.T) {
	dir := t.TempDir()
	if err := Plot(nil, filepath.Join(dir, "x.svg")); !errors.Is(err, ErrNoResults) {
		t.Errorf("Plot(nil) = %v, want ErrNoResults", err)
	}
	res := sweepResults(t)
	if err := Plot(res, filepath.Join(dir, "x.pdf")); err == nil {
		t.Error("Plot to .pdf succeeded")
	}
	twice := append(res[:1:1], res[0]) // one family twice at one size
	if err := Plot(twice, filepath.Join(dir, "x.svg")); err == nil {
		t.Error("Plot of one family twice at one size succeeded")
	}
}

func TestFPRPath(t *testing.T) {
	for in, want := range map[string]string{
		"docs/fnr.svg": "docs/fnr-fpr.svg", "a.b/x.png": "a.b/x-fpr.png",
	} {
		if got := FPRPath(in); got != want {
			t.Errorf("FPRPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// The rate axis is labelled in percent: a step of 0.1 is "10", of 0.005
// "0.5".
func TestRateTicksInPercent(t *testing.T) {
	for _, c := range []struct {
		hi   float64
		want []string
	}{
		{0.9, []string{"0", "10", "20", "30", "40", "50", "60", "70", "80", "90"}},
		{0.05, []string{"0.0", "0.5", "1.0", "1.5", "2.0", "2.5", "3.0", "3.5", "4.0", "4.5", "5.0"}},
		{0.004, []string{"0.0", "0.1", "0.2", "0.3", "0.4"}},
	} {
		var got []string
		for _, tk := range rateTicks(c.hi) {
			got = append(got, tk.Label)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("rateTicks(%g) = %q, want %q", c.hi, got, c.want)
		}
	}
}

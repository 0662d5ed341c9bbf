package eval

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/flowdedup/flowdedup/filters"
)

// ErrNoResults is returned by Plot when there is nothing to draw.
var ErrNoResults = errors.New("eval: no results to plot")

// FPRPath is where Plot writes the FPR figure that goes with the FNR figure
// at path: "-fpr" before the extension.
func FPRPath(path string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-fpr" + ext
}

// Plot draws the papers' figure from a memory sweep: FNR against memory
// (log2 axis), one line per filter family, and one more for a family's
// blocked layout (filters.Spec.Variant), written to path, and FPR against
// memory written to FPRPath(path). The format follows the extension: .svg
// or .png. Results of one line must differ in memory; two at the same size
// (two settings of a family in one sweep) are an error rather than a
// zigzag line.
func Plot(results []Result, path string) error {
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if format != "svg" && format != "png" {
		return fmt.Errorf("eval: plot %q: want a .svg or .png file", path)
	}
	lines, err := plotLines(results)
	if err != nil {
		return err
	}
	caption := fmt.Sprintf("stream %s, runs %d, seed %d", results[0].Stream, results[0].Runs, results[0].Seed)
	if err := drawFigure(lines, "False negative rate (FNR) against memory", caption, "FNR %",
		func(r Result) float64 { return r.FNR }, path, format); err != nil {
		return err
	}
	return drawFigure(lines, "False positive rate (FPR) against memory", caption, "FPR %",
		func(r Result) float64 { return r.FPR }, FPRPath(path), format)
}

// plotLine is one family's (or blocked layout's) results, in the order
// given.
type plotLine struct {
	family  string
	results []Result
}

func plotLines(results []Result) ([]plotLine, error) {
	if len(results) == 0 {
		return nil, ErrNoResults
	}
	var lines []plotLine
	index := map[string]int{}
	for _, r := range results {
		sp, err := filters.ParseSpec(r.Filter)
		if err != nil {
			return nil, fmt.Errorf("eval: plot: %w", err)
		}
		if r.MemoryBits <= 0 {
			return nil, fmt.Errorf("eval: plot: %s has no memory size", r.Filter)
		}
		i, ok := index[sp.Variant()]
		if !ok {
			i = len(lines)
			index[sp.Variant()] = i
			lines = append(lines, plotLine{family: sp.Variant()})
		}
		for _, o := range lines[i].results {
			if o.MemoryBits == r.MemoryBits {
				return nil, fmt.Errorf("eval: plot: %s and %s use the same memory; plot one variant per family", o.Filter, r.Filter)
			}
		}
		lines[i].results = append(lines[i].results, r)
	}
	return lines, nil
}

// palette holds colours that stay apart on screen and paper; lines past
// its length reuse them dashed, and every line has its own marker shape.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
	{0xe3, 0x77, 0xc2, 0xff}, {0x17, 0xbe, 0xcf, 0xff}, {0xbc, 0xbd, 0x22, 0xff},
	{0x00, 0x00, 0x00, 0xff},
}

var glyphs = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{},
	draw.RingGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}, draw.PlusGlyph{},
}

const (
	figWidth    = 9 * vg.Inch
	figHeight   = 5.5 * vg.Inch
	legendWidth = 1.4 * vg.Inch
)

func drawFigure(lines []plotLine, title, caption, ylabel string, y func(Result) float64, path, format string) error {
	p := plot.New()
	p.Title.Text = title + "\n" + caption
	p.X.Label.Text = "memory (log2 scale)"
	p.Y.Label.Text = ylabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = pow2Ticks{}
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.ThumbnailWidth = 0.45 * vg.Inch
	for i, l := range lines {
		xys := make(plotter.XYs, len(l.results))
		for j, r := range l.results {
			xys[j] = plotter.XY{X: float64(r.MemoryBits) / (8 << 10), Y: y(r)}
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("eval: plot %s: %w", l.family, err)
		}
		c := palette[i%len(palette)]
		line.Color = c
		line.Width = vg.Points(1.2)
		if (i/len(palette))%2 == 1 {
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		points.Color = c
		points.Shape = glyphs[i%len(glyphs)]
		points.Radius = vg.Points(2.5)
		p.Add(line, points)
		legend.Add(l.family, line, points)
	}
	p.Y.Max = max(p.Y.Max*1.02, 0.05)
	p.Y.Tick.Marker = rateTicks(p.Y.Max)

	return SaveFigure(p, legend, path, format)
}

// rateTicks labels a rate axis from 0 to hi at a round step giving 5 to 10
// labels, so values can be read off without a ruler. The labels are in
// percent (0.05 is "5"), as eval's and tune's tables give rates.
func rateTicks(hi float64) plot.ConstantTicks {
	step := 0.1
	for _, s := range []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1} {
		if hi/s <= 10 {
			step = s
			break
		}
	}
	prec := max(int(math.Ceil(-math.Log10(step)-1e-9))-2, 0) // of the percentage
	var ticks plot.ConstantTicks
	for i := 0; float64(i)*step <= hi+step/1000; i++ {
		v := float64(i) * step
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(100*v, 'f', prec, 64)})
	}
	return ticks
}

// pow2Ticks marks every power of two on a memory axis in KiB, labelled in
// the unit ParseMem reads ("8KiB", "1MiB").
type pow2Ticks struct{}

func (pow2Ticks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log2(lo)); math.Exp2(e) <= hi*1.0001; e++ {
		v := math.Exp2(e)
		if v < lo*0.9999 {
			continue
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: kibLabel(v)})
	}
	if len(ticks) < 2 { // a narrow range: fall back to the ends
		ticks = []plot.Tick{{Value: lo, Label: kibLabel(lo)}, {Value: hi, Label: kibLabel(hi)}}
	}
	return ticks
}

func kibLabel(kib float64) string {
	bits := kib * (8 << 10)
	if bits == math.Trunc(bits) && bits >= 1 {
		return filters.FormatMem(int(bits))
	}
	return strconv.FormatFloat(kib, 'g', 3, 64) + "KiB"
}

package tune

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/flowdedup/flowdedup/eval"
)

// ErrPlot wraps the errors of Plot.
var ErrPlot = errors.New("tune: plot")

// Plot draws the trade-off the ranking chose from: FNR against FPR of
// every ranked filter, log-log, one marker shape and colour per family,
// the pick ringed, replay's default squared and the objective's bound as a
// line. A rate of 0 is drawn at half of one error (0.5/distinct keys for
// FPR, 0.5/duplicates for FNR; below half the bound when that is lower),
// the floor of the axes, so that filters that made no error stay on the
// figure. The axes are in percent, as the table's rates. The format
// follows the extension: .svg or .png.
func (r *Result) Plot(path string) error {
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if format != "svg" && format != "png" {
		return fmt.Errorf("%w: %q: want a .svg or .png file", ErrPlot, path)
	}
	best, _ := r.Best()
	if len(r.Ranked) == 0 || len(best.Seeds) == 0 {
		return fmt.Errorf("%w: nothing ranked", ErrPlot)
	}
	// The floors: half an error over the events of the first seed, and
	// below a bound, so that a filter that made no error is drawn on the
	// right side of it.
	fx := 0.5 / float64(max(best.Seeds[0].Distinct, 1))
	fy := 0.5 / float64(max(best.Seeds[0].Duplicates, 1))
	if o := r.Objective; o.Bound > 0 {
		if o.Goal == MinFNR {
			fx = min(fx, o.Bound/2)
		} else if o.Goal == MinFPR {
			fy = min(fy, o.Bound/2)
		}
	}
	fx, fy = 100*fx, 100*fy // in percent
	at := func(c Candidate) plotter.XY {
		return plotter.XY{X: max(100*c.FPR.Mean, fx), Y: max(100*c.FNR.Mean, fy)}
	}

	p := plot.New()
	p.Title.Text = fmt.Sprintf("FNR against FPR at %s per shard, %d workers, key %s, window %s\nobjective %s; mean over %d seeds; 0 is drawn at the axis floor",
		r.Mem, r.Workers, r.Key, r.Window, r.Objective, len(r.Seeds))
	p.X.Label.Text = "FPR % (false positives / distinct keys), log scale"
	p.Y.Label.Text = "FNR % (false negatives / duplicates), log scale"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true

	var families []string
	byFamily := map[string]plotter.XYs{}
	for _, c := range r.Ranked {
		if _, ok := byFamily[c.Family]; !ok {
			families = append(families, c.Family)
		}
		byFamily[c.Family] = append(byFamily[c.Family], at(c))
	}
	hiX, hiY := fx, fy
	for i, f := range families {
		s, err := plotter.NewScatter(byFamily[f])
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrPlot, f, err)
		}
		s.Color = palette[i%len(palette)]
		s.Shape = glyphs[i%len(glyphs)]
		s.Radius = vg.Points(3)
		p.Add(s)
		legend.Add(f, s)
		for _, xy := range byFamily[f] {
			hiX, hiY = max(hiX, xy.X), max(hiY, xy.Y)
		}
	}
	mark := func(c Candidate, g draw.GlyphDrawer, name string) error {
		s, err := plotter.NewScatter(plotter.XYs{at(c)})
		if err != nil {
			return err
		}
		s.Shape, s.Radius, s.Color = g, vg.Points(7), color.Black
		p.Add(s)
		legend.Add(name, s)
		return nil
	}
	if err := mark(best, draw.RingGlyph{}, "pick"); err != nil {
		return fmt.Errorf("%w: %w", ErrPlot, err)
	}
	if r.Default != nil {
		if err := mark(*r.Default, draw.SquareGlyph{}, "replay default"); err != nil {
			return fmt.Errorf("%w: %w", ErrPlot, err)
		}
	}
	// Round the ranges out to decades so the log ticks have labels.
	p.X.Min, p.X.Max = decadeBelow(fx), decadeAbove(max(hiX, 2*fx))
	p.Y.Min, p.Y.Max = decadeBelow(fy), decadeAbove(max(hiY, 2*fy))
	if o := r.Objective; o.bounded() && o.Bound > 0 {
		var pts plotter.XYs
		if o.Goal == MinFNR {
			pts = plotter.XYs{{X: 100 * o.Bound, Y: p.Y.Min}, {X: 100 * o.Bound, Y: p.Y.Max}}
		} else {
			pts = plotter.XYs{{X: p.X.Min, Y: 100 * o.Bound}, {X: p.X.Max, Y: 100 * o.Bound}}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrPlot, err)
		}
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		p.Add(l)
		legend.Add("bound", l)
	}

	if err := eval.SaveFigure(p, legend, path, format); err != nil {
		return fmt.Errorf("%w: %w", ErrPlot, err)
	}
	return nil
}

func decadeBelow(v float64) float64 { return math.Pow(10, math.Floor(math.Log10(v))) }
func decadeAbove(v float64) float64 { return math.Pow(10, math.Ceil(math.Log10(v))) }

// palette keeps colours apart on screen and paper; glyphs give each
// family its own shape too, for readers who cannot tell the colours apart.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
	{0xe3, 0x77, 0xc2, 0xff}, {0x17, 0xbe, 0xcf, 0xff}, {0xbc, 0xbd, 0x22, 0xff},
}

var glyphs = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{},
	draw.PyramidGlyph{}, draw.PlusGlyph{},
}

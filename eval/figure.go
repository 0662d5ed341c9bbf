package eval

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// SaveFigure draws p on a white page the size of eval's figures, with
// legend in a column of its own right of the chart, so that it never
// covers a line or a point however the values fall, and writes it to path
// in format, "svg" or "png". Package tune draws its figure with it too.
func SaveFigure(p *plot.Plot, legend plot.Legend, path, format string) error {
	cw, err := draw.NewFormattedCanvas(figWidth, figHeight, format)
	if err != nil {
		return fmt.Errorf("eval: plot: %w", err)
	}
	dc := draw.New(cw)
	dc.FillPolygon(color.White, []vg.Point{{X: 0, Y: 0}, {X: figWidth, Y: 0}, {X: figWidth, Y: figHeight}, {X: 0, Y: figHeight}})
	// The column is legendWidth, or wider when a name needs it
	// ("bloom:blocked=1").
	pad := vg.Points(8)
	lw := max(legendWidth, legend.Rectangle(dc).Size().X+2*pad)
	p.Draw(draw.Crop(dc, 0, -lw, 0, 0))
	legend.YOffs = -0.6 * vg.Inch
	legend.Draw(draw.Crop(dc, figWidth-lw+pad, 0, 0, 0))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("eval: plot: %w", err)
	}
	if _, err := cw.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("eval: plot %s: %w", path, err)
	}
	return f.Close()
}

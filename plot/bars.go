package plot

import (
	"fmt"
	"io"
	"strconv"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ModelBars writes a horizontal bar chart of the top models to path: one
// row per label (the first label at the top), one bar per series in each
// row, e.g. the learned posterior probability beside the exact one. Each
// series must have exactly one value per label; values must be finite and
// non-negative. The default size is 800 × (120 + 28·rows·series) pixels.
func ModelBars(path string, labels []string, series []Series, o Options) error {
	return saveAtomic(path, func(w io.Writer) error { return WriteModelBars(w, labels, series, o) })
}

// WriteModelBars is ModelBars writing the PNG to w.
func WriteModelBars(w io.Writer, labels []string, series []Series, o Options) error {
	return guard("model bars", func() error { return writeModelBars(w, labels, series, o) })
}

// maxBarValues is the largest number of bars that are labelled with their
// values.
const maxBarValues = 40

// barValues labels the bars of one series with their values, just right
// of each bar's end; dy is the bar centre's offset from its row centre.
func barValues(vs []float64, k int, dy float64, sty text.Style) (*plotter.Labels, error) {
	xys := make(plotter.XYs, len(vs))
	strs := make([]string, len(vs))
	for i, v := range vs {
		xys[i] = plotter.XY{X: v, Y: float64(k-1-i) + dy}
		strs[i] = strconv.FormatFloat(v, 'g', 2, 64)
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: strs})
	if err != nil {
		return nil, err
	}
	sty.Font.Size = vg.Points(8)
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
	for i := range l.TextStyle {
		l.TextStyle[i] = sty
	}
	l.Offset = vg.Point{X: vg.Points(3)}
	return l, nil
}

func writeModelBars(w io.Writer, labels []string, series []Series, o Options) error {
	if len(labels) == 0 || len(series) == 0 {
		return errNoData
	}
	for _, s := range series {
		if len(s.Values) != len(labels) {
			return fmt.Errorf("series %q has %d values for %d labels", s.Name, len(s.Values), len(labels))
		}
		for i, v := range s.Values {
			if !finite(v) || v < 0 {
				return fmt.Errorf("series %q: value %d is %v, want finite and ≥ 0", s.Name, i, v)
			}
		}
	}
	k, ns := len(labels), len(series)
	defH := 120 + 28*k*ns
	if defH < 240 {
		defH = 240
	}
	if defH > 2400 {
		defH = 2400
	}
	wd, ht, err := o.size(800, defH)
	if err != nil {
		return err
	}
	xl := o.XLabel
	if xl == "" {
		xl = "posterior probability"
	}
	p := newPlot(o.Title, xl, o.YLabel)
	p.Add(plotter.NewGrid())
	// Row i (label i) is centred at y = k-1-i so that the first label is on
	// top; the series of a row share a band of height 0.8.
	const band = 0.8
	h := band / float64(ns)
	var values []*plotter.Labels
	for si, s := range series {
		var poly *plotter.Polygon
		var rings []plotter.XYer
		for i, v := range s.Values {
			y0 := float64(k-1-i) + band/2 - float64(si+1)*h
			rings = append(rings, plotter.XYs{{X: 0, Y: y0}, {X: v, Y: y0}, {X: v, Y: y0 + h}, {X: 0, Y: y0 + h}})
		}
		poly, err = plotter.NewPolygon(rings...)
		if err != nil {
			return err
		}
		poly.Color = seriesColor(si)
		poly.LineStyle.Width = 0
		p.Add(poly)
		if ns > 1 || s.Name != "" {
			p.Legend.Add(s.Name, poly)
		}
		if k*ns <= maxBarValues {
			l, err := barValues(s.Values, k, band/2-(float64(si)+0.5)*h, p.Y.Tick.Label)
			if err != nil {
				return err
			}
			values = append(values, l)
		}
	}
	for _, l := range values {
		p.Add(l)
	}
	names := make([]string, k)
	for i, l := range labels {
		names[k-1-i] = l
	}
	p.NominalY(names...)
	p.Y.Tick.Label.Font.Size = vg.Points(9)
	p.Y.Min, p.Y.Max = -0.5, float64(k)-0.5
	p.X.Min = 0
	if p.X.Max <= 0 {
		p.X.Max = 1
	}
	p.X.Max *= 1.02
	if len(values) > 0 {
		p.X.Max *= 1.06 // room for the value labels
	}
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.YOffs = vg.Points(4)
	return encode(w, wd, ht, func(c draw.Canvas) error {
		p.Draw(c)
		return nil
	})
}

package plot

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	gplot "gonum.org/v1/plot"
)

// PairOptions configures PairPlot.
type PairOptions struct {
	Options
	// Truth, if given, holds one value per parameter (the generating
	// parameters), marked by lines across every panel of that parameter.
	// NaN entries are not marked.
	Truth []float64
	// Bins is the number of histogram bins on the diagonal (default 30).
	Bins int
	// MaxPoints bounds the number of samples drawn in each scatter panel
	// (default 3000); larger sample sets are thinned with a fixed stride.
	// Histograms always use every sample.
	MaxPoints int
}

// maxPairDims is the largest number of parameters PairPlot accepts; beyond
// it the panels become too small to read.
const maxPairDims = 12

// PairPlot writes a pair plot of posterior samples: samples[i] is one draw
// of the len(names) parameters. The diagonal shows marginal histograms, the
// panels below it 2-D scatter plots with transparency. Samples with a
// non-finite coordinate are left out. The default size is 160 pixels per
// parameter plus margins (at least 500×500).
func PairPlot(path string, names []string, samples [][]float64, o PairOptions) error {
	return saveAtomic(path, func(w io.Writer) error { return WritePairPlot(w, names, samples, o) })
}

// WritePairPlot is PairPlot writing the PNG to w.
func WritePairPlot(w io.Writer, names []string, samples [][]float64, o PairOptions) error {
	return guard("pair plot", func() error { return writePairPlot(w, names, samples, o) })
}

func writePairPlot(w io.Writer, names []string, samples [][]float64, o PairOptions) error {
	d := len(names)
	if d == 0 || len(samples) == 0 {
		return errNoData
	}
	if d > maxPairDims {
		return fmt.Errorf("%d parameters, at most %d supported", d, maxPairDims)
	}
	if len(o.Truth) != 0 && len(o.Truth) != d {
		return fmt.Errorf("%d truth values for %d parameters", len(o.Truth), d)
	}
	bins, maxPts := o.Bins, o.MaxPoints
	if bins == 0 {
		bins = 30
	}
	if maxPts == 0 {
		maxPts = 3000
	}
	if bins < 1 || bins > 1000 || maxPts < 1 {
		return fmt.Errorf("bins %d and max points %d must be positive (bins ≤ 1000)", bins, maxPts)
	}
	var rows [][]float64
	for i, s := range samples {
		if len(s) != d {
			return fmt.Errorf("sample %d has %d values for %d parameters", i, len(s), d)
		}
		ok := true
		for _, v := range s {
			ok = ok && finite(v)
		}
		if ok {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("no sample with all %d values finite", d)
	}
	lo, hi := make([]float64, d), make([]float64, d)
	for k := range d {
		lo[k], hi[k] = math.Inf(1), math.Inf(-1)
		for _, r := range rows {
			lo[k], hi[k] = math.Min(lo[k], r[k]), math.Max(hi[k], r[k])
		}
		if len(o.Truth) == d && finite(o.Truth[k]) {
			lo[k], hi[k] = math.Min(lo[k], o.Truth[k]), math.Max(hi[k], o.Truth[k])
		}
		pad := 0.04 * (hi[k] - lo[k])
		if pad == 0 {
			pad = 0.5 * math.Max(1e-9, math.Abs(lo[k]))
		}
		lo[k], hi[k] = lo[k]-pad, hi[k]+pad
		if !finite(hi[k] - lo[k]) {
			return fmt.Errorf("parameter %q: range [%v, %v] too wide", names[k], lo[k], hi[k])
		}
	}
	stride := (len(rows) + maxPts - 1) / maxPts
	alpha := uint8(0x90)
	if m := len(rows) / stride; m > 300 {
		alpha = uint8(math.Max(0x18, 0x90*math.Sqrt(300/float64(m))))
	}
	truthColor := seriesColor(3)
	plots := make([][]*gplot.Plot, d)
	for j := range d {
		plots[j] = make([]*gplot.Plot, d)
		for i := 0; i <= j; i++ {
			var xl, yl string
			if j == d-1 {
				xl = names[i]
			}
			if i == 0 && j > 0 {
				yl = names[j]
			}
			p := newPlot("", xl, yl)
			p.X.Tick.Label.Font.Size = vg.Points(7)
			p.Y.Tick.Label.Font.Size = vg.Points(7)
			p.X.Label.TextStyle.Font.Size = vg.Points(10)
			p.Y.Label.TextStyle.Font.Size = vg.Points(10)
			if j != d-1 {
				p.X.Tick.Marker = unlabelled{}
			}
			if i != 0 || j == 0 {
				p.Y.Tick.Marker = unlabelled{}
			}
			if i == j {
				h := marginal(rows, i, lo[i], hi[i], bins)
				p.Add(h)
				p.Y.Min = 0
			} else {
				xy := make(plotter.XYs, 0, len(rows)/stride+1)
				for r := 0; r < len(rows); r += stride {
					xy = append(xy, plotter.XY{X: rows[r][i], Y: rows[r][j]})
				}
				s, err := plotter.NewScatter(xy)
				if err != nil {
					return err
				}
				s.GlyphStyle.Shape = draw.CircleGlyph{}
				s.GlyphStyle.Radius = vg.Points(1.3)
				s.GlyphStyle.Color = withAlpha(seriesColor(0), alpha)
				p.Add(s)
				p.Y.Min, p.Y.Max = lo[j], hi[j]
			}
			if len(o.Truth) == d {
				if finite(o.Truth[i]) {
					p.Add(truthLine{x: o.Truth[i], c: truthColor})
				}
				if i != j && finite(o.Truth[j]) {
					p.Add(truthLine{x: o.Truth[j], c: truthColor, horizontal: true})
				}
			}
			p.X.Min, p.X.Max = lo[i], hi[i]
			plots[j][i] = p
		}
	}
	side := max(500, 160*d+80)
	wd, ht, err := o.size(side, side)
	if err != nil {
		return err
	}
	return encode(w, wd, ht, func(c draw.Canvas) error {
		c = titled(c, o.Title)
		tiles := draw.Tiles{Rows: d, Cols: d, PadX: vg.Points(4), PadY: vg.Points(4),
			PadTop: vg.Points(4), PadRight: vg.Points(8), PadLeft: vg.Points(2), PadBottom: vg.Points(2)}
		cs := gplot.Align(plots, tiles, c)
		for j := range plots {
			for i, p := range plots[j] {
				if p != nil {
					p.Draw(cs[j][i])
				}
			}
		}
		if len(o.Truth) == d {
			drawTruthKey(cs[0][d-1], truthColor)
		}
		return nil
	})
}

// marginal returns the histogram of column k of rows over [lo, hi].
func marginal(rows [][]float64, k int, lo, hi float64, bins int) *plotter.Histogram {
	width := (hi - lo) / float64(bins)
	hb := make([]plotter.HistogramBin, bins)
	for b := range hb {
		hb[b].Min, hb[b].Max = lo+float64(b)*width, lo+float64(b+1)*width
	}
	for _, r := range rows {
		b := min(max(int((r[k]-lo)/width), 0), bins-1)
		hb[b].Weight++
	}
	c := seriesColor(0)
	h := &plotter.Histogram{Bins: hb, Width: width, FillColor: withAlpha(c, 0x80)}
	h.LineStyle.Color = c
	h.LineStyle.Width = vg.Points(0.6)
	return h
}

// truthLine is a plotter drawing a line across the whole data area at
// x = x (or y = x if horizontal), marking a true parameter value.
type truthLine struct {
	x          float64
	c          color.Color
	horizontal bool
}

// Plot implements plot.Plotter.
func (l truthLine) Plot(c draw.Canvas, p *gplot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := draw.LineStyle{Color: l.c, Width: vg.Points(1)}
	if l.horizontal {
		y := trY(l.x)
		c.StrokeLine2(sty, c.Min.X, y, c.Max.X, y)
		return
	}
	x := trX(l.x)
	c.StrokeLine2(sty, x, c.Min.Y, x, c.Max.Y)
}

// drawTruthKey writes a small key for the truth markers into the empty
// upper-right corner of the pair plot.
func drawTruthKey(c draw.Canvas, col color.Color) {
	l := gplot.NewLegend()
	l.TextStyle.Font.Size = vg.Points(9)
	l.Top = true
	line, err := plotter.NewLine(plotter.XYs{{}})
	if err != nil {
		return
	}
	line.Color, line.Width = col, vg.Points(1)
	l.Add("true value", line)
	l.Draw(c)
}

// unlabelled places the default ticks without labels, for inner panels.
type unlabelled struct{}

// Ticks implements plot.Ticker.
func (unlabelled) Ticks(min, max float64) []gplot.Tick {
	ts := gplot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		ts[i].Label = ""
	}
	return ts
}

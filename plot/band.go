package plot

import (
	"fmt"
	"io"
	"sort"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Points are observed data: Y[i] measured at X[i].
type Points struct {
	X, Y []float64
}

// Band is a posterior predictive summary along x: the mean (or median) and
// a credible band [Lo, Hi], e.g. the central 95 % interval. Points where any
// of X, Mean, Lo, Hi is not finite are left out.
type Band struct {
	Name            string
	X, Mean, Lo, Hi []float64
}

// PredictiveBand writes the observed points with one or more posterior
// predictive bands (e.g. local and global) drawn as a shaded interval and a
// mean line. obs may be empty if at least one band is given. The default
// size is 800×500 pixels.
func PredictiveBand(path string, obs Points, bands []Band, o Options) error {
	return saveAtomic(path, func(w io.Writer) error { return WritePredictiveBand(w, obs, bands, o) })
}

// WritePredictiveBand is PredictiveBand writing the PNG to w.
func WritePredictiveBand(w io.Writer, obs Points, bands []Band, o Options) error {
	return guard("predictive band", func() error { return writePredictiveBand(w, obs, bands, o) })
}

func writePredictiveBand(w io.Writer, obs Points, bands []Band, o Options) error {
	if len(obs.X) != len(obs.Y) {
		return fmt.Errorf("observations: %d x values but %d y values", len(obs.X), len(obs.Y))
	}
	var pts plotter.XYs
	for i := range obs.X {
		if finite(obs.X[i]) && finite(obs.Y[i]) {
			pts = append(pts, plotter.XY{X: obs.X[i], Y: obs.Y[i]})
		}
	}
	if len(obs.X) > 0 && len(pts) == 0 {
		return fmt.Errorf("observations: no finite point")
	}
	if len(pts) == 0 && len(bands) == 0 {
		return errNoData
	}
	wd, ht, err := o.size(800, 500)
	if err != nil {
		return err
	}
	p := newPlot(o.Title, o.XLabel, o.YLabel)
	p.Add(plotter.NewGrid())
	type row struct{ x, m, lo, hi float64 }
	var lines []*plotter.Line
	for bi, b := range bands {
		n := len(b.X)
		if len(b.Mean) != n || len(b.Lo) != n || len(b.Hi) != n {
			return fmt.Errorf("band %q: lengths X %d, Mean %d, Lo %d, Hi %d differ", b.Name, n, len(b.Mean), len(b.Lo), len(b.Hi))
		}
		var rows []row
		for i := 0; i < n; i++ {
			r := row{b.X[i], b.Mean[i], b.Lo[i], b.Hi[i]}
			if finite(r.x) && finite(r.m) && finite(r.lo) && finite(r.hi) {
				rows = append(rows, r)
			}
		}
		if len(rows) < 2 {
			return fmt.Errorf("band %q: fewer than 2 finite points", b.Name)
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].x < rows[j].x })
		ring := make(plotter.XYs, 0, 2*len(rows))
		mean := make(plotter.XYs, len(rows))
		for i, r := range rows {
			ring = append(ring, plotter.XY{X: r.x, Y: r.hi})
			mean[i] = plotter.XY{X: r.x, Y: r.m}
		}
		for i := len(rows) - 1; i >= 0; i-- {
			ring = append(ring, plotter.XY{X: rows[i].x, Y: rows[i].lo})
		}
		poly, err := plotter.NewPolygon(ring)
		if err != nil {
			return err
		}
		c := seriesColor(bi)
		poly.Color = withAlpha(c, 0x55)
		poly.LineStyle.Width = 0
		p.Add(poly)
		l, err := plotter.NewLine(mean)
		if err != nil {
			return err
		}
		l.Color = c
		l.Width = vg.Points(1.8)
		lines = append(lines, l)
		if b.Name != "" {
			p.Legend.Add(b.Name, poly, l)
		}
	}
	for _, l := range lines {
		p.Add(l)
	}
	if len(pts) > 0 {
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		s.GlyphStyle.Shape = draw.CircleGlyph{}
		s.GlyphStyle.Radius = vg.Points(2)
		s.GlyphStyle.Color = withAlpha(palette[7], 0xcc)
		p.Add(s)
		p.Legend.Add("observed", s)
	}
	p.Legend.Left = true
	return encode(w, wd, ht, drawPlot(p))
}

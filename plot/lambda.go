package plot

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	gplot "gonum.org/v1/plot"
)

// Sweep summarises a model posterior over a grid of the complexity
// hyperparameter λ (paper Fig. 2 right and Fig. 3a).
type Sweep struct {
	// Lambda is the grid, in increasing order.
	Lambda []float64
	// Center is a summary of the number of active components at each λ,
	// e.g. the posterior median; Lo and Hi, if given, bound a band such as
	// the central 90 % interval. CenterName names it in the legend
	// (default "median").
	Center, Lo, Hi []float64
	CenterName     string
	// Models, if given, holds the posterior probability of each of the top
	// models at each λ (one Series per model, named by its components);
	// they are drawn as stacked areas in a second panel, with the remaining
	// mass shown as "other".
	Models []Series
}

// LambdaSweep writes the λ-sweep figure: the number of active components
// against λ with its band and, when s.Models is given, a second panel with
// the stacked posterior probabilities of the top models against λ. At least
// one of s.Center and s.Models is required. o.XLabel defaults to "λ" and
// o.YLabel (of the first panel) to "active components". The default size is
// 700×500 pixels with one panel and 1300×500 with two.
func LambdaSweep(path string, s Sweep, o Options) error {
	return saveAtomic(path, func(w io.Writer) error { return WriteLambdaSweep(w, s, o) })
}

// WriteLambdaSweep is LambdaSweep writing the PNG to w.
func WriteLambdaSweep(w io.Writer, s Sweep, o Options) error {
	return guard("lambda sweep", func() error { return writeLambdaSweep(w, s, o) })
}

func writeLambdaSweep(w io.Writer, s Sweep, o Options) error {
	n := len(s.Lambda)
	if n < 2 {
		return fmt.Errorf("need at least 2 λ values, have %d", n)
	}
	for i, l := range s.Lambda {
		if !finite(l) || (i > 0 && l <= s.Lambda[i-1]) {
			return fmt.Errorf("λ grid must be finite and strictly increasing (index %d: %v)", i, l)
		}
	}
	if len(s.Center) == 0 && len(s.Models) == 0 {
		return errNoData
	}
	xl := o.XLabel
	if xl == "" {
		xl = "λ"
	}
	var panels []*gplot.Plot
	var key *sideKey
	if len(s.Center) > 0 {
		p, err := sweepComponents(s, xl, o.YLabel)
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}
	if len(s.Models) > 0 {
		p, l, err := sweepModels(s, xl)
		if err != nil {
			return err
		}
		panels = append(panels, p)
		key = l
	}
	defW := 700
	if len(panels) == 2 {
		defW = 1300
	}
	wd, ht, err := o.size(defW, 500)
	if err != nil {
		return err
	}
	return encode(w, wd, ht, func(c draw.Canvas) error {
		c = titled(c, o.Title)
		tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Points(18), PadTop: vg.Points(2), PadRight: vg.Points(4)}
		for i, p := range panels {
			t := tiles.At(c, i, 0)
			if key != nil && i == len(panels)-1 {
				// The key of the stacked areas goes to the right of the
				// panel, where it cannot hide the areas.
				k := t
				t.Max.X -= key.width
				k.Min.X = t.Max.X
				k.Max.Y -= vg.Points(8)
				l := key.legend(k)
				l.Draw(k)
			}
			p.Draw(t)
		}
		return nil
	})
}

// sweepComponents draws the number of active components against λ.
func sweepComponents(s Sweep, xl, yl string) (*gplot.Plot, error) {
	n := len(s.Lambda)
	if len(s.Center) != n {
		return nil, fmt.Errorf("Center has %d values for %d λ values", len(s.Center), n)
	}
	hasBand := len(s.Lo) > 0 || len(s.Hi) > 0
	if hasBand && (len(s.Lo) != n || len(s.Hi) != n) {
		return nil, fmt.Errorf("band has %d/%d values for %d λ values", len(s.Lo), len(s.Hi), n)
	}
	if yl == "" {
		yl = "active components"
	}
	p := newPlot("", xl, yl)
	p.Add(plotter.NewGrid())
	c := seriesColor(0)
	if hasBand {
		var up, down plotter.XYs
		for i := range s.Lambda {
			if finite(s.Lo[i]) && finite(s.Hi[i]) {
				up = append(up, plotter.XY{X: s.Lambda[i], Y: s.Hi[i]})
				down = append(down, plotter.XY{X: s.Lambda[i], Y: s.Lo[i]})
			}
		}
		if len(up) < 2 {
			return nil, fmt.Errorf("band has fewer than 2 finite points")
		}
		for i := len(down) - 1; i >= 0; i-- {
			up = append(up, down[i])
		}
		poly, err := plotter.NewPolygon(up)
		if err != nil {
			return nil, err
		}
		poly.Color = withAlpha(c, 0x50)
		poly.LineStyle.Width = 0
		p.Add(poly)
		p.Legend.Add("band", poly)
	}
	var line plotter.XYs
	for i, l := range s.Lambda {
		if finite(s.Center[i]) {
			line = append(line, plotter.XY{X: l, Y: s.Center[i]})
		}
	}
	if len(line) < 2 {
		return nil, fmt.Errorf("Center has fewer than 2 finite values")
	}
	l, s2, err := plotter.NewLinePoints(line)
	if err != nil {
		return nil, err
	}
	l.Color, l.Width = c, vg.Points(1.8)
	s2.GlyphStyle.Color, s2.GlyphStyle.Shape, s2.GlyphStyle.Radius = c, draw.CircleGlyph{}, vg.Points(2.2)
	p.Add(l, s2)
	name := s.CenterName
	if name == "" {
		name = "median"
	}
	p.Legend.Add(name, l, s2)
	p.Legend.Left = true
	if p.Y.Min > 0 {
		p.Y.Min = 0
	}
	return p, nil
}

// minShownProb is the smallest peak probability (over the λ grid) at which
// a model gets its own stacked area and key entry; below it the area would
// be a hairline (0.01 of the panel's height is about 4 pixels at the default
// size), so the model's mass is drawn as part of "other" and the key says
// how many models it holds.
const minShownProb = 0.01

// sideKey is a legend drawn beside a panel, with the width it needs: one
// wrapped label (wrapLabel) and thumbnail per entry. Its labels are cut at
// draw time until the key fits the panel's height.
type sideKey struct {
	lines  [][]string
	thumbs []gplot.Thumbnailer
	width  vg.Length
}

// sweepModels draws the stacked probabilities of the top models against λ.
func sweepModels(s Sweep, xl string) (*gplot.Plot, *sideKey, error) {
	n := len(s.Lambda)
	cum := make([]float64, n)
	p := newPlot("", xl, "posterior probability")
	type layer struct {
		name string
		poly *plotter.Polygon
	}
	var layers []layer
	addLayer := func(name string, vals []float64, c color.Color) error {
		ring := make(plotter.XYs, 0, 2*n)
		for i, l := range s.Lambda {
			ring = append(ring, plotter.XY{X: l, Y: cum[i] + vals[i]})
		}
		for i := n - 1; i >= 0; i-- {
			ring = append(ring, plotter.XY{X: s.Lambda[i], Y: cum[i]})
		}
		poly, err := plotter.NewPolygon(ring)
		if err != nil {
			return err
		}
		poly.Color = c
		poly.LineStyle.Color = withAlpha(palette[7], 0x60)
		poly.LineStyle.Width = vg.Points(0.4)
		p.Add(poly)
		layers = append(layers, layer{name, poly})
		for i := range cum {
			cum[i] += vals[i]
		}
		return nil
	}
	folded := 0 // models too small to see, drawn as part of "other"
	total := make([]float64, n)
	for _, m := range s.Models {
		if len(m.Values) != n {
			return nil, nil, fmt.Errorf("model %q has %d values for %d λ values", m.Name, len(m.Values), n)
		}
		peak := 0.0
		for i, v := range m.Values {
			if !finite(v) || v < 0 {
				return nil, nil, fmt.Errorf("model %q: probability %v at λ=%v, want finite and ≥ 0", m.Name, v, s.Lambda[i])
			}
			peak = math.Max(peak, v)
			total[i] += v
		}
		if peak < minShownProb {
			folded++
			continue
		}
		if err := addLayer(m.Name, m.Values, withAlpha(seriesColor(len(layers)), 0xc0)); err != nil {
			return nil, nil, err
		}
	}
	// "other" is everything the drawn layers leave, the folded models
	// included.
	other := make([]float64, n)
	anyOther := false
	for i, c := range total {
		if c > 1+1e-6 {
			return nil, nil, fmt.Errorf("model probabilities sum to %v > 1 at λ=%v", c, s.Lambda[i])
		}
		other[i] = math.Max(0, 1-cum[i])
		anyOther = anyOther || other[i] > 1e-6
	}
	if anyOther {
		name := "other"
		switch {
		case folded == 1:
			name = fmt.Sprintf("other (incl. 1 top model, < %g %%)", 100*minShownProb)
		case folded > 1:
			name = fmt.Sprintf("other (incl. %d top models, each < %g %%)", folded, 100*minShownProb)
		}
		if err := addLayer(name, other, bandGrey); err != nil {
			return nil, nil, err
		}
	}
	// Key from the top layer down, matching the stacking order.
	key, style := &sideKey{}, newKey()
	for i := len(layers) - 1; i >= 0; i-- {
		lines := wrapLabel(layers[i].name, 34)
		key.lines = append(key.lines, lines)
		key.thumbs = append(key.thumbs, layers[i].poly)
		for _, line := range lines {
			key.width = max(key.width, textWidth(style.TextStyle.Font, line))
		}
	}
	key.width += style.ThumbnailWidth + 2*style.Padding + vg.Points(12)
	p.X.Min, p.X.Max = s.Lambda[0], s.Lambda[n-1]
	p.Y.Min, p.Y.Max = 0, 1
	return p, key, nil
}

// newKey is the style of the stacked panel's key.
func newKey() gplot.Legend {
	l := gplot.NewLegend()
	l.TextStyle.Font.Size = vg.Points(9)
	l.Top, l.Left = true, true
	return l
}

// legend builds the key for canvas c: the wrapped labels and, when the
// entries would run past the bottom of c, cut to fewer lines each (the
// rest of a label summed up as "… +k more") until they fit or a single
// line is left.
func (k *sideKey) legend(c draw.Canvas) gplot.Legend {
	most := 1
	for _, w := range k.lines {
		most = max(most, len(w))
	}
	for lines := most; ; lines-- {
		l := newKey()
		for i, w := range k.lines {
			l.Add(strings.Join(clipLines(w, lines), "\n"), k.thumbs[i])
		}
		if lines == 1 || l.Rectangle(c).Min.Y >= c.Min.Y {
			return l
		}
	}
}

// clipLines keeps at most n of a wrapped label's lines; when some are
// dropped, the last kept line is replaced by a count of the components
// left out.
func clipLines(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	keep := max(n-1, 0)
	rest := 0
	for _, line := range lines[keep:] {
		for _, part := range strings.SplitAfter(line, "+") {
			if strings.TrimSuffix(part, "+") != "" {
				rest++
			}
		}
	}
	out := append([]string(nil), lines[:keep]...)
	return append(out, fmt.Sprintf("… +%d more", rest))
}

// wrapLabel breaks a long model label ("A+B+C+…") after a '+' into lines
// of at most about max characters, so that a key of long labels leaves the
// panel its room.
func wrapLabel(name string, max int) []string {
	if len([]rune(name)) <= max {
		return []string{name}
	}
	var lines []string
	var b strings.Builder
	line := 0
	for i, part := range strings.SplitAfter(name, "+") {
		n := len([]rune(part))
		if i > 0 && line+n > max {
			lines = append(lines, b.String())
			b.Reset()
			line = 0
		}
		b.WriteString(part)
		line += n
	}
	return append(lines, b.String())
}

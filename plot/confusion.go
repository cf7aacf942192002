package plot

import (
	"fmt"
	"image"
	"io"
	"math"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// maxCellText and maxTickLabels bound the matrix sizes for which cell
// values and row/column labels are written; larger matrices are drawn as a
// plain heat map.
const (
	maxCellText   = 20
	maxTickLabels = 40
)

// ConfusionMatrix writes m as a heat map (viridis) with a colour bar: row
// i is the true class rowLabels[i] (drawn from the top), column j the
// predicted class colLabels[j]. For matrices up to 20×20 each cell shows its
// value; up to 40 rows/columns are labelled. Labels may be nil. NaN cells
// are left blank. o.XLabel and o.YLabel default to "predicted" and "true".
// The default size grows with the matrix, from 600×550 pixels.
func ConfusionMatrix(path string, m [][]float64, rowLabels, colLabels []string, o Options) error {
	return saveAtomic(path, func(w io.Writer) error { return WriteConfusionMatrix(w, m, rowLabels, colLabels, o) })
}

// WriteConfusionMatrix is ConfusionMatrix writing the PNG to w.
func WriteConfusionMatrix(w io.Writer, m [][]float64, rowLabels, colLabels []string, o Options) error {
	return guard("confusion matrix", func() error { return writeConfusionMatrix(w, m, rowLabels, colLabels, o) })
}

func writeConfusionMatrix(w io.Writer, m [][]float64, rowLabels, colLabels []string, o Options) error {
	nr := len(m)
	if nr == 0 || len(m[0]) == 0 {
		return errNoData
	}
	nc := len(m[0])
	if nr > 1<<12 || nc > 1<<12 {
		return fmt.Errorf("matrix %d×%d too large", nr, nc)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	integers := true
	for i, r := range m {
		if len(r) != nc {
			return fmt.Errorf("row %d has %d columns, row 0 has %d", i, len(r), nc)
		}
		for j, v := range r {
			if math.IsInf(v, 0) {
				return fmt.Errorf("cell (%d, %d) is infinite", i, j)
			}
			if !math.IsNaN(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
				integers = integers && v == math.Trunc(v)
			}
		}
	}
	if lo > hi {
		return fmt.Errorf("no finite cell")
	}
	if rowLabels != nil && len(rowLabels) != nr || colLabels != nil && len(colLabels) != nc {
		return fmt.Errorf("%d row and %d column labels for a %d×%d matrix", len(rowLabels), len(colLabels), nr, nc)
	}
	lo = math.Min(lo, 0)
	if hi == lo {
		hi = lo + 1
	}
	img := image.NewNRGBA(image.Rect(0, 0, nc, nr))
	for i, r := range m {
		for j, v := range r {
			img.SetNRGBA(j, i, Viridis.Color((v-lo)/(hi-lo)))
		}
	}
	xl, yl := o.XLabel, o.YLabel
	if xl == "" {
		xl = "predicted"
	}
	if yl == "" {
		yl = "true"
	}
	p := newPlot("", xl, yl)
	p.Add(raster{img: img, x0: -0.5, y0: -0.5, x1: float64(nc) - 0.5, y1: float64(nr) - 0.5})
	if nr <= maxCellText && nc <= maxCellText {
		var xys plotter.XYs
		var strs []string
		var styles []text.Style
		size := vg.Points(9)
		if max(nr, nc) > 10 {
			size = vg.Points(7)
		}
		for i, r := range m {
			for j, v := range r {
				if math.IsNaN(v) {
					continue
				}
				xys = append(xys, plotter.XY{X: float64(j), Y: float64(nr - 1 - i)})
				if integers {
					strs = append(strs, fmt.Sprintf("%.0f", v))
				} else {
					strs = append(strs, fmt.Sprintf("%.2f", v))
				}
				sty := p.X.Tick.Label
				sty.Font.Size = size
				sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
				sty.Color = palette[7]
				if (v-lo)/(hi-lo) < 0.6 { // dark end of viridis
					sty.Color = image.White
				}
				styles = append(styles, sty)
			}
		}
		if len(xys) > 0 {
			labels := &plotter.Labels{XYs: xys, Labels: strs, TextStyle: styles}
			p.Add(labels)
		}
	}
	if colLabels != nil && nc <= maxTickLabels {
		p.NominalX(colLabels...)
		p.X.Tick.Label.Rotation = math.Pi / 4
		p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	}
	if rowLabels != nil && nr <= maxTickLabels {
		names := make([]string, nr)
		for i, l := range rowLabels {
			names[nr-1-i] = l
		}
		p.NominalY(names...)
	}
	if colLabels == nil || nc > maxTickLabels {
		p.X.Tick.Marker = unlabelled{}
	}
	if rowLabels == nil || nr > maxTickLabels {
		p.Y.Tick.Marker = unlabelled{}
	}
	p.X.Min, p.X.Max = -0.5, float64(nc)-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(nr)-0.5
	bar := colorBar(Viridis, lo, hi, "")
	side := min(max(550, 24*max(nr, nc)+250), 1600)
	wd, ht, err := o.size(side+50, side)
	if err != nil {
		return err
	}
	return encode(w, wd, ht, func(c draw.Canvas) error {
		c = titled(c, o.Title)
		barW := vg.Points(60)
		left := c
		left.Max.X -= barW + vg.Points(8)
		p.Draw(left)
		right := c
		right.Min.X = c.Max.X - barW
		right.Max.X -= vg.Points(10)
		// Align the bar with the data area of the matrix.
		da := p.DataCanvas(left)
		right.Min.Y, right.Max.Y = da.Min.Y, da.Max.Y
		bar.Draw(right)
		return nil
	})
}

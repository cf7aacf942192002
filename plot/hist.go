package plot

import (
	"fmt"
	"io"
	"math"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// HistogramOptions configures Histogram.
type HistogramOptions struct {
	Options
	// Bins is the number of bins shared by all series; 0 selects
	// ⌈√n⌉ clamped to [10, 60] for the largest series size n.
	Bins int
	// Density normalises each series to unit area, so that series of
	// different sizes can be compared.
	Density bool
}

// Histogram writes overlaid histograms of one or several series on common
// bins (e.g. rKSD or ESS values of several settings). Non-finite values are
// ignored; a series without any finite value is an error. The default size
// is 800×500 pixels.
func Histogram(path string, series []Series, o HistogramOptions) error {
	return saveAtomic(path, func(w io.Writer) error { return WriteHistogram(w, series, o) })
}

// WriteHistogram is Histogram writing the PNG to w.
func WriteHistogram(w io.Writer, series []Series, o HistogramOptions) error {
	return guard("histogram", func() error { return writeHistogram(w, series, o) })
}

func writeHistogram(w io.Writer, series []Series, o HistogramOptions) error {
	if len(series) == 0 {
		return errNoData
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	vals := make([][]float64, len(series))
	nmax := 0
	for i, s := range series {
		vals[i] = finiteValues(s.Values)
		if len(vals[i]) == 0 {
			return fmt.Errorf("series %q: no finite value", s.Name)
		}
		nmax = max(nmax, len(vals[i]))
		for _, v := range vals[i] {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	bins := o.Bins
	if bins < 0 || bins > 10000 {
		return fmt.Errorf("%d bins, want 0 (automatic) to 10000", bins)
	}
	if bins == 0 {
		bins = min(max(int(math.Ceil(math.Sqrt(float64(nmax)))), 10), 60)
	}
	if hi == lo {
		lo, hi = lo-0.5, hi+0.5
	}
	if !finite(hi - lo) {
		return fmt.Errorf("value range [%v, %v] too wide", lo, hi)
	}
	wd, ht, err := o.size(800, 500)
	if err != nil {
		return err
	}
	yl := o.YLabel
	if yl == "" {
		yl = "count"
		if o.Density {
			yl = "density"
		}
	}
	p := newPlot(o.Title, o.XLabel, yl)
	p.Add(plotter.NewGrid())
	width := (hi - lo) / float64(bins)
	for si, vs := range vals {
		hb := make([]plotter.HistogramBin, bins)
		for b := range hb {
			hb[b].Min = lo + float64(b)*width
			hb[b].Max = lo + float64(b+1)*width
		}
		for _, v := range vs {
			b := min(max(int((v-lo)/width), 0), bins-1)
			hb[b].Weight++
		}
		if o.Density {
			for b := range hb {
				hb[b].Weight /= float64(len(vs)) * width
			}
		}
		c := seriesColor(si)
		h := &plotter.Histogram{Bins: hb, Width: width, FillColor: withAlpha(c, 0x70)}
		h.LineStyle.Color = c
		h.LineStyle.Width = vg.Points(1)
		p.Add(h)
		if len(series) > 1 || series[si].Name != "" {
			p.Legend.Add(series[si].Name, h)
		}
	}
	p.Y.Min = 0
	return encode(w, wd, ht, drawPlot(p))
}

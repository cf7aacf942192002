package plot

import (
	"fmt"
	"io"
	"math"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// ECDFBand is a band for the empirical CDF of a perfectly calibrated
// posterior: at each grid point Z[i] the ECDF of uniform values lies in
// [Lo[i], Hi[i]] with the stated probability. Lo and Hi are ECDF values, not
// differences from the diagonal.
type ECDFBand struct {
	Z, Lo, Hi []float64
}

// CalibrationOptions configures CalibrationECDF.
type CalibrationOptions struct {
	Options
	// Raw plots the ECDF itself against the uniform CDF; by default the
	// difference ECDF(z) − z is plotted, which makes small deviations
	// visible.
	Raw bool
	// Level is the probability of the shaded band (default 0.95).
	Level float64
	// Band, if non-nil, is drawn instead of the pointwise binomial band
	// computed from the smallest series size (e.g. a band obtained by
	// simulation, or a simultaneous one).
	Band *ECDFBand
	// Levels, if positive, says that the values are discrete, on the L
	// levels (r − 0.5)/L, r = 1…L (parameter SBC with L − 1 samples). The
	// ECDFs and the default band are then drawn through the level
	// boundaries k/L, k = 0…L, where a calibrated posterior's expected ECDF
	// is exactly k/L: drawn as a step function, the ECDF minus the diagonal
	// would be a sawtooth of height 1/L that hides smaller deviations.
	Levels int
}

// gridPoints is the number of z values at which ECDFs and bands are drawn.
const gridPoints = 201

// CalibrationECDF writes the empirical CDF of normalised ranks or PIT
// values (each in [0, 1]) of one or several series, minus the diagonal
// unless o.Raw, with the band expected for a perfectly calibrated posterior
// shaded in grey. Without o.Band the band is pointwise: for N uniform values
// N·ECDF(z) ~ Binomial(N, z), so the band is the central o.Level interval of
// that binomial, for the smallest N among the series. Non-finite values are
// ignored; values outside [0, 1] are an error. The default size is 700×500.
func CalibrationECDF(path string, series []Series, o CalibrationOptions) error {
	return saveAtomic(path, func(w io.Writer) error { return WriteCalibrationECDF(w, series, o) })
}

// WriteCalibrationECDF is CalibrationECDF writing the PNG to w.
func WriteCalibrationECDF(w io.Writer, series []Series, o CalibrationOptions) error {
	return guard("calibration ECDF", func() error { return writeCalibrationECDF(w, series, o) })
}

func writeCalibrationECDF(w io.Writer, series []Series, o CalibrationOptions) error {
	if len(series) == 0 {
		return errNoData
	}
	level := o.Level
	if level == 0 {
		level = 0.95
	}
	if !(level > 0 && level < 1) {
		return fmt.Errorf("level %v outside (0, 1)", level)
	}
	vals := make([][]float64, len(series))
	nmin := math.MaxInt
	for i, s := range series {
		v := finiteValues(s.Values)
		if len(v) == 0 {
			return fmt.Errorf("series %q: no finite value", s.Name)
		}
		for _, x := range v {
			if x < 0 || x > 1 {
				return fmt.Errorf("series %q: value %v outside [0, 1]", s.Name, x)
			}
		}
		sort.Float64s(v)
		vals[i] = v
		nmin = min(nmin, len(v))
	}
	if o.Levels < 0 {
		return fmt.Errorf("levels %d: want ≥ 0", o.Levels)
	}
	band := o.Band
	if band == nil {
		band = binomialBand(nmin, level, o.Levels)
	} else if n := len(band.Z); n < 2 || len(band.Lo) != n || len(band.Hi) != n {
		return fmt.Errorf("band: need ≥ 2 points and equal lengths, have Z %d, Lo %d, Hi %d", n, len(band.Lo), len(band.Hi))
	}
	wd, ht, err := o.size(700, 500)
	if err != nil {
		return err
	}
	xl, yl := o.XLabel, o.YLabel
	if xl == "" {
		xl = "normalised rank"
	}
	if yl == "" {
		yl = "ECDF − uniform CDF"
		if o.Raw {
			yl = "ECDF"
		}
	}
	diag := func(z float64) float64 {
		if o.Raw {
			return 0
		}
		return z
	}
	p := newPlot(o.Title, xl, yl)
	p.Add(plotter.NewGrid())
	ring := make(plotter.XYs, 0, 2*len(band.Z))
	for i, z := range band.Z {
		ring = append(ring, plotter.XY{X: z, Y: band.Hi[i] - diag(z)})
	}
	for i := len(band.Z) - 1; i >= 0; i-- {
		ring = append(ring, plotter.XY{X: band.Z[i], Y: band.Lo[i] - diag(band.Z[i])})
	}
	poly, err := plotter.NewPolygon(ring)
	if err != nil {
		return fmt.Errorf("band: %w", err)
	}
	poly.Color = bandGrey
	poly.LineStyle.Width = 0
	p.Add(poly)
	p.Legend.Add(fmt.Sprintf("%g %% band, calibrated", 100*level), poly)
	ref, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1 - diag(1)}})
	if err != nil {
		return err
	}
	ref.Color = palette[7]
	ref.Width = vg.Points(0.8)
	ref.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(ref)
	for si, v := range vals {
		var xy plotter.XYs
		if o.Levels > 0 {
			xy = ecdfAtBoundaries(v, o.Levels, diag)
		} else {
			xy = ecdfSteps(v, diag)
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = seriesColor(si)
		l.Width = vg.Points(1.6)
		p.Add(l)
		if len(series) > 1 || series[si].Name != "" {
			p.Legend.Add(series[si].Name, l)
		}
	}
	p.X.Min, p.X.Max = 0, 1
	p.Legend.Left = o.Raw
	return encode(w, wd, ht, drawPlot(p))
}

// bandGrey is the fill colour of reference bands.
var bandGrey = withAlpha(palette[7], 0x30)

// ecdfSteps returns the vertices of the ECDF of sorted values v as a step
// function on [0, 1], minus diag(z).
func ecdfSteps(v []float64, diag func(float64) float64) plotter.XYs {
	n := float64(len(v))
	xy := make(plotter.XYs, 0, 2*len(v)+2)
	xy = append(xy, plotter.XY{X: 0, Y: 0 - diag(0)})
	for i, z := range v {
		xy = append(xy, plotter.XY{X: z, Y: float64(i)/n - diag(z)}, plotter.XY{X: z, Y: float64(i+1)/n - diag(z)})
	}
	return append(xy, plotter.XY{X: 1, Y: 1 - diag(1)})
}

// ecdfAtBoundaries returns the ECDF of sorted values v, which lie on the
// levels (r − 0.5)/levels, at the boundaries k/levels between the levels,
// minus diag(z): a polyline through the points where the discrete uniform
// CDF equals the continuous one.
func ecdfAtBoundaries(v []float64, levels int, diag func(float64) float64) plotter.XYs {
	n := float64(len(v))
	xy := make(plotter.XYs, levels+1)
	j := 0
	for k := range xy {
		z := float64(k) / float64(levels)
		for j < len(v) && v[j] < z {
			j++
		}
		xy[k] = plotter.XY{X: z, Y: float64(j)/n - diag(z)}
	}
	return xy
}

// binomialBand returns the pointwise central band of the ECDF of n
// independent uniform values: N·ECDF(z) ~ Binomial(n, z). With levels > 0
// it is drawn at the level boundaries k/levels, where the ECDF of n
// discrete uniform values on the levels is Binomial(n, k/levels)/n too.
func binomialBand(n int, level float64, levels int) *ECDFBand {
	pts := gridPoints
	if levels > 0 {
		pts = levels + 1
	}
	b := &ECDFBand{Z: make([]float64, pts), Lo: make([]float64, pts), Hi: make([]float64, pts)}
	a := (1 - level) / 2
	for i := range b.Z {
		z := float64(i) / float64(pts-1)
		b.Z[i] = z
		b.Lo[i] = float64(binomialQuantile(n, z, a)) / float64(n)
		b.Hi[i] = float64(binomialQuantile(n, z, 1-a)) / float64(n)
	}
	return b
}

// binomialQuantile returns the smallest k with P(K ≤ k) ≥ q for
// K ~ Binomial(n, p), by bisection on the CDF. A relative slack of 1e-12
// lets CDF values equal to q up to rounding count as reaching it.
func binomialQuantile(n int, p, q float64) int {
	if p <= 0 {
		return 0
	}
	if p >= 1 {
		return n
	}
	d := distuv.Binomial{N: float64(n), P: p}
	lo, hi := -1, n // CDF(lo) < q ≤ CDF(hi)
	for hi-lo > 1 {
		m := (lo + hi) / 2
		if d.CDF(float64(m)) >= q-1e-12 {
			hi = m
		} else {
			lo = m
		}
	}
	return hi
}

package eval

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
	"gonum.org/v1/gonum/stat"
)

// Calibration is the SBC result for masks or parameters.
type Calibration struct {
	// CE is the calibration error of the pooled values, with bootstrap SE
	// over trials.
	CE Value `json:"ce"`
	// Values is the number of pooled SBC values.
	Values int `json:"values"`
	// Band is the CE distribution of a perfectly calibrated posterior at
	// the same N (independent values; for parameters with the discrete
	// ranks of S samples).
	Band Band `json:"band"`
	// Inside reports CE ≤ the band's upper quantile.
	Inside bool `json:"inside_band"`
	// DependentBand (parameters only) keeps the dependence between the
	// pooled PIT values of one trial (SelfConsistentCEBand); InsideDependent
	// compares CE with it.
	DependentBand   *Band `json:"dependent_band,omitempty"`
	InsideDependent *bool `json:"inside_dependent_band,omitempty"`
	// ByDimension (parameters only) is the calibration of each latent
	// dimension on its own, over the trials in which it is active: it
	// names the parameters a pooled miss comes from. Each verdict is at
	// the suite's level, so with P dimensions about (1 − level)·P of a
	// perfect posterior's are outside their bands by chance.
	ByDimension []DimCalibration `json:"by_dimension,omitempty"`
	// ByWidth (parameters only) bins the PIT values by the SD of the
	// posterior draws they were ranked in and says, bin by bin, whether
	// the posteriors are too wide or too narrow and whether they lie too
	// low or too high (WidthCalibration).
	ByWidth []WidthCalibration `json:"by_width,omitempty"`
	// U are the SBC values (for plots).
	U []float64 `json:"-"`
}

// DimCalibration is the parameter-SBC result of one latent dimension.
type DimCalibration struct {
	Index  int    `json:"index"`
	Name   string `json:"name"`
	Values int    `json:"values"`
	// CE has a bootstrap SE over the dimension's values.
	CE Value `json:"ce"`
	// BandUpper is the level quantile of a perfect posterior's CE at
	// Values independent PIT values (UniformCEBand).
	BandUpper float64 `json:"band_upper"`
	Inside    bool    `json:"inside_band"`
	// MeanPIT is the mean PIT value with its SE under calibration (1/2
	// for a perfect posterior): above, the posteriors lie too low; below,
	// too high (WidthCalibration.MeanPIT).
	MeanPIT Value `json:"mean_pit"`
}

func (r *run) maskSBC(rep *Report) ([]posterior.MaskSet, error) {
	ms, err := r.sampleMasks(r.obs, r.lams, r.cfg.MaskSamples, r.seed(streamMasks))
	if err != nil {
		return nil, err
	}
	truth := make([][][]bool, len(r.obs))
	for i, s := range r.sims {
		truth[i] = [][]bool{s.Mask}
	}
	lq, err := r.logProbMasks(r.obs, r.lams, truth)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(r.seed(streamRank), 1))
	u := make([]float64, len(r.obs))
	ls := make([]float64, r.cfg.MaskSamples)
	for i := range u {
		u[i] = RandomizedRank(rng, lq[i][0], alignTies(ls, lq[i][0], r.sims[i].Mask, ms[i]))
	}
	band, err := UniformCEBand(len(u), 0, r.cfg.BandReps, r.cfg.Level, r.seed(streamBand))
	if err != nil {
		return nil, err
	}
	rep.Mask = r.calibration(len(r.obs), u, band, func(idx []int) []float64 { return pick(u, idx) })
	return ms, nil
}

// tieTolerance is the difference in log q below which a sampled mask
// counts as tied with the true mask: the sampler's log q and the
// teacher-forced log q of the same mask agree only to about 10⁻⁴ in
// float32 (docs/posterior.md).
const tieTolerance = 1e-4

// alignTies returns the sampled log q values with ties to the true mask's
// logqTrue made exact: a draw of the true mask itself, or of a mask whose
// log q is within tieTolerance, gets logqTrue. Without this, rounding
// differences between the sampler and teacher forcing would break the
// ties of model SBC in a random direction and make calibrated ranks look
// over-confident (mass at both ends).
func alignTies(dst []float64, logqTrue float64, truth []bool, ms posterior.MaskSet) []float64 {
	dst = dst[:len(ms.LogQ)]
	for s, l := range ms.LogQ {
		if math.Abs(l-logqTrue) <= tieTolerance || slices.Equal(ms.Masks[s], truth) {
			l = logqTrue
		}
		dst[s] = l
	}
	return dst
}

// calibration is the calibration error of the SBC values u of n trials
// with its bootstrap SE over trials (resample returns the values of the
// trials idx).
func (r *run) calibration(n int, u []float64, band Band, resample func(idx []int) []float64) Calibration {
	ce := CalibrationError(u)
	se := Bootstrap(n, r.cfg.BootReps, r.seed(streamBoot), func(idx []int) float64 {
		return CalibrationError(resample(idx))
	})
	return Calibration{CE: Value{ce, se}, Values: len(u), Band: band, Inside: ce <= band.Upper, U: u}
}

// activeIdx lists the active coordinates of a latent mask.
func activeIdx(a []bool) []int {
	var idx []int
	for j, on := range a {
		if on {
			idx = append(idx, j)
		}
	}
	return idx
}

func (r *run) paramSBC(rep *Report) ([]posterior.ThetaSet, error) {
	S := r.cfg.ThetaSamples
	rows := make([][][]bool, len(r.obs))
	for i, s := range r.sims {
		rows[i] = posterior.Repeat(s.Mask, S)
	}
	so := r.so
	so.Seed = r.seed(streamTheta)
	ts, err := r.p.SampleTheta(r.obs, rows, so)
	if err != nil {
		return nil, fmt.Errorf("eval: parameter samples: %w", err)
	}
	draws := make([][][]float64, len(ts))
	for i := range ts {
		draws[i] = ts[i].Theta
	}
	rep.Param, err = r.thetaCalibration(r.sims, r.active, draws)
	return ts, err
}

// thetaCalibration is the parameter SBC of draws[i], the S posterior
// draws (latent vectors) of test observation i, whose truth is sims[i]
// with active latent coordinates active[i]: pooled, by dimension and by
// posterior width.
func (r *run) thetaCalibration(sims []family.Sample, active [][]bool, draws [][][]float64) (Calibration, error) {
	S := len(draws[0])
	perTrial := make([][]float64, len(sims))
	byDim := make([][]float64, len(active[0]))
	act := make([][][]float64, 0, len(sims))
	var u, sd []float64
	col := make([]float64, S)
	for i, s := range sims {
		idx := activeIdx(active[i])
		if len(idx) == 0 {
			continue
		}
		for _, j := range idx {
			for k := range col {
				col[k] = draws[i][k][j]
			}
			pit := PIT(s.Theta[j], col)
			perTrial[i] = append(perTrial[i], pit)
			byDim[j] = append(byDim[j], pit)
			sd = append(sd, stat.StdDev(col, nil))
		}
		u = append(u, perTrial[i]...)
		vs := make([][]float64, S)
		for k := range vs {
			vs[k] = pick(draws[i][k], idx)
		}
		act = append(act, vs)
	}
	if len(u) == 0 {
		return Calibration{}, fmt.Errorf("eval: no active parameters in %d test observations", len(sims))
	}
	band, err := UniformCEBand(len(u), S, r.cfg.BandReps, r.cfg.Level, r.seed(streamBand)+1)
	if err != nil {
		return Calibration{}, err
	}
	c := r.calibration(len(sims), u, band, func(idx []int) []float64 {
		var v []float64
		for _, i := range idx {
			v = append(v, perTrial[i]...)
		}
		return v
	})
	dep, err := SelfConsistentCEBand(act, r.cfg.BandReps, r.cfg.Level, r.seed(streamBand)+2)
	if err != nil {
		return Calibration{}, err
	}
	in := c.CE.Value <= dep.Upper
	c.DependentBand, c.InsideDependent = &dep, &in
	c.ByDimension, err = r.dimCalibration(r.f.Layout().LatentNames(r.f.Components()), byDim, S)
	if err != nil {
		return Calibration{}, err
	}
	c.ByWidth, err = widthCalibration(u, sd, S,
		func(n int) (float64, error) {
			b, err := UniformCEBand(n, S, r.cfg.BandReps, r.cfg.Level, streamSeed(r.seed(streamWidth), uint64(n)))
			return b.Upper, err
		},
		func(b, n int, statistic func(idx []int) float64) float64 {
			return Bootstrap(n, r.cfg.BootReps, streamSeed(r.seed(streamWidth), 1<<32+uint64(b)), statistic)
		})
	return c, err
}

// dimCalibration returns the calibration of every latent dimension that
// was active in at least one trial; byDim[j] holds dimension j's PIT values
// among S samples, one per trial in which it was active, and names[j] its
// name.
func (r *run) dimCalibration(names []string, byDim [][]float64, S int) ([]DimCalibration, error) {
	upper := map[int]float64{} // the band depends only on the number of values
	var out []DimCalibration
	for j, u := range byDim {
		if len(u) == 0 {
			continue
		}
		up, ok := upper[len(u)]
		if !ok {
			band, err := UniformCEBand(len(u), S, r.cfg.BandReps, r.cfg.Level, r.seed(streamBand)+3+uint64(len(u)))
			if err != nil {
				return nil, err
			}
			up = band.Upper
			upper[len(u)] = up
		}
		ce := CalibrationError(u)
		se := Bootstrap(len(u), r.cfg.BootReps, streamSeed(r.seed(streamDimBoot), uint64(j)), func(idx []int) float64 {
			return CalibrationError(pick(u, idx))
		})
		out = append(out, DimCalibration{Index: j, Name: names[j], Values: len(u),
			CE: Value{ce, se}, BandUpper: up, Inside: ce <= up, MeanPIT: meanPIT(u, S)})
	}
	return out, nil
}

// DimSummary says in one line how many dimensions are outside their bands,
// against the number a perfect posterior would have there by chance at
// level, and names the worst (largest CE relative to its band) up to
// worst of them.
func DimSummary(dims []DimCalibration, level float64, worst int) string {
	out := 0
	for _, d := range dims {
		if !d.Inside {
			out++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d dimensions outside their bands (%.1f expected by chance)", out, len(dims), (1-level)*float64(len(dims)))
	sorted := slices.Clone(dims)
	slices.SortStableFunc(sorted, func(a, b DimCalibration) int {
		return cmp.Compare(b.CE.Value/b.BandUpper, a.CE.Value/a.BandUpper)
	})
	for i, d := range sorted[:min(worst, len(sorted))] {
		sep := "; worst: "
		if i > 0 {
			sep = ", "
		}
		fmt.Fprintf(&b, "%s%s %.4f (band ≤ %.4f, %d values, mean PIT %.3f ± %.3f)", sep, d.Name, d.CE.Value, d.BandUpper, d.Values, d.MeanPIT.Value, d.MeanPIT.SE)
	}
	return b.String()
}

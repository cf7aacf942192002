package demo

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/prismsbi/prism/data"
	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/models"
	"github.com/prismsbi/prism/plot"
	"github.com/prismsbi/prism/posterior"
)

// SymbolicResult summarises the symbolic-regression part of the demo.
type SymbolicResult struct {
	Model     string             `json:"model"`
	TrueModel string             `json:"true_model"`
	TrueMask  string             `json:"true_mask"`
	Sweep     []SweepPoint       `json:"sweep"`
	Predict   PredictSummary     `json:"predict"`
	Timings   map[string]float64 `json:"timings_s"`
	Figures   []Figure           `json:"figures"`
}

// SweepPoint is the model posterior q(M | x, λ) at one λ: the number of
// active base components among the drawn masks (median and central 90 %)
// and the most probable distinct models drawn.
type SweepPoint struct {
	Lambda       float64      `json:"lambda"`
	ActiveMedian float64      `json:"active_median"`
	ActiveQ05    float64      `json:"active_q05"`
	ActiveQ95    float64      `json:"active_q95"`
	Top          []RankedMask `json:"top"`
}

// RankedMask is one model with its probability under q(M | x, λ).
type RankedMask struct {
	Mask   string  `json:"mask"`
	Label  string  `json:"label"`
	Prob   float64 `json:"q"`
	IsTrue bool    `json:"is_true,omitempty"`
}

// PredictSummary describes the predictive band.
type PredictSummary struct {
	Lambda  float64 `json:"lambda"`
	Samples int     `json:"samples"`
	// RMSE is the root mean square difference between the observation
	// and the predictive mean.
	RMSE float64 `json:"rmse"`
}

// topPerLambda is the number of models listed per λ in sweep.json.
const topPerLambda = 5

// maxSweepModels is the number of models drawn in the sweep figure.
const maxSweepModels = 6

// example is the bundled observation with its truth.
type example struct {
	obs   posterior.Observation
	truth []bool
}

// readExample reads the bundled `prism simulate` line for family f.
func readExample(f family.Family) (*example, error) {
	b, err := data.Files.ReadFile(data.SymbolicExample)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	var line struct {
		X    []float64 `json:"x"`
		Mask []int     `json:"mask"`
	}
	if err := json.Unmarshal(b, &line); err != nil {
		return nil, fmt.Errorf("demo: %s: %w", data.SymbolicExample, err)
	}
	ds, err := f.Designs("")
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	fixed, ok := ds.(family.FixedDesign)
	if !ok {
		return nil, fmt.Errorf("demo: family %s has no fixed design", f.Name())
	}
	d := family.Design(fixed)
	if d.N != len(line.X) || len(line.Mask) != len(f.Components()) {
		return nil, fmt.Errorf("demo: %s: %d values and a %d-component mask, family %s wants %d and %d",
			data.SymbolicExample, len(line.X), len(line.Mask), f.Name(), d.N, len(f.Components()))
	}
	ex := &example{obs: posterior.Observation{Design: d, X: line.X}, truth: make([]bool, len(line.Mask))}
	for k, v := range line.Mask {
		ex.truth[k] = v != 0
	}
	return ex, nil
}

// runSymbolic runs the λ sweep and the predictive band of the shipped
// symbolic-k15 network on the bundled observation.
func runSymbolic(c Config, logf func(string, ...any)) (*SymbolicResult, error) {
	r := &SymbolicResult{Model: SymbolicModel, Timings: map[string]float64{}}
	t := time.Now()
	p, err := models.Open(SymbolicModel)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	f := p.Family()
	ex, err := readExample(f)
	if err != nil {
		return nil, err
	}
	r.TrueModel, r.TrueMask = family.MaskLabel(f, ex.truth), family.MaskString(ex.truth)
	r.Timings["model"] = time.Since(t).Seconds()
	obs := []posterior.Observation{ex.obs}
	opt := posterior.Options{Seed: c.Seed}

	logf("symbolic: model posterior at %d values of λ (%d masks each) with the shipped %s network", len(c.Lambdas), c.SweepMasks, SymbolicModel)
	t = time.Now()
	sweeps, err := p.LambdaSweep(obs, c.Lambdas, c.SweepMasks, maxSweepModels, opt)
	if err != nil {
		return nil, fmt.Errorf("demo: λ sweep: %w", err)
	}
	sw := sweeps[0]
	sweep := plot.Sweep{Lambda: c.Lambdas, CenterName: "median", Center: sw.ActiveMedian, Lo: sw.ActiveQ05, Hi: sw.ActiveQ95}
	for k, m := range sw.Shown {
		sweep.Models = append(sweep.Models, plot.Series{Name: family.MaskLabel(f, m), Values: sw.ShownProb[k]})
	}
	truthKey := family.MaskString(ex.truth)
	for l, lam := range c.Lambdas {
		pt := SweepPoint{Lambda: lam, ActiveMedian: sw.ActiveMedian[l], ActiveQ05: sw.ActiveQ05[l], ActiveQ95: sw.ActiveQ95[l]}
		for _, rk := range sw.Ranked[l][:min(topPerLambda, len(sw.Ranked[l]))] {
			key := family.MaskString(rk.Mask)
			pt.Top = append(pt.Top, RankedMask{Mask: key, Label: family.MaskLabel(f, rk.Mask), Prob: math.Exp(rk.LogQ), IsTrue: key == truthKey})
		}
		r.Sweep = append(r.Sweep, pt)
	}
	r.Timings["sweep"] = time.Since(t).Seconds()

	logf("symbolic: model-averaged posterior predictive at λ = %g (%d draws × %d ODE steps)", c.PredictLambda, c.PredictSamples, c.Steps)
	t = time.Now()
	po := posterior.PredictOptions{SampleOptions: posterior.SampleOptions{Options: opt, Steps: c.Steps},
		Lambda: c.PredictLambda, Samples: c.PredictSamples}
	bands, err := p.Predict(obs, po)
	if err != nil {
		return nil, fmt.Errorf("demo: predictive: %w", err)
	}
	b := bands[0]
	r.Timings["predict"] = time.Since(t).Seconds()
	var sq float64
	for j, y := range ex.obs.X {
		sq += (y - b.Mean[j]) * (y - b.Mean[j])
	}
	r.Predict = PredictSummary{Lambda: c.PredictLambda, Samples: c.PredictSamples, RMSE: math.Sqrt(sq / float64(len(ex.obs.X)))}

	sdir := filepath.Join(c.Out, symbolicDir)
	if err := dmrifit.WriteJSON(filepath.Join(sdir, "sweep.json"), r.Sweep); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	xs := gridOf(ex.obs.Design)
	pred := struct {
		Lambda  float64   `json:"lambda"`
		Samples int       `json:"samples"`
		X       []float64 `json:"x"`
		Y       []float64 `json:"y"`
		Mean    []float64 `json:"mean"`
		Lo      []float64 `json:"lo"`
		Hi      []float64 `json:"hi"`
	}{c.PredictLambda, c.PredictSamples, xs, ex.obs.X, b.Mean, b.Lo, b.Hi}
	if err := dmrifit.WriteJSON(filepath.Join(sdir, "predict.json"), pred); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}

	figs := []struct {
		Figure
		draw func(path string) error
	}{
		{Figure{Path: "figures/lambda-sweep.png", Title: "Model posterior across λ", Wide: true,
			Caption: fmt.Sprintf("Left: number of active base components among %d masks drawn from q(M | x, λ) (median and central 90 %%). Right: q(M | x, λ) of the models that rank highest at some λ, stacked; the truth is %s.", c.SweepMasks, r.TrueModel)},
			func(path string) error {
				return plot.LambdaSweep(path, sweep, plot.Options{Title: "symbolic-k15 example: model posterior vs λ"})
			}},
		{Figure{Path: "figures/predictive-band.png", Title: "Posterior predictive band", Wide: true,
			Caption: fmt.Sprintf("The observation (points) with the model-averaged posterior predictive of the noiseless model output at λ = %g: mean and central 95 %% of %d joint draws M ~ q(M | x, λ), θ ~ q(θ | M, x), evaluated without observation noise; RMSE of the mean to the points %.3g.", c.PredictLambda, c.PredictSamples, r.Predict.RMSE)},
			func(path string) error {
				return plot.PredictiveBand(path, plot.Points{X: xs, Y: ex.obs.X},
					[]plot.Band{{Name: "model output (95 %)", X: xs, Mean: b.Mean, Lo: b.Lo, Hi: b.Hi}},
					plot.Options{Title: "symbolic-k15 example: posterior predictive", XLabel: "x", YLabel: "y"})
			}},
	}
	for _, fg := range figs {
		if err := fg.draw(filepath.Join(c.Out, filepath.FromSlash(fg.Path))); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		r.Figures = append(r.Figures, fg.Figure)
	}
	logf("symbolic: truth %s; MAP model at λ = %g: %s", r.TrueModel, c.PredictLambda, r.mapAt(c.PredictLambda))
	return r, nil
}

// gridOf returns the covariate of each measurement of a 1-D design, or
// the measurement index.
func gridOf(d family.Design) []float64 {
	x := make([]float64, d.N)
	for j := range x {
		x[j] = float64(j)
		if d.CovDim == 1 {
			x[j] = d.Cov[j]
		}
	}
	return x
}

// mapAt returns the label of the most probable drawn model at λ.
func (r *SymbolicResult) mapAt(lambda float64) string {
	for _, pt := range r.Sweep {
		if pt.Lambda == lambda && len(pt.Top) > 0 {
			return pt.Top[0].Label
		}
	}
	return "(λ not in the grid)"
}

package demo

import (
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/prismsbi/prism/data"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/figures"
	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/models"
	"github.com/prismsbi/prism/obsfile"
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
	ex, truth, err := obsfile.BundledExample(f)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	if truth == nil {
		return nil, fmt.Errorf("demo: %s has no true mask for %s", data.SymbolicExample, f.Name())
	}
	r.TrueModel, r.TrueMask = family.MaskLabel(f, truth), family.MaskString(truth)
	r.Timings["model"] = time.Since(t).Seconds()
	obs := []posterior.Observation{ex}
	opt := posterior.Options{Seed: c.Seed}

	logf("symbolic: model posterior at %d values of λ (%d masks each) with the shipped %s network", len(c.Lambdas), c.SweepMasks, SymbolicModel)
	t = time.Now()
	sweeps, err := p.LambdaSweep(obs, c.Lambdas, c.SweepMasks, maxSweepModels, opt)
	if err != nil {
		return nil, fmt.Errorf("demo: λ sweep: %w", err)
	}
	sw := sweeps[0]
	truthKey := family.MaskString(truth)
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
	for j, y := range ex.X {
		sq += (y - b.Mean[j]) * (y - b.Mean[j])
	}
	r.Predict = PredictSummary{Lambda: c.PredictLambda, Samples: c.PredictSamples, RMSE: math.Sqrt(sq / float64(len(ex.X)))}

	sdir := filepath.Join(c.Out, symbolicDir)
	if err := atomicfile.WriteJSON(filepath.Join(sdir, "sweep.json"), r.Sweep); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	xs, _ := figures.Axis(ex.Design)
	pred := struct {
		Lambda  float64   `json:"lambda"`
		Samples int       `json:"samples"`
		X       []float64 `json:"x"`
		Y       []float64 `json:"y"`
		Mean    []float64 `json:"mean"`
		Lo      []float64 `json:"lo"`
		Hi      []float64 `json:"hi"`
	}{c.PredictLambda, c.PredictSamples, xs, ex.X, b.Mean, b.Lo, b.Hi}
	if err := atomicfile.WriteJSON(filepath.Join(sdir, "predict.json"), pred); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}

	figs := []struct {
		Figure
		draw func(path string) error
	}{
		{Figure{Path: "figures/lambda-sweep.png", Title: "Model posterior across λ", Wide: true,
			Caption: fmt.Sprintf("Left: number of active base components among %d masks drawn from q(M | x, λ) (median and central 90 %%). Right: q(M | x, λ) of the models that rank highest at some λ, stacked; the truth is %s.", c.SweepMasks, r.TrueModel)},
			func(path string) error {
				return figures.LambdaSweep(path, f, &sw, "symbolic-k15 example: model posterior vs λ")
			}},
		{Figure{Path: "figures/predictive-band.png", Title: "Posterior predictive band", Wide: true,
			Caption: fmt.Sprintf("The observation (points) with the model-averaged posterior predictive of the noiseless model output at λ = %g: mean and central 95 %% of %d joint draws M ~ q(M | x, λ), θ ~ q(θ | M, x), evaluated without observation noise; RMSE of the mean to the points %.3g.", c.PredictLambda, c.PredictSamples, r.Predict.RMSE)},
			func(path string) error {
				return plot.PredictiveBand(path, plot.Points{X: xs, Y: ex.X},
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

// mapAt returns the label of the most probable drawn model at λ.
func (r *SymbolicResult) mapAt(lambda float64) string {
	for _, pt := range r.Sweep {
		if pt.Lambda == lambda && len(pt.Top) > 0 {
			return pt.Top[0].Label
		}
	}
	return "(λ not in the grid)"
}

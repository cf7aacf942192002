package posterior

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

// DenoiserCalibration rescales the network denoiser's step at each noise
// level,
//
//	D_cal(θ; σ) = θ + λ(σ)·(D(θ; σ) − θ),
//
// with λ piecewise linear in ln σ between the knots (constant beyond the
// end knots). λ(σ) is the least-squares slope of the denoising target
// θ₀ − θ on the network's step D − θ over simulations from the prior
// (CalibrateDenoiser): the rescaled denoiser has the smallest denoising
// error of its kind on the training distribution, so it cannot be worse
// than the network's in that error.
//
// Why: a regression network trained on noisy targets learns a shrunken
// copy of a weak signal. At noise levels below about 0.1 prior SDs the
// learnable part of the denoiser's target is small against its noise, and
// the trained network's step comes out 10–40 % short (measured against the
// exact denoiser of lingauss-k6: docs/posterior.md). A step that is too
// short contracts too little, so the ODE draws posteriors that are too
// wide exactly where the data pin a parameter down.
type DenoiserCalibration struct {
	// LogSigma are the knots ln σ, increasing.
	LogSigma []float64 `json:"log_sigma"`
	// Scale is λ at each knot: the raw slope shrunk towards 1 by its
	// standard error (λ = 1 + (λ̂ − 1)·max(0, 1 − SE²/(λ̂ − 1)²)), so
	// levels where the slope is not resolved keep the network's step, and
	// at least 0 (a negative slope means the step is noise: take none).
	Scale []float64 `json:"scale"`
	// Raw and SE are the least-squares slope at each knot and its standard
	// error (the ratio estimator's, over simulations).
	Raw []float64 `json:"raw"`
	SE  []float64 `json:"se"`
	// Width, if set, is the width stage's fit (CalibrateOptions.Width):
	// λ(σ) is then the interpolated Scale times 1 + β·w(σ).
	Width *WidthFit `json:"width,omitempty"`
	// Simulations, PerLevel and Seed say how it was estimated.
	Simulations int    `json:"simulations"`
	PerLevel    int    `json:"per_level"`
	Seed        uint64 `json:"seed"`
}

// WidthFit is the width stage of a DenoiserCalibration: a factor
// 1 + β·w(σ) on the least-squares scale, w = 1 at σ ≤ SigmaFull, 0 at
// σ ≥ SigmaZero and linear in ln σ between, with β fitted so that the
// calibrated sampler's posteriors have the right width on simulations.
//
// Why a second stage: the least-squares slope is the best scalar for the
// denoising error, not for the posterior's width. If the network's step
// is short by κ and also carries an error e uncorrelated with the target,
// the slope is κ·E[s²] / (κ²·E[s²] + E[e²]) for the exact step s, which
// can be 1 while the step is still short; the ODE's contraction follows κ
// alone, so the posteriors stay too wide. Which κ and which error the
// moments of one noise level cannot tell apart; the width of the
// posteriors the ODE draws can.
//
// The width is measured by simulation-based calibration: for each
// simulation's true parameters with posterior SD (of q's draws) below
// SigmaZero, the rank u of the truth among the draws; a posterior of the
// right width makes u uniform, so the variance of u is
// ((S+1)² − 1) / (12(S+1)²) for S draws. Too wide a q puts the truth near
// the middle and makes the variance smaller. β solves variance = Target.
type WidthFit struct {
	Boost float64 `json:"boost"` // β
	// SE is β's standard error, from the rank variance's over the values.
	SE        float64 `json:"se"`
	SigmaFull float64 `json:"sigma_full"`
	SigmaZero float64 `json:"sigma_zero"`
	// Variance is the rank variance at β (Before: at β = 0), Target the
	// perfect posterior's.
	Variance float64 `json:"variance"`
	Before   float64 `json:"before"`
	Target   float64 `json:"target"`
	// Values is the number of (simulation, parameter) pairs the variance
	// is taken over; Simulations and Samples say how they were drawn.
	Values      int `json:"values"`
	Simulations int `json:"simulations"`
	Samples     int `json:"samples"`
}

// weight returns w(σ).
func (w *WidthFit) weight(sigma float64) float64 {
	switch {
	case sigma <= w.SigmaFull:
		return 1
	case sigma >= w.SigmaZero:
		return 0
	}
	return math.Log(w.SigmaZero/sigma) / math.Log(w.SigmaZero/w.SigmaFull)
}

// Validate checks that c is a usable calibration.
func (c *DenoiserCalibration) Validate() error {
	n := len(c.LogSigma)
	if n < 2 || len(c.Scale) != n {
		return fmt.Errorf("denoiser calibration: %d knots and %d scales (want equal, at least 2)", n, len(c.Scale))
	}
	for i := range n {
		if math.IsNaN(c.LogSigma[i]) || math.IsInf(c.LogSigma[i], 0) || (i > 0 && !(c.LogSigma[i] > c.LogSigma[i-1])) {
			return fmt.Errorf("denoiser calibration: knots must be finite and increasing (knot %d is %v)", i, c.LogSigma[i])
		}
		if !(c.Scale[i] >= 0) || c.Scale[i] > 10 {
			return fmt.Errorf("denoiser calibration: scale %v at knot %d outside [0, 10]", c.Scale[i], i)
		}
	}
	if w := c.Width; w != nil {
		if !(w.SigmaFull > 0) || !(w.SigmaZero > w.SigmaFull) || math.IsInf(w.SigmaZero, 0) {
			return fmt.Errorf("denoiser calibration: width taper from σ %v to %v (want 0 < σ_full < σ_zero)", w.SigmaFull, w.SigmaZero)
		}
		if !(w.Boost >= minWidthBoost && w.Boost <= maxWidthBoost) {
			return fmt.Errorf("denoiser calibration: width factor β %v outside [%v, %v]", w.Boost, minWidthBoost, maxWidthBoost)
		}
	}
	return nil
}

// At returns λ(σ).
func (c *DenoiserCalibration) At(sigma float64) float64 {
	l := c.leastSquares(sigma)
	if c.Width != nil {
		l *= 1 + c.Width.Boost*c.Width.weight(sigma)
	}
	return l
}

// leastSquares returns the least-squares scale at σ, interpolated between
// the knots.
func (c *DenoiserCalibration) leastSquares(sigma float64) float64 {
	ls, n := math.Log(sigma), len(c.LogSigma)
	switch {
	case ls <= c.LogSigma[0]:
		return c.Scale[0]
	case ls >= c.LogSigma[n-1]:
		return c.Scale[n-1]
	}
	i := 1
	for c.LogSigma[i] < ls {
		i++
	}
	w := (ls - c.LogSigma[i-1]) / (c.LogSigma[i] - c.LogSigma[i-1])
	return (1-w)*c.Scale[i-1] + w*c.Scale[i]
}

// CalibrateOptions configure CalibrateDenoiser.
type CalibrateOptions struct {
	// Simulations is the number of simulations from the prior (λ ~ U(0, 1),
	// the family's default designs); default 2000.
	Simulations int
	// Levels is the number of knots, log-spaced from SigmaMin to SigmaMax
	// (defaults 24, 2e−3 and 80, the sampler's range).
	Levels             int
	SigmaMin, SigmaMax float64
	// PerLevel is the number of noise draws per simulation and level;
	// default 8.
	PerLevel int
	// Width is the number of simulations of the width stage (WidthFit);
	// 0 skips it. They follow the least-squares stage's in the same
	// simulation stream.
	Width int
	// WidthSamples is the number of parameter draws per simulation in the
	// width stage; default 50.
	WidthSamples int
	// WidthSigmaFull and WidthSigmaZero bound the width factor's taper
	// (defaults 0.03 and 0.3: where the least-squares slopes of lingauss-k6
	// and symbolic-k15 differ from 1, docs/posterior.md).
	WidthSigmaFull, WidthSigmaZero float64
	// WidthProgress, if set, is called after each evaluation of the width
	// stage with β and the rank variance it gave.
	WidthProgress func(beta, variance, target float64)
	// Seed selects the simulations and the noise.
	Seed uint64
	// Progress, if set, is called after each chunk of simulations with the
	// number done.
	Progress func(done, total int)
}

// Defaults of CalibrateOptions (also `prism calibrate`'s flag defaults,
// and what `prism models` leaves out of the command it prints).
const (
	DefaultCalibrationSimulations = 2000
	DefaultCalibrationLevels      = 24
	DefaultCalibrationPerLevel    = 8
	DefaultWidthSamples           = 50
)

// tagCalibrate is the stream tag of the calibration noise.
const tagCalibrate uint64 = 0x63616c69 // "cali"

// CalibrateDenoiser estimates the denoiser calibration of p's network
// (DenoiserCalibration) on fresh simulations. It leaves p as it found it
// (see SetDenoiserCalibration), but the width stage samples with trial
// calibrations installed on p, so p must not be used concurrently.
func (p *Posterior) CalibrateDenoiser(opt CalibrateOptions) (*DenoiserCalibration, error) {
	if opt.Simulations == 0 {
		opt.Simulations = DefaultCalibrationSimulations
	}
	if opt.Levels == 0 {
		opt.Levels = DefaultCalibrationLevels
	}
	if opt.PerLevel == 0 {
		opt.PerLevel = DefaultCalibrationPerLevel
	}
	if opt.SigmaMin == 0 {
		opt.SigmaMin = DefaultSigmaMin
	}
	if opt.SigmaMax == 0 {
		opt.SigmaMax = DefaultSigmaMax
	}
	if opt.WidthSamples == 0 {
		opt.WidthSamples = DefaultWidthSamples
	}
	if opt.WidthSigmaFull == 0 {
		opt.WidthSigmaFull = 0.03
	}
	if opt.WidthSigmaZero == 0 {
		opt.WidthSigmaZero = 0.3
	}
	if opt.Simulations < 2 || opt.Levels < 2 || opt.PerLevel < 1 || !(opt.SigmaMin > 0) || !(opt.SigmaMax > opt.SigmaMin) {
		return nil, fmt.Errorf("posterior: calibration needs ≥ 2 simulations and levels, ≥ 1 draw per level and 0 < σ_min < σ_max (got %d, %d, %d, %v, %v)",
			opt.Simulations, opt.Levels, opt.PerLevel, opt.SigmaMin, opt.SigmaMax)
	}
	if opt.Width < 0 || (opt.Width > 0 && opt.WidthSamples < 2) || !(opt.WidthSigmaFull > 0) || !(opt.WidthSigmaZero > opt.WidthSigmaFull) {
		return nil, fmt.Errorf("posterior: the width stage needs ≥ 0 simulations, ≥ 2 draws each and 0 < σ_full < σ_zero (got %d, %d, %v, %v)",
			opt.Width, opt.WidthSamples, opt.WidthSigmaFull, opt.WidthSigmaZero)
	}
	G, R, dm := opt.Levels, opt.PerLevel, p.dmax
	c := &DenoiserCalibration{LogSigma: make([]float64, G), Scale: make([]float64, G), Raw: make([]float64, G), SE: make([]float64, G),
		Simulations: opt.Simulations, PerLevel: R, Seed: opt.Seed}
	lo, hi := math.Log(opt.SigmaMin), math.Log(opt.SigmaMax)
	for g := range G {
		c.LogSigma[g] = lo + float64(g)*(hi-lo)/float64(G-1)
	}
	// Per simulation and level: num = Σ (θ₀ − θ)·(D − θ), den = Σ (D − θ)²
	// over its active dimensions and noise draws.
	num := make([][]float64, G)
	den := make([][]float64, G)
	for g := range G {
		num[g], den[g] = make([]float64, opt.Simulations), make([]float64, opt.Simulations)
	}
	const chunkObs = 64
	sims := make([]family.Sample, chunkObs)
	encG := engine.NewInferenceGraph()
	var pcg rand.PCG
	rng := rand.New(&pcg)
	for start := 0; start < opt.Simulations; start += chunkObs {
		n := min(chunkObs, opt.Simulations-start)
		s := sims[:n]
		family.SimulateBatch(p.fam, family.SimOptions{Seed: opt.Seed, Lambda: math.NaN()}, uint64(start), s)
		obs := make([]Observation, n)
		rows := n * R
		rowMasks := make([][]bool, rows)
		active := make([]bool, rows*dm)
		for i := range s {
			obs[i] = Observation{Design: s[i].Design, X: s[i].X}
			for r := range R {
				row := i*R + r
				rowMasks[row] = s[i].Mask
				p.layout.Active(s[i].Mask, active[row*dm:(row+1)*dm])
			}
		}
		if err := p.checkObs(obs); err != nil {
			return nil, err
		}
		encG.Reset()
		enc, err := p.net.Encode(encG, obs)
		if err != nil {
			return nil, fmt.Errorf("posterior: %w", err)
		}
		den0 := p.rawDenoiser(encG, enc, rowMasks, active, R, func(row int) int { return start + row/R })
		theta := make([]float64, rows*dm)
		out := make([]float64, rows*dm)
		for g := range G {
			sigma := math.Exp(c.LogSigma[g])
			for i := range s {
				pcg.Seed(streamSeed(opt.Seed, tagCalibrate, uint64(start+i), uint64(g)))
				for r := range R {
					row := i*R + r
					for k := range dm {
						theta[row*dm+k] = 0
						if active[row*dm+k] {
							theta[row*dm+k] = s[i].Theta[k] + sigma*rng.NormFloat64()
						}
					}
				}
			}
			if err := den0.Denoise(theta, sigma, out, nil); err != nil {
				return nil, err
			}
			for i := range s {
				var a, b float64
				for r := range R {
					row := i*R + r
					for k := range dm {
						if !active[row*dm+k] {
							continue
						}
						x := theta[row*dm+k]
						step := out[row*dm+k] - x
						a += (s[i].Theta[k] - x) * step
						b += step * step
					}
				}
				num[g][start+i], den[g][start+i] = a, b
			}
		}
		if opt.Progress != nil {
			opt.Progress(start+n, opt.Simulations)
		}
	}
	for g := range G {
		var sa, sb float64
		for i := range num[g] {
			sa += num[g][i]
			sb += den[g][i]
		}
		if !(sb > 0) {
			return nil, errors.New("posterior: calibration: the network's step is zero at every simulation (no active parameters?)")
		}
		raw := sa / sb
		var v float64
		for i := range num[g] {
			e := num[g][i] - raw*den[g][i]
			v += e * e
		}
		se := math.Sqrt(v) / sb
		c.Raw[g], c.SE[g] = raw, se
		d := raw - 1
		shrink := 0.0
		if d != 0 {
			shrink = max(0, 1-se*se/(d*d))
		}
		c.Scale[g] = max(0, 1+d*shrink) // a negative slope: the step is noise, take none
	}
	if opt.Width > 0 {
		if err := p.fitWidth(c, opt); err != nil {
			return nil, err
		}
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("posterior: %w", err)
	}
	return c, nil
}

// Limits of the width stage's β: 1 + β·w(σ) stays positive, and a
// network whose posteriors need more than a fivefold step is not one to
// calibrate.
const (
	minWidthBoost = -0.9
	maxWidthBoost = 4
)

// fitWidth runs the width stage (WidthFit) on c, whose Scale holds the
// least-squares scale: it simulates opt.Width data sets, draws
// opt.WidthSamples parameters for each under its true mask with the
// scale times 1 + β·w(σ), and solves rank variance(β) = target for β by
// bracketing and the Illinois variant of regula falsi. Every evaluation
// uses the same simulations and sampler noise, so the variance is a
// deterministic function of β, increasing up to the steps of the ranks
// (a stronger contraction draws narrower posteriors).
func (p *Posterior) fitWidth(c *DenoiserCalibration, opt CalibrateOptions) error {
	n, S := opt.Width, opt.WidthSamples
	w := &WidthFit{SigmaFull: opt.WidthSigmaFull, SigmaZero: opt.WidthSigmaZero, Simulations: n, Samples: S}
	sims := make([]family.Sample, n)
	family.SimulateBatch(p.fam, family.SimOptions{Seed: opt.Seed, Lambda: math.NaN()}, uint64(opt.Simulations), sims)
	obs := make([]Observation, n)
	masks := make([][][]bool, n)
	for i := range sims {
		obs[i] = Observation{Design: sims[i].Design, X: sims[i].X}
		masks[i] = Repeat(sims[i].Mask, S)
	}
	so := SampleOptions{Options: Options{Seed: opt.Seed ^ tagCalibrate}}
	boosted := func(beta float64) *DenoiserCalibration {
		b := *c
		fit := *w
		fit.Boost = beta
		b.Width = &fit
		return &b
	}
	// The values: (simulation, dimension) pairs whose posterior SD at
	// β = 0 is below SigmaZero, the posteriors the factor acts on, each
	// weighted by w(SD): a posterior of SD s is shaped at σ ≲ s, so how
	// much β moves it falls with w(s), and weighting by it keeps the
	// values β barely touches from adding only noise. At the right β every
	// value's expected squared rank deviation is the target, so the
	// weighted mean is too.
	type value struct {
		sim, dim int
		weight   float64
	}
	var values []value
	var wsum float64
	saved := p.cal
	defer func() { p.cal = saved }()
	// Select on draws of their own: the SD of the draws that rank the
	// truth is narrow exactly when those draws happen to bunch, which
	// would push the truth outward and bias β down.
	p.cal = boosted(0)
	sel, err := p.SampleTheta(obs, masks, SampleOptions{Options: Options{Seed: opt.Seed ^ tagCalibrate ^ 1}})
	if err != nil {
		return err
	}
	active := make([]bool, p.dmax)
	for i := range sims {
		p.layout.Active(sims[i].Mask, active)
		for k, a := range active {
			if sd := sampleSD(sel[i].Theta, k); a && sd < w.SigmaZero {
				values = append(values, value{i, k, w.weight(sd)})
				wsum += w.weight(sd)
			}
		}
	}
	if len(values) < 10 {
		return fmt.Errorf("posterior: width stage: %d parameters of %d simulations have posterior SD below %v; need ≥ 10 (more simulations?)", len(values), n, w.SigmaZero)
	}
	terms := make([]float64, len(values)) // each value's squared rank deviation at lastBeta
	lastBeta := math.NaN()
	variance := func(beta float64) (float64, error) {
		p.cal = boosted(beta)
		ts, err := p.SampleTheta(obs, masks, so)
		if err != nil {
			return 0, err
		}
		var sum float64
		for j, v := range values {
			below := 0
			for _, th := range ts[v.sim].Theta {
				if th[v.dim] < sims[v.sim].Theta[v.dim] {
					below++
				}
			}
			u := (float64(below)+0.5)/float64(S+1) - 0.5
			terms[j] = u * u
			sum += v.weight * u * u
		}
		lastBeta = beta
		m := sum / wsum
		if opt.WidthProgress != nil {
			opt.WidthProgress(beta, m, w.Target)
		}
		return m, nil
	}
	s1 := float64(S + 1)
	w.Target = (s1*s1 - 1) / (12 * s1 * s1)

	// Bracket the root of f(β) = variance(β) − target from β = 0 outwards.
	f0, err := variance(0)
	if err != nil {
		return err
	}
	w.Before = f0
	lo, hi, flo, fhi := 0.0, 0.0, f0-w.Target, f0-w.Target
	if flo < 0 {
		for step := 0.25; fhi < 0; step *= 2 {
			lo, flo = hi, fhi
			if hi = lo + step; hi > maxWidthBoost {
				return fmt.Errorf("posterior: width stage: the posteriors are still too wide at β = %v (rank variance %.4f, perfect %.4f)", lo, flo+w.Target, w.Target)
			}
			v, err := variance(hi)
			if err != nil {
				return err
			}
			fhi = v - w.Target
		}
	} else {
		for step := 0.25; flo > 0; step *= 2 {
			hi, fhi = lo, flo
			if lo = max(hi-step, minWidthBoost); lo == hi {
				return fmt.Errorf("posterior: width stage: the posteriors are still too narrow at β = %v (rank variance %.4f, perfect %.4f)", hi, fhi+w.Target, w.Target)
			}
			v, err := variance(lo)
			if err != nil {
				return err
			}
			flo = v - w.Target
		}
	}
	slope := (fhi - flo) / (hi - lo)
	// Illinois: regula falsi that halves the stale end's value.
	beta, fb := lo, flo
	side := 0
	for range 12 {
		if hi-lo < 0.005 || fhi == flo {
			break
		}
		beta = (lo*fhi - hi*flo) / (fhi - flo)
		v, err := variance(beta)
		if err != nil {
			return err
		}
		fb = v - w.Target
		switch {
		case fb == 0:
			lo, hi = beta, beta
		case fb < 0:
			lo, flo = beta, fb
			if side == -1 {
				fhi /= 2
			}
			side = -1
		default:
			hi, fhi = beta, fb
			if side == 1 {
				flo /= 2
			}
			side = 1
		}
	}
	if beta != lastBeta { // the terms' standard deviation is β's
		if _, err := variance(beta); err != nil {
			return err
		}
	}
	w.Boost, w.Variance = beta, fb+w.Target
	w.Values = len(values)
	// The weighted mean's standard error, values taken as independent.
	var ss float64
	for j, t := range terms {
		e := values[j].weight * (t - w.Variance)
		ss += e * e
	}
	if slope > 0 {
		w.SE = math.Sqrt(ss) / wsum / slope
	}
	c.Width = w
	return nil
}

// sampleSD returns the standard deviation of dimension k over draws.
func sampleSD(draws [][]float64, k int) float64 {
	var m, v float64
	for _, th := range draws {
		m += th[k]
	}
	m /= float64(len(draws))
	for _, th := range draws {
		v += (th[k] - m) * (th[k] - m)
	}
	return math.Sqrt(v / float64(len(draws)-1))
}

// SetDenoiserCalibration makes p's parameter sampler and density use the
// calibrated denoiser (nil: the network's own).
func (p *Posterior) SetDenoiserCalibration(c *DenoiserCalibration) error {
	if c != nil {
		if err := c.Validate(); err != nil {
			return fmt.Errorf("posterior: %w", err)
		}
	}
	p.cal = c
	return nil
}

// DenoiserCalibration returns the calibration in use (nil if none).
func (p *Posterior) DenoiserCalibration() *DenoiserCalibration { return p.cal }

// calibratedDenoiser applies a DenoiserCalibration to another denoiser.
type calibratedDenoiser struct {
	inner  Denoiser
	cal    *DenoiserCalibration
	active []bool
	dm     int
}

// Denoise writes θ + λ(σ)(D − θ) and its Jacobian (1 − λ)I + λ·∂D/∂θ.
func (c calibratedDenoiser) Denoise(theta []float64, sigma float64, d, jac []float64) error {
	if err := c.inner.Denoise(theta, sigma, d, jac); err != nil {
		return err
	}
	l := c.cal.At(sigma)
	for i, a := range c.active {
		if a {
			d[i] = theta[i] + l*(d[i]-theta[i])
		}
	}
	if jac == nil {
		return nil
	}
	dm := c.dm
	for r := range len(c.active) / dm {
		act := c.active[r*dm : (r+1)*dm]
		for i, ai := range act {
			if !ai {
				continue
			}
			row := jac[(r*dm+i)*dm : (r*dm+i+1)*dm]
			for k, ak := range act {
				if ak {
					row[k] *= l
				}
			}
			row[i] += 1 - l
		}
	}
	return nil
}

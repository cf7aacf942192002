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
	// Simulations, PerLevel and Seed say how it was estimated.
	Simulations int    `json:"simulations"`
	PerLevel    int    `json:"per_level"`
	Seed        uint64 `json:"seed"`
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
	return nil
}

// At returns λ(σ).
func (c *DenoiserCalibration) At(sigma float64) float64 {
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
	// Seed selects the simulations and the noise.
	Seed uint64
	// Progress, if set, is called after each chunk of simulations with the
	// number done.
	Progress func(done, total int)
}

// tagCalibrate is the stream tag of the calibration noise.
const tagCalibrate uint64 = 0x63616c69 // "cali"

// CalibrateDenoiser estimates the denoiser calibration of p's network
// (DenoiserCalibration) on fresh simulations. It does not change p; see
// SetDenoiserCalibration.
func (p *Posterior) CalibrateDenoiser(opt CalibrateOptions) (*DenoiserCalibration, error) {
	if opt.Simulations == 0 {
		opt.Simulations = 2000
	}
	if opt.Levels == 0 {
		opt.Levels = 24
	}
	if opt.PerLevel == 0 {
		opt.PerLevel = 8
	}
	if opt.SigmaMin == 0 {
		opt.SigmaMin = DefaultSigmaMin
	}
	if opt.SigmaMax == 0 {
		opt.SigmaMax = DefaultSigmaMax
	}
	if opt.Simulations < 2 || opt.Levels < 2 || opt.PerLevel < 1 || !(opt.SigmaMin > 0) || !(opt.SigmaMax > opt.SigmaMin) {
		return nil, fmt.Errorf("posterior: calibration needs ≥ 2 simulations and levels, ≥ 1 draw per level and 0 < σ_min < σ_max (got %d, %d, %d, %v, %v)",
			opt.Simulations, opt.Levels, opt.PerLevel, opt.SigmaMin, opt.SigmaMax)
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
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("posterior: %w", err)
	}
	return c, nil
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

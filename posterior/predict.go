package posterior

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/quantile"
)

// PredictOptions configure the posterior predictive.
type PredictOptions struct {
	SampleOptions
	// Lambda is the complexity knob of the model posterior (global
	// predictive only).
	Lambda float64
	// Mask fixes the model (local predictive); nil averages over models
	// drawn from q(M | x, λ) (global predictive).
	Mask []bool
	// Samples is the number of posterior draws per observation; default 1000.
	Samples int
	// Noise adds observation noise (Family.Simulate) to every draw: the
	// predictive of new data rather than of the noiseless model output.
	Noise bool
}

// Band is a posterior predictive summary over the measurements of one
// observation: the mean and the central 95 % interval [Lo, Hi] of the
// draws, per measurement.
type Band struct {
	Mean, Lo, Hi []float64
}

// Predict computes the posterior predictive for every observation at its
// own design: Forward (or Simulate, with Noise) of θ drawn from
// q(θ | M, x) under the fixed Mask (local predictive), or of joint draws
// M ~ q(M | x, λ), θ ~ q(θ | M, x) (global, model-averaged predictive).
// Quantiles are the order statistics at 2.5 % and 97.5 % (linear
// interpolation).
func (p *Posterior) Predict(obs []Observation, po PredictOptions) ([]Band, error) {
	n := po.Samples
	if n == 0 {
		n = 1000
	}
	if n < 0 {
		return nil, fmt.Errorf("posterior: Predict with %d samples", n)
	}
	if !family.HasLikelihood(p.fam) {
		return nil, fmt.Errorf("posterior: %s has no noiseless forward model (an external simulator), so there is no predictive band; simulate from posterior samples instead (prism sample)", p.fam.Name())
	}
	var masks [][][]bool
	var thetas [][][]float64
	if po.Mask != nil {
		if err := p.checkSupported(po.Mask); err != nil {
			return nil, err
		}
		masks = make([][][]bool, len(obs))
		for i := range masks {
			masks[i] = Repeat(po.Mask, n)
		}
		ts, err := p.SampleTheta(obs, masks, po.SampleOptions)
		if err != nil {
			return nil, err
		}
		thetas = make([][][]float64, len(obs))
		for i := range ts {
			thetas[i] = ts[i].Theta
		}
	} else {
		var err error
		if masks, err = p.SampleMasksSupported(obs, po.Lambda, n, po.Options); err != nil {
			return nil, err
		}
		ts, err := p.SampleTheta(obs, masks, po.SampleOptions)
		if err != nil {
			return nil, err
		}
		thetas = make([][][]float64, len(obs))
		for i := range ts {
			thetas[i] = ts[i].Theta
		}
	}
	return p.PredictDraws(obs, masks, thetas, po), nil
}

// PredictDraws computes the predictive bands of given posterior draws:
// observation i's draws are (masks[i][j], thetas[i][j]) (latent θ), e.g.
// from a corrected posterior. Only po.Noise, po.Seed and po.Offset are
// read.
func (p *Posterior) PredictDraws(obs []Observation, masks [][][]bool, thetas [][][]float64, po PredictOptions) []Band {
	out := make([]Band, len(obs))
	var pcg rand.PCG
	rng := rand.New(&pcg)
	for i, o := range obs {
		d := o.Design
		n := len(thetas[i])
		draws := make([]float64, n*d.N) // [sample][measurement]
		for j := range n {
			y := draws[j*d.N : (j+1)*d.N]
			if po.Noise {
				pcg.Seed(streamSeed(po.Seed, tagNoise, po.Offset+uint64(i), uint64(j)))
				p.fam.Simulate(rng, d, thetas[i][j], masks[i][j], y)
			} else {
				p.fam.Forward(d, thetas[i][j], masks[i][j], y)
			}
		}
		b := Band{Mean: make([]float64, d.N), Lo: make([]float64, d.N), Hi: make([]float64, d.N)}
		col := make([]float64, n)
		for k := range d.N {
			s := 0.0
			for j := range n {
				col[j] = draws[j*d.N+k]
				s += col[j]
			}
			b.Mean[k] = s / float64(n)
			slices.Sort(col)
			b.Lo[k], b.Hi[k] = quantile.Sorted(col, 0.025), quantile.Sorted(col, 0.975)
		}
		out[i] = b
	}
	return out
}

// SampleMasksSupported draws n masks per observation from q(M | x, λ) restricted
// to the prior's support: a network may put a little mass on masks the
// family cannot simulate (e.g. two noise models of symbolic-k15), which
// have p(M | λ) = 0 and so no posterior mass. Those draws are replaced by
// fresh draws, 8n at a time (rejection sampling, exact for the restricted
// q); after 100 such rounds (q's mass on the support below ~1e−3) it gives
// up with an error.
func (p *Posterior) SampleMasksSupported(obs []Observation, lambda float64, n int, opt Options) ([][][]bool, error) {
	prior := p.fam.MaskPrior()
	ms, err := p.SampleMasks(obs, lambda, n, opt)
	if err != nil {
		return nil, err
	}
	masks := make([][][]bool, len(obs))
	for i := range ms {
		masks[i] = ms[i].Masks
	}
	for round := uint64(1); ; round++ {
		var redo []int // observations with an unsupported draw
		for i := range masks {
			for _, m := range masks[i] {
				if math.IsInf(prior.LogProb(m, lambda), -1) {
					redo = append(redo, i)
					break
				}
			}
		}
		if len(redo) == 0 {
			return masks, nil
		}
		if round > 100 {
			return nil, fmt.Errorf("posterior: q(M | x, λ=%v) of observation %d puts almost all its mass on masks outside the prior's support", lambda, redo[0])
		}
		for _, i := range redo {
			o := opt
			o.Seed = opt.Seed ^ (0x9e3779b97f4a7c15 * round)
			o.Offset = opt.Offset + uint64(i)
			more, err := p.SampleMasks(obs[i:i+1], lambda, 8*n, o)
			if err != nil {
				return nil, err
			}
			k := 0
			for j, m := range masks[i] {
				if !math.IsInf(prior.LogProb(m, lambda), -1) {
					continue
				}
				for k < 8*n && math.IsInf(prior.LogProb(more[0].Masks[k], lambda), -1) {
					k++
				}
				if k == 8*n {
					break
				}
				masks[i][j] = more[0].Masks[k]
				k++
			}
		}
	}
}

package eval

import (
	"fmt"
	"math/rand/v2"

	"github.com/prismsbi/prism/posterior"
)

// KSDResult summarises kernel Stein discrepancies over observations.
type KSDResult struct {
	Obs      int    `json:"observations"`
	Samples  int    `json:"samples"`
	KSD      Value  `json:"ksd_mean"`
	KSDPrior Value  `json:"ksd_prior_mean"`
	RKSD     Value  `json:"rksd_mean"`
	RKSDMed  Number `json:"rksd_median"`
	// PerObs are the rKSD values (for the histogram).
	PerObs []float64 `json:"-"`
}

// score returns the active coordinates of θ and of the score
// ∇θ[log p(x|θ,M) + log p(θ|M)] at θ.
func (r *run) score(i int, theta []float64, idx []int, grad []float64) (x, s []float64) {
	o, m := r.obs[i], r.sims[i].Mask
	clear(grad)
	r.f.LogLikelihood(o.Design, o.X, theta, m, grad)
	x = make([]float64, len(idx))
	s = make([]float64, len(idx))
	for k, j := range idx {
		x[k] = theta[j]
		s[k] = grad[j] - theta[j]
	}
	return x, s
}

func (r *run) ksd(ts []posterior.ThetaSet) (*KSDResult, error) {
	res := &KSDResult{Samples: r.cfg.ThetaSamples}
	dmax := r.f.Layout().DMax
	grad := make([]float64, dmax)
	prior := make([]float64, dmax)
	rng := rand.New(rand.NewPCG(r.seed(streamPrior), 0))
	var ksd, ksdp []float64
	for i := 0; i < r.cfg.KSDObs; i++ {
		idx := activeIdx(r.active[i])
		if len(idx) == 0 {
			continue
		}
		S := len(ts[i].Theta)
		xq, sq := make([][]float64, S), make([][]float64, S)
		xp, sp := make([][]float64, S), make([][]float64, S)
		for k := 0; k < S; k++ {
			xq[k], sq[k] = r.score(i, ts[i].Theta[k], idx, grad)
			for _, j := range idx {
				prior[j] = rng.NormFloat64()
			}
			xp[k], sp[k] = r.score(i, prior, idx, grad)
		}
		kq, _, err := KSD(xq, sq, nil)
		if err != nil {
			return nil, fmt.Errorf("eval: observation %d: %w", i, err)
		}
		kp, _, err := KSD(xp, sp, nil)
		if err != nil {
			return nil, fmt.Errorf("eval: observation %d (prior): %w", i, err)
		}
		ksd = append(ksd, kq)
		ksdp = append(ksdp, kp)
		res.PerObs = append(res.PerObs, kq/kp)
	}
	res.Obs = len(ksd)
	res.KSD.Value, res.KSD.SE = MeanSE(ksd)
	res.KSDPrior.Value, res.KSDPrior.SE = MeanSE(ksdp)
	res.RKSD.Value, res.RKSD.SE = MeanSE(res.PerObs)
	res.RKSDMed = Number(Quantile(res.PerObs, 0.5))
	return res, nil
}

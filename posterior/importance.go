package posterior

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/family"
)

// Importance is the importance-sampling summary of one observation under
// one model (paper App. B.1).
type Importance struct {
	Mask []bool
	// Theta are the proposals θ_j ~ q(θ | M, x) (latent).
	Theta [][]float64
	// LogQ is log q(θ_j | M, x), LogLik log p(x | θ_j, M), LogPrior the
	// latent prior log p(θ_j | M) = Σ_active log N(θ_ji; 0, 1).
	LogQ, LogLik, LogPrior []float64
	// LogW = LogLik + LogPrior − LogQ are the log importance weights.
	LogW []float64
	// ESS is the normalised effective sample size (Σw)²/(N Σw²) ∈ (0, 1].
	ESS float64
	// LogEvidence is log p̂(x | M) = log mean_j w_j, and LogEvidenceSE its
	// delta-method standard error √(Var w / N)/mean w.
	LogEvidence, LogEvidenceSE float64
}

// ImportanceSample draws n parameter samples with their ODE log-densities
// for every observation under model mask (one mask for all, or
// masks[i] per observation when len(masks) == len(obs)) and computes
// importance weights w = p(x|θ,M)p(θ|M)/q(θ|M,x) in latent space, the
// normalised ESS and the importance-sampling evidence estimate.
func (p *Posterior) ImportanceSample(obs []Observation, masks [][]bool, n int, so SampleOptions) ([]Importance, error) {
	if len(masks) != 1 && len(masks) != len(obs) {
		return nil, fmt.Errorf("posterior: ImportanceSample with %d masks for %d observations", len(masks), len(obs))
	}
	if n <= 0 {
		return nil, fmt.Errorf("posterior: ImportanceSample of %d samples", n)
	}
	rows := make([][][]bool, len(obs))
	for i := range rows {
		m := masks[0]
		if len(masks) > 1 {
			m = masks[i]
		}
		rows[i] = Repeat(m, n)
	}
	ts, err := p.SampleAndLogProb(obs, rows, so)
	if err != nil {
		return nil, err
	}
	out := make([]Importance, len(obs))
	for i := range ts {
		m := rows[i][0]
		act := p.Active(m)
		im := Importance{Mask: m, Theta: ts[i].Theta, LogQ: ts[i].LogQ,
			LogLik: make([]float64, n), LogPrior: make([]float64, n), LogW: make([]float64, n)}
		d := obs[i].Design
		for j, th := range ts[i].Theta {
			im.LogLik[j] = p.fam.LogLikelihood(d, obs[i].X, th, m, nil)
			im.LogPrior[j] = family.LogPriorLatent(th, act)
			im.LogW[j] = im.LogLik[j] + im.LogPrior[j] - im.LogQ[j]
		}
		im.ESS = ESS(im.LogW)
		im.LogEvidence, im.LogEvidenceSE = LogMeanExp(im.LogW)
		out[i] = im
	}
	return out, nil
}

// ESS returns the normalised effective sample size (Σw)²/(N·Σw²) of
// importance weights given by their logarithms (0 if none is finite).
func ESS(logw []float64) float64 {
	mx := maxFinite(logw)
	if math.IsInf(mx, -1) {
		return 0
	}
	s1, s2 := 0.0, 0.0
	for _, l := range logw {
		w := math.Exp(l - mx)
		s1 += w
		s2 += w * w
	}
	return s1 * s1 / (float64(len(logw)) * s2)
}

// LogMeanExp returns log((1/N)Σ exp(l_j)) and the delta-method standard
// error of that estimate, √(Var w/N)/mean w with the sample variance
// (divisor N−1; +Inf for N < 2).
func LogMeanExp(logw []float64) (mean, se float64) {
	n := float64(len(logw))
	mx := maxFinite(logw)
	if math.IsInf(mx, -1) {
		return math.Inf(-1), math.Inf(1)
	}
	s1 := 0.0
	for _, l := range logw {
		s1 += math.Exp(l - mx)
	}
	m := s1 / n
	if len(logw) < 2 {
		return mx + math.Log(m), math.Inf(1)
	}
	v := 0.0
	for _, l := range logw {
		d := math.Exp(l-mx) - m
		v += d * d
	}
	v /= n - 1
	return mx + math.Log(m), math.Sqrt(v/n) / m
}

func maxFinite(x []float64) float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		if v > mx && !math.IsInf(v, 1) && !math.IsNaN(v) {
			mx = v
		}
	}
	return mx
}

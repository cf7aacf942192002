package correct

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// Supported keeps the masks with positive prior probability at λ (the
// others have no posterior mass).
func Supported(f family.Family, masks [][]bool, lambda float64) [][]bool {
	var out [][]bool
	for _, m := range masks {
		if !math.IsInf(f.MaskPrior().LogProb(m, lambda), -1) {
			out = append(out, m)
		}
	}
	return out
}

// Candidates corrects every observation over its candidate models
// cands[i] (or cands[0] for all): those with positive prior probability
// at λ (Supported), pruned by the network's q (Prune with minQ and
// maxModels), then Correct. It returns the corrected posteriors and how
// many of them failed their diagnostics.
func Candidates(p *posterior.Posterior, obs []posterior.Observation, cands [][][]bool, lambda, minQ float64, maxModels int, s Settings) ([]Corrected, int, error) {
	sup := make([][][]bool, len(cands))
	for i, cs := range cands {
		if sup[i] = Supported(p.Family(), cs, lambda); len(sup[i]) == 0 {
			return nil, 0, fmt.Errorf("no candidate model has positive prior probability at λ = %v", lambda)
		}
	}
	sup, err := Prune(p, obs, lambda, sup, minQ, maxModels, s.Sample.Options)
	if err != nil {
		return nil, 0, err
	}
	res, err := Correct(p, obs, sup, lambda, s)
	if err != nil {
		return nil, 0, err
	}
	failed := 0
	for _, c := range res {
		if c.Failed {
			failed++
		}
	}
	return res, failed, nil
}

// Joint returns n joint samples (M, θ) from the corrected posterior (Draw)
// as a posterior.JointSet whose LogQ is the log corrected probability of
// each sample's model.
func (c *Corrected) Joint(n int) posterior.JointSet {
	var js posterior.JointSet
	js.Masks, js.Theta = c.Draw(n)
	js.LogQ = make([]float64, len(js.Masks))
	for j, m := range js.Masks {
		for k, r := range c.Results {
			if &r.Mask[0] == &m[0] {
				js.LogQ[j] = c.LogPost[k]
			}
		}
	}
	return js
}

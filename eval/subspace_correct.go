package eval

import (
	"fmt"
	"math"
	"sort"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/posterior"
)

// SubspaceCorrected runs the subspace classification test with the model
// posterior corrected by the likelihood (package correct): for every
// observation the top models of the subspace under q(M | x, λ) are
// corrected (their log evidence log p(x | M) estimated by importance
// sampling or SMC) and ranked by log p(x | M) + log p(M | λ), exact up to
// the estimator's error; the other subspace models follow, in q's order.
// top is how many models per observation are corrected.
func SubspaceCorrected(p *posterior.Posterior, cfg SubspaceConfig, cs correct.Settings, top int) (*SubspaceResult, error) {
	if top < 1 {
		return nil, fmt.Errorf("eval: corrected subspace test needs at least one corrected model per observation, have %d", top)
	}
	prior := p.Family().MaskPrior()
	byQ := qScorer(p)
	diag := &SubspaceCorrection{}
	score := func(obs []posterior.Observation, lams []float64, space [][]bool) ([][]float64, error) {
		out, err := byQ(obs, lams, space)
		if err != nil {
			return nil, err
		}
		// The corrected candidates of each observation: its top models
		// under q.
		cands := make([][][]bool, len(obs))
		which := make([][]int, len(obs))
		for i := range obs {
			order := make([]int, len(space))
			for m := range order {
				order[m] = m
			}
			sort.SliceStable(order, func(a, b int) bool { return out[i][order[a]] > out[i][order[b]] })
			which[i] = order[:min(top, len(order))]
			for _, m := range which[i] {
				cands[i] = append(cands[i], space[m])
			}
		}
		res, err := correct.Evidence(p, obs, cands, cs)
		if err != nil {
			return nil, fmt.Errorf("eval: correcting the subspace: %w", err)
		}
		for i := range obs {
			corrected := make([]float64, len(which[i]))
			for c, m := range which[i] {
				corrected[c] = res[i][c].LogEvidence + prior.LogProb(space[m], lams[i])
			}
			diag.add(correct.Models(p.Family(), res[i], lams[i]), res[i])
			mergeCorrected(out[i], which[i], corrected)
		}
		return out, nil
	}
	r, err := SubspaceClassify(p.Family(), score, cfg)
	if err != nil {
		return nil, err
	}
	r.Correction = diag
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "correction: %d of %d corrected models failed their diagnostics; %d of %d observations failed (a failed model holds ≥ 1 %% of the corrected mass)\n",
			diag.FailedModels, diag.Models, diag.FailedObs, diag.Obs)
	}
	return r, nil
}

// SubspaceCorrection counts the likelihood correction's failures in a
// corrected subspace test, with the rule of the commands (correct.Models;
// docs/posterior.md, "Diagnostics and failure"): a corrected model fails
// when its ESS, its log-evidence SE or its tempering is outside the limits;
// an observation fails when a failed model holds at least 1 % of the
// corrected posterior mass of its corrected models.
type SubspaceCorrection struct {
	Models       int `json:"models"`
	FailedModels int `json:"failed_models"`
	Obs          int `json:"observations"`
	FailedObs    int `json:"failed_observations"`
}

// add counts one observation: its corrected model posterior and the
// per-model results it was built from.
func (d *SubspaceCorrection) add(mp correct.ModelPosterior, res []correct.Result) {
	d.Obs++
	d.Models += len(res)
	for _, r := range res {
		if r.Failed {
			d.FailedModels++
		}
	}
	if mp.Failed {
		d.FailedObs++
	}
}

// uncorrectedOffset puts the models that were not corrected below every
// corrected one: a log evidence plus log prior is far above −1e12 for any
// data set prism handles, and log q − 1e12 still orders log q to ≈ 1e−4
// (float64 spacing at 1e12), so the uncorrected keep q's order.
const uncorrectedOffset = -1e12

// mergeCorrected turns one observation's scores log q(M | x, λ) into the
// corrected ranking in place: the models which[c] get corrected[c] (log
// evidence + log prior), every other model — and a corrected one whose
// estimate is NaN — ranks after them in q's order.
func mergeCorrected(scores []float64, which []int, corrected []float64) {
	for m := range scores {
		scores[m] += uncorrectedOffset
	}
	for c, m := range which {
		if !math.IsNaN(corrected[c]) {
			scores[m] = corrected[c]
		}
	}
}

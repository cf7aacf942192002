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
		// Uncorrected models rank after every corrected one, in q's order.
		const below = -1e300
		for i := range obs {
			corrected := make([]float64, len(which[i]))
			for c, m := range which[i] {
				corrected[c] = res[i][c].LogEvidence + prior.LogProb(space[m], lams[i])
				if math.IsNaN(corrected[c]) {
					corrected[c] = below
				}
			}
			for m := range out[i] {
				out[i][m] = below + out[i][m]*1e-300
			}
			for c, m := range which[i] {
				out[i][m] = corrected[c]
			}
		}
		return out, nil
	}
	return SubspaceClassify(p.Family(), score, cfg)
}

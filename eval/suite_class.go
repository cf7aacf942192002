package eval

import "github.com/prismsbi/prism/posterior"

// ClassResult holds the classification view (paper App. B).
type ClassResult struct {
	Models    int   `json:"models"`
	Obs       int   `json:"observations"`
	Top1      Value `json:"top1"`
	Top5      Value `json:"top5"`
	Precision Value `json:"macro_precision"`
	Recall    Value `json:"macro_recall"`
	F1        Value `json:"macro_f1"`
	Classes   int   `json:"classes_present"`
	// BayesTop1 and BayesTop5 are the accuracies of the exact posterior
	// (families with a closed-form evidence): the Bayes-optimal ceiling.
	BayesTop1 *Value      `json:"bayes_top1,omitempty"`
	BayesTop5 *Value      `json:"bayes_top5,omitempty"`
	Labels    []string    `json:"labels"`
	Matrix    [][]float64 `json:"confusion"`
}

// classify runs the classification test (classifySubspace) with the
// network's log q(M | x, λ) at the run's λ on cfg.N observations and a
// subspace of cfg.ClassModels masks: the subspace test's
// (SubspaceClassify) with the run's seed.
func (r *run) classify() (*ClassResult, error) {
	cfg := r.cfg
	score := func(obs []posterior.Observation, lams []float64, space [][]bool) ([][]float64, error) {
		return r.logProbMasks(obs, lams, [][][]bool{space})
	}
	s, err := classifySubspace(r.f, score, classTest{Models: cfg.ClassModels, Obs: cfg.N, Lambda: cfg.Lambda, Seed: cfg.Seed,
		BootReps: cfg.BootReps, Stage: "classification"}, r.progress)
	if err != nil {
		return nil, err
	}
	return &ClassResult{Models: s.Models, Obs: s.Obs, Top1: s.Top1, Top5: s.Top5, Precision: s.Precision, Recall: s.Recall,
		F1: s.F1, Classes: s.Classes, BayesTop1: s.BayesTop1, BayesTop5: s.BayesTop5, Labels: s.Labels, Matrix: s.Matrix}, nil
}

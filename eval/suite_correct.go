package eval

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/prismsbi/prism/correct"
)

// CorrectedSBC is the parameter SBC of the likelihood-corrected posterior
// (Config.Correct) of each test observation under its true model: the
// network's draws of q(θ | M, x) turned into weighted samples of
// p(θ | M, x) by importance sampling or SMC (package correct), and S of
// them drawn by systematic resampling and ranked against the truth like
// the network's own draws. It says whether `--correct` gives calibrated
// parameters where the network alone does not.
type CorrectedSBC struct {
	Method       string `json:"method"`
	Observations int    `json:"observations"`
	// Particles, CESS and Moves are the SMC's settings, Samples the
	// importance samples of IS (correct.Settings).
	Particles int     `json:"particles,omitempty"`
	CESS      float64 `json:"cess,omitempty"`
	Moves     int     `json:"moves,omitempty"`
	Samples   int     `json:"samples,omitempty"`
	Calibration
	// Failed counts the corrections whose diagnostics were outside the
	// settings' limits (Result.Failed); their draws are kept in the SBC,
	// which judges the procedure as a user runs it.
	Failed int `json:"failed"`
	// Passed is the same SBC over the observations whose correction passed
	// its diagnostics, the ones a user is told to trust (nil when fewer
	// than two passed). Which observations pass depends only on the data
	// and the sampler's randomness, not on the truth given the data, so a
	// correct posterior stays calibrated on them.
	Passed *Calibration `json:"passed,omitempty"`
	// ESS is the mean normalised effective sample size of the weighted
	// samples, with its SE over observations.
	ESS Value `json:"mean_ess"`
	// Seconds is the wall time of the corrections.
	Seconds float64 `json:"seconds"`
}

// correctedParamSBC runs the corrected parameter SBC on the first
// Config.CorrectObs test observations.
func (r *run) correctedParamSBC() (*CorrectedSBC, error) {
	n, S := r.cfg.CorrectObs, r.cfg.ThetaSamples
	masks := make([][][]bool, n)
	for i := range masks {
		masks[i] = [][]bool{r.sims[i].Mask}
	}
	s, err := r.cfg.Correct.Resolved()
	if err != nil {
		return nil, fmt.Errorf("eval: corrected parameter SBC: %w", err)
	}
	s.Sample = r.so
	s.Sample.Seed = r.seed(streamCorrect)
	start := time.Now()
	res, err := correct.Evidence(r.p, r.obs[:n], masks, s)
	if err != nil {
		return nil, fmt.Errorf("eval: corrected parameter SBC: %w", err)
	}
	out := &CorrectedSBC{Method: s.Method.String(), Observations: n, Seconds: time.Since(start).Seconds()}
	if s.Method == correct.IS {
		out.Samples = s.Samples
	} else {
		out.Particles, out.CESS, out.Moves = s.Particles, s.CESS, s.Moves
	}
	rng := rand.New(rand.NewPCG(r.seed(streamCorrect), 1))
	draws := make([][][]float64, n)
	ess := make([]float64, n)
	var ok []int // observations whose correction passed its diagnostics
	for i := range draws {
		c := &res[i][0]
		if !c.Failed {
			ok = append(ok, i)
		}
		ess[i] = c.ESS
		draws[i] = c.Draw(rng, S)
	}
	out.Failed = n - len(ok)
	out.ESS.Value, out.ESS.SE = MeanSE(ess)
	if out.Calibration, err = r.thetaCalibration(r.sims[:n], r.active[:n], draws); err != nil {
		return nil, err
	}
	if len(ok) >= 2 && len(ok) < n {
		c, err := r.thetaCalibration(pick(r.sims, ok), pick(r.active, ok), pick(draws, ok))
		if err != nil {
			return nil, err
		}
		out.Passed = &c
	} else if len(ok) == n {
		out.Passed = &out.Calibration
	}
	return out, nil
}
